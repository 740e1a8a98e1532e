"""The error types of callmaybe: one base class, one subclass per kind of bad input."""


class CallmaybeError(Exception):
    """Base class of every error callmaybe raises on bad input; its message is one line a user can act on."""

    exit_code = 2


class CatalogError(CallmaybeError):
    """A function catalog is malformed or uses a schema keyword the compiler does not support."""


class SchemaError(CatalogError):
    """A JSON schema cannot be compiled (unsupported keyword, unsatisfiable constraint)."""


class VocabularyError(CallmaybeError):
    """A tokenizer cannot be found, loaded or turned into token bytes."""


class IndexFileError(CallmaybeError):
    """An index file is missing, corrupt, of another format version, or fingerprinted to another tokenizer/catalog."""


class ModelError(CallmaybeError):
    """A model cannot be fetched, verified, converted or loaded."""


class InputError(CallmaybeError):
    """An input file (prompts, catalog path) is missing or malformed."""


class BudgetExhausted(CallmaybeError):
    """The token budget is smaller than the shortest completion of a call."""


class TokenNotAllowed(CallmaybeError):
    """A token was advanced that the mask of the current state does not allow."""


class IndexVersionError(IndexFileError):
    """An index file of a version this callmaybe cannot read."""


class CacheError(CallmaybeError):
    """The cache folder cannot be created or written."""


class OutputError(CallmaybeError):
    """The results could not be written (the answers are kept in the run's journal)."""

    exit_code = 1


class Interrupted(BaseException):
    """A run stopped by SIGINT or SIGTERM; ``exit_code`` is 128 + the signal's number (130, 143), as a shell
    reports it. A BaseException, like KeyboardInterrupt, so that no per-request handler swallows it."""

    def __init__(self, signum: int, message: str = ""):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
