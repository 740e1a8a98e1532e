"""jsonschema validators for our schemas: the draft a schema names (else a default), its format checker,
ECMA-262 ``\\p{...}`` property classes in patterns read as the grammar reads them (:mod:`.patterns`), and
patterns searched in linear time by RE2 (:mod:`.linear`, installed into jsonschema when this module loads).

Used wherever a value or a schema is checked with jsonschema: the catalog's check of each schema at load
(:func:`check_schema`), the check of each call after generation and grounding (``runtime``), and the
compiler's checks of enum values and ``contains`` items. Messages name the patterns as written.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import quote

import jsonschema

from .linear import UncheckablePattern, install, re2_syntax
from .patterns import UnknownProperty, each_pattern, python_schema

__all__ = ["UnknownProperty", "UncheckablePattern", "Checker", "check_schema"]

install()  # every pattern jsonschema searches, it searches in linear time


def _original_at(original: Any, translated: Any, path) -> tuple[Any, Any]:
    """The parts of ``original`` and of its translation (:func:`~.patterns.python_schema`) at ``path`` (keys
    and indices of the translated schema; a ``patternProperties`` key found by its position, since
    translation renames keys but keeps their order); (None, None) where the path leaves the schema."""
    for step in path:
        if isinstance(translated, dict) and isinstance(original, dict) and step in translated:
            keys = list(translated)
            if step not in original and keys.index(step) < len(original):  # a renamed (translated) key
                original = original[list(original)[keys.index(step)]]
            else:
                original = original.get(step)
            translated = translated[step]
        elif isinstance(translated, list) and isinstance(original, list) and isinstance(step, int) \
                and step < len(translated):
            original, translated = original[step], translated[step]
        else:
            return None, None
    return original, translated


def _patterns(original: Any, translated: Any) -> dict[str, str]:
    """translated pattern -> as written, for one schema object's ``pattern`` and ``patternProperties``."""
    out: dict[str, str] = {}
    if not (isinstance(original, dict) and isinstance(translated, dict)):
        return out
    if isinstance(original.get("pattern"), str) and isinstance(translated.get("pattern"), str):
        out[translated["pattern"]] = original["pattern"]
    if isinstance(original.get("patternProperties"), dict) and isinstance(translated.get("patternProperties"), dict):
        out.update(zip(translated["patternProperties"], original["patternProperties"]))
    return {k: v for k, v in out.items() if k != v}


def _restore(message: str, written: dict[str, str]) -> str:
    """``message`` with each translated pattern (as jsonschema quotes it) put back as written."""
    for translated, original in sorted(written.items(), key=lambda kv: -len(kv[0])):
        message = message.replace(repr(translated), repr(original))
    return message


class Checker:
    """Checks values against ``schema`` with jsonschema: the validator class its ``$schema`` names (else
    ``default``), with that class's format checker unless ``formats`` is False. Raises UnknownProperty for a
    pattern property class the check cannot read (:func:`~.patterns.python_pattern`)."""

    def __init__(self, schema: Any, default: type = jsonschema.Draft202012Validator, formats: bool = True):
        self.schema = schema
        self.translated = python_schema(schema)
        self.cls = jsonschema.validators.validator_for(schema, default=default)
        self.validator = self.cls(self.translated, format_checker=self.cls.FORMAT_CHECKER if formats else None)

    def is_valid(self, value: Any) -> bool:
        """True when ``value`` is valid."""
        return self.validator.is_valid(value)

    def errors(self, value: Any) -> list[jsonschema.ValidationError]:
        """jsonschema's errors on ``value`` (their schemas hold the translated patterns)."""
        return list(self.validator.iter_errors(value))

    def message(self, value: Any) -> str | None:
        """The message of the most relevant error on ``value`` (jsonschema's ``best_match``), with patterns as
        written; None when ``value`` is valid."""
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is None:
            return None
        if self.translated is self.schema:
            return error.message
        original, translated = _original_at(self.schema, self.translated, list(error.schema_path)[:-1])
        return _restore(error.message, _patterns(original, translated))


def as_uri(text: str) -> str:
    """The URI an IRI maps to (RFC 3987 section 3.1): each non-ASCII character percent-encoded as its UTF-8
    bytes, ASCII kept as it is (``#/$defs/контакт`` -> ``#/$defs/%D0%BA...``)."""
    return "".join(c if ord(c) < 0x80 else quote(c, safe="") for c in text)


@lru_cache(maxsize=None)
def _meta_format_checker(cls: type) -> jsonschema.FormatChecker:
    """The format checker the meta-schema of ``cls`` is checked with: its own, but ``uri`` and ``uri-reference``
    read as IRIs (mapped by :func:`as_uri` before the check), so that a ``$ref`` to a definition named in
    another script (``#/$defs/контакт``), which jsonschema resolves, is not refused as a malformed schema."""
    meta = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    checker = jsonschema.FormatChecker(())
    checker.checkers = dict(meta.FORMAT_CHECKER.checkers)
    for name in ("uri", "uri-reference"):
        if name in checker.checkers:
            func, raises = checker.checkers[name]
            checker.checkers[name] = (lambda value, func=func: func(as_uri(value) if isinstance(value, str) else value),
                                      raises)
    return checker


def check_schema(schema: Any, default: type = jsonschema.Draft202012Validator) -> None:
    """Check ``schema`` against its draft's meta-schema (patterns read as :class:`Checker` reads them, URIs as
    IRIs: :func:`_meta_format_checker`), and that the check after generation can search each of its patterns
    in linear time. Raises jsonschema.SchemaError for an invalid schema, UnknownProperty for a property class
    the check after generation cannot read, UncheckablePattern for a pattern it cannot search in linear time
    (:mod:`.linear`)."""
    cls = jsonschema.validators.validator_for(schema, default=default)
    translated = python_schema(schema)
    try:
        cls.check_schema(translated, format_checker=_meta_format_checker(cls))
    except jsonschema.SchemaError as exc:
        if translated is not schema:  # name the schema's own text, not its translation
            original, now = _original_at(schema, translated, list(exc.absolute_path))
            if isinstance(now, dict) and isinstance(original, dict):  # patternProperties: its keys
                written = dict(zip(now, original))
            else:
                written = {now: original} if isinstance(now, str) and isinstance(original, str) else {}
            exc.message = _restore(exc.message, {k: v for k, v in written.items() if isinstance(k, str) and k != v})
        raise
    for pattern in each_pattern(schema):
        re2_syntax(pattern)  # readable by the linear search (compiled when first searched: it may take a second)
