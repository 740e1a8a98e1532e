"""Putting a server together around a loaded runtime: the index cache over ``Runtime.index_for`` and
``Runtime.index_for_schema``, the app, and uvicorn. ``cli.py`` builds the runtime (with the compiler) and the
engine, and calls these.
"""

from __future__ import annotations

import socket
from typing import Any

from ..core.errors import SchemaError
from ..core.indexfile import REPEATED_KEYS, IndexData
from ..core.linear import UncheckablePattern, linear_regex
from ..core.patterns import each_pattern
from ..runtime.decoding.masks import TokenIndex
from ..runtime.decoding.index import open_index
from .app import create_app
from .submit import EngineLike
from .limits import CompileRate
from .tools import IndexCache


def enforced(index: IndexData, schemas: dict[str, Any]) -> IndexData:
    """``index``, when its grammar enforces every keyword of its schemas. Raises SchemaError naming the first
    note of its header's ``not_enforced`` (function or schema, parameter, keyword, why) otherwise: a request is
    a contract, so a schema whose answer could fail the check after generation is refused before anything is
    decoded. Repeated extra keys of an open object (:data:`~callmaybe.core.indexfile.REPEATED_KEYS`) are
    taken: the text is valid JSON, and the check after generation still reads the value. Each pattern of
    ``schemas`` (the index's schemas by their name in messages: ``function 'f'``) is compiled for that check
    now (in the compile worker, under the compile rate), so that one too large for it is refused here too
    rather than after generation."""
    for where, schema in schemas.items():
        for pattern in each_pattern(schema):
            try:
                linear_regex(pattern)
            except UncheckablePattern as exc:
                raise SchemaError(f"{where}: {exc}") from None
    left = [n for n in index.header.get("not_enforced", []) if not n.endswith(f"({REPEATED_KEYS})")]
    if left:
        more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
        raise SchemaError(f"{left[0]}: not enforced by the grammar{more}, so an answer could fail it after "
                          "generation; this server takes only schemas it enforces (callmaybe compile --explain "
                          "says which keywords are)")
    return index


def runtime_indexes(runtime, capacity: int = 32, per_minute: int = 30) -> IndexCache[TokenIndex]:
    """An :class:`~.tools.IndexCache` of ``runtime``'s indexes (:class:`~callmaybe.runtime.answering.session.Runtime`):
    found or compiled (and stored on disk) by the runtime, refused unless :func:`enforced`, loaded as
    :class:`TokenIndex` es of its vocabulary; at most ``capacity`` in memory, at most ``per_minute`` new tool
    lists compiled per minute."""
    token_bytes = runtime.vocabulary.token_bytes
    return IndexCache(lambda functions: open_index(enforced(runtime.index_for(functions), {
                          f"function {f.name!r}": f.parameters for f in functions}), token_bytes),
                      lambda name, schema: open_index(enforced(runtime.index_for_schema(name, schema), {
                          f"schema {name!r}": schema}), token_bytes),
                      runtime.options, capacity, CompileRate(per_minute))


def runtime_app(runtime, engine: EngineLike, model: str, api_key: str | None = None, capacity: int = 32,
                per_minute: int = 30, info: dict[str, Any] | None = None):
    """The app serving ``runtime``'s model under the name ``model`` with ``engine`` (see
    :func:`~.app.create_app`)."""
    return create_app(engine, runtime_indexes(runtime, capacity, per_minute), model, api_key, info)


def check_address(host: str, port: int) -> None:
    """Raise OSError when ``host``:``port`` cannot be listened on (in use, not an address of this machine),
    before the model is loaded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))


def serve(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Serve ``app`` with uvicorn until SIGINT or SIGTERM (blocks). The server's own log (``callmaybe.server``:
    each turn's call-or-answer decision at INFO, failures at WARNING and ERROR) goes to stderr beside
    uvicorn's."""
    import logging

    import uvicorn

    own = logging.getLogger("callmaybe.server")
    if not own.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        own.addHandler(handler)
        own.setLevel(logging.INFO if log_level in ("info", "debug", "trace") else logging.WARNING)

    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
