"""Where a model or tokenizer named by the user comes from: the registry, a local path, or the model hub.

One classifier (:func:`classify`) and one hub fetch (:func:`fetch_from_hub`) with one offline policy, shared by
the vocabulary loader (:mod:`callmaybe.core.vocabulary`) and the runtime's model loader. Each caller words its
own error (a VocabularyError, a ModelError) from the :class:`HubUnavailable` raised here.

Offline policy (the only one): the local hub cache first; then, unless ``HF_HUB_OFFLINE`` is set or the hub's
host does not accept a connection within 3 s, the network. huggingface_hub is optional and imported only when a
hub id is fetched. Imports neither torch nor transformers.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["REGISTRY", "PATH", "HUB", "UNKNOWN", "Source", "classify", "is_hub_id", "HubUnavailable",
           "fetch_from_hub", "hub_unreachable_reason"]

#: Kinds of :class:`Source`.
REGISTRY, PATH, HUB, UNKNOWN = "registry", "path", "hub", "unknown"

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")

# huggingface_hub errors that mean "no such repository or file" (the hub answered); any other failure means the
# hub could not be asked. Matched by class name so that huggingface_hub need not be imported to tell them apart.
_MISSING = ("RepositoryNotFoundError", "EntryNotFoundError", "RemoteEntryNotFoundError", "GatedRepoError")


@dataclass(frozen=True)
class Source:
    """What a model or tokenizer spec names.

    * ``kind``: :data:`REGISTRY` (``name`` is the registry key), :data:`PATH` (``path`` is the expanded local
      path, which exists: a file or a folder), :data:`HUB` (``name`` is the hub repository id) or
      :data:`UNKNOWN` (none of these; ``spec`` cannot name anything).
    * ``spec``: the text as given.
    """

    spec: str
    kind: str
    name: str = ""
    path: Path | None = None


def is_hub_id(spec: str) -> bool:
    """True when ``spec`` has the shape of a hub repository id (``name`` or ``owner/name``; letters, digits,
    ``_ . -``) and does not end like a file name (``.json``, ``.gguf``)."""
    return _HUB_ID.fullmatch(spec) is not None and not spec.endswith((".json", ".gguf"))


def classify(spec: str) -> Source:
    """Classify ``spec``, in this order, as a registry model name (case-insensitive; see
    :data:`callmaybe.core.registry.MODELS`), an existing local path (``~`` expanded), a hub repository id (see
    :func:`is_hub_id`), or unknown. Touches neither the network nor the registry's files; raises nothing."""
    from . import registry  # lazily: it pulls in the progress bars, which a cached vocabulary load never needs

    name = spec.lower()
    if name in registry.MODELS:
        return Source(spec, REGISTRY, name=name)
    try:
        path = Path(spec).expanduser()
        exists = path.exists()
    except (OSError, ValueError, RuntimeError):  # too long for a path, a NUL byte, ~unknown-user: not a path
        exists = False
    if exists:
        return Source(spec, PATH, path=path)
    if is_hub_id(spec):
        return Source(spec, HUB, name=spec)
    return Source(spec, UNKNOWN)


class HubUnavailable(Exception):
    """The model hub could not provide a repository's files.

    ``missing`` is True when the hub answered that the repository (or ``wanted``, the required file) does not
    exist or is gated, False when it could not be asked (offline, unreachable, huggingface_hub not installed).
    ``reason`` is one line, ``"<exception class>: <its first line>"``. :attr:`phrase` completes a sentence that
    ends in "the model hub".
    """

    def __init__(self, repo_id: str, reason: str, missing: bool = False, wanted: str | None = None):
        self.repo_id, self.reason, self.missing, self.wanted = repo_id, reason, missing, wanted
        super().__init__(f"model hub repository '{repo_id}': the hub {self.phrase}")

    @property
    def phrase(self) -> str:
        """``"is unreachable (<reason>)"``, ``"has no <wanted> for it (<reason>)"`` or ``"has no such
        repository (<reason>)"``."""
        if not self.missing:
            return f"is unreachable ({self.reason})"
        if self.wanted:
            return f"has no {self.wanted} for it ({self.reason})"
        return f"has no such repository ({self.reason})"

    @classmethod
    def from_exception(cls, repo_id: str, exc: BaseException, wanted: str | None = None) -> HubUnavailable:
        """The HubUnavailable that ``exc`` (raised by huggingface_hub, or by the network under it) stands for."""
        kind = type(exc).__name__
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return cls(repo_id, f"{kind}: {first}" if first else kind, missing=kind in _MISSING, wanted=wanted)


def hub_unreachable_reason() -> str | None:
    """None when the hub's host (``$HF_ENDPOINT``, else huggingface.co) accepts a TCP connection within 3 s, or
    when a proxy is configured (it cannot be probed); else one line saying why not.

    huggingface_hub itself retries a failed connection five times with back-off (about 25 s, with a warning per
    try); this probe makes an offline machine fail at once.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=3).close()
    except OSError as e:
        return f"cannot connect to {host}:{port}: {e}"
    return None


def fetch_from_hub(repo_id: str, files: Sequence[str] | None = None, optional: Sequence[str] = ()) -> Path:
    """Return the local folder (a snapshot in huggingface_hub's cache) of hub repository ``repo_id``.

    ``files``: the top-level files that must be there (the first one names the file in the error when the hub
    has no such file), downloaded one by one; None: the whole repository (``snapshot_download``). ``optional``:
    top-level files fetched when they exist (a missing one is skipped). Follows the module's offline policy:
    when every file of ``files`` is in the local hub cache, nothing is asked of the network (optional files not
    cached are then skipped). Sets ``HF_HUB_ETAG_TIMEOUT=5`` and ``HF_HUB_DOWNLOAD_TIMEOUT=10`` (seconds) unless
    already set.

    Raises HubUnavailable when huggingface_hub is not installed, the hub cannot be reached and the files are
    not cached, or the hub has no such repository or file; ValueError for an empty ``files``.
    """
    if files is not None and not files:
        raise ValueError("files must name at least one file (or be None for the whole repository)")
    wanted = files[0] if files else None
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:
        raise HubUnavailable(repo_id, "ImportError: huggingface_hub is not installed") from None

    def download(local_only: bool) -> Path:
        # Looked up on the module at each call (not imported by name), so that tests can replace them.
        if files is None:
            return Path(huggingface_hub.snapshot_download(repo_id, local_files_only=local_only))
        folder = None
        for name in files:
            got = Path(huggingface_hub.hf_hub_download(repo_id, name, local_files_only=local_only))
            folder = folder or got.parent
        for name in optional:
            try:
                huggingface_hub.hf_hub_download(repo_id, name, local_files_only=local_only)
            except Exception:  # noqa: BLE001 - an optional file may be absent
                pass
        return folder

    try:
        return download(local_only=True)
    except Exception as e:  # noqa: BLE001 - not cached (or a bad id): the network decides
        not_cached = e
    if constants.HF_HUB_OFFLINE:
        raise HubUnavailable.from_exception(repo_id, not_cached, wanted) from None
    unreachable = hub_unreachable_reason()
    if unreachable is not None:
        raise HubUnavailable(repo_id, f"ConnectionError: {unreachable}")
    try:
        return download(local_only=False)
    except Exception as e:  # noqa: BLE001 - any failure becomes one line
        raise HubUnavailable.from_exception(repo_id, e, wanted) from None
