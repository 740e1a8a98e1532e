"""``callmaybe compile --explain``: for each function and each of its parameters, the keywords the grammar
enforces by construction and those left to the check after generation (jsonschema), from the compiler's
notes (:class:`~.schema.diagnostics.Note`)."""

from __future__ import annotations

from typing import Any

from ..core.catalog import Function
from .grammar import compile_grammar
from .schema.keywords import ANNOTATIONS
from .limits import CompileLimits
from .schema.compiler import Note

#: Keys whose values are names or data, not keywords of sub-schemas (their own keys are not keywords).
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_DATA = ("const", "enum", "default", "examples", "example", "required", "dependentRequired")


def keywords_used(schema: Any) -> set[str]:
    """Every keyword that occurs in ``schema`` or its sub-schemas, annotations left out."""
    found: set[str] = set()
    if isinstance(schema, list):
        for item in schema:
            found |= keywords_used(item)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            if key not in ANNOTATIONS:
                found.add(key)
            if key in _DATA:
                continue
            if key in _NAMED and isinstance(value, dict):
                for sub in value.values():
                    found |= keywords_used(sub)
            elif isinstance(value, (dict, list)):
                found |= keywords_used(value)
    return found


def explain(functions: list[Function], limits: CompileLimits | None = None,
            notes: list[Note] | None = None) -> list[str]:
    """Lines that say, per function and parameter, what is enforced by construction and what is checked
    after generation (with the reason), then the other notes (limited, unrolled, ignored).

    ``notes``: the compile's notes (``compile --explain`` passes those of the whole compile of the index,
    token walk included: :func:`~.build.compile_notes`); None: those of the grammar alone, compiled here
    (raises SchemaError / CompileLimitError as :func:`~.grammar.compile_grammar` does). A note inside a
    parameter (``parameter 'o.t'``) is listed under the longest parameter name it starts with, so that a
    parameter named ``a.b`` keeps its own notes apart from ``a``'s."""
    if notes is None:
        notes = compile_grammar(functions, limits=limits).notes
    lines = []
    for fn in functions:
        own = f"function '{fn.name}'"
        fn_notes = [n for n in notes if n.where == own or n.where.startswith(own + ",")]
        lines.append(f"{own}:")
        params = fn.parameters.get("properties", {}) if isinstance(fn.parameters, dict) else {}
        owner = {id(n): _parameter_of(n.where, own, params) for n in fn_notes}
        for name, sub in params.items():
            where = f"{own}, parameter '{name}'"
            mine = [n for n in fn_notes if owner[id(n)] == name]
            after = {n.keyword for n in mine if n.kind in ("not enforced", "ignored")}
            enforced = sorted(keywords_used(sub) - after)
            lines.append(f"  {name}: enforced: {', '.join(enforced) or '-'}")
            for n in mine:
                if n.kind == "not enforced":
                    lines.append(f"    checked after generation: {n.keyword}" + (f" ({n.detail})" if n.detail else "")
                                 + ("" if n.where == where else f" at {n.where[len(own) + 2:]}"))
        for n in fn_notes:
            if n.kind != "not enforced":
                lines.append(f"  {n.kind}: {n}")
            elif owner[id(n)] is None:
                lines.append(f"  checked after generation: {n}")
    return lines


def _parameter_of(where: str, own: str, params: dict) -> str | None:
    """The parameter a note at ``where`` belongs to: the longest name ``p`` of ``params`` with ``where`` equal
    to ``<own>, parameter 'p'`` or inside it (``<own>, parameter 'p.``); None when none."""
    found = [p for p in params if where == f"{own}, parameter '{p}'" or where.startswith(f"{own}, parameter '{p}.")]
    return max(found, key=len, default=None)
