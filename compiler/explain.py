"""``callmaybe compile --explain``: for each function and each of its parameters, the keywords the grammar
enforces by construction and those left to the check after generation (jsonschema), from the compiler's
notes (:class:`~.diagnostics.Note`)."""

from __future__ import annotations

from typing import Any

from ..core.catalog import Function
from ..core.vocabulary import Vocabulary
from .compile import CompileOptions, compile_index
from .grammar import compile_grammar
from .keywords import ANNOTATIONS
from .limits import CompileLimits

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


def explain(functions: list[Function], limits: CompileLimits | None = None, vocabulary: Vocabulary | None = None,
            options: CompileOptions | None = None) -> list[str]:
    """Lines that say, per function and parameter, what is enforced by construction and what is checked
    after generation (with the reason), then the other notes (limited, unrolled, ignored).

    With a ``vocabulary`` the notes are those of the whole compile of its index (:func:`~.compile.
    compile_index` with ``options``, token walk included), so a long count the catalog's index cannot afford
    (the ``entries`` limit) is named as ``compile`` then leaves it; without one, those of the grammar alone.
    Raises SchemaError / CompileLimitError as the compile does."""
    if vocabulary is not None:
        notes = compile_index(functions, vocabulary, options, limits)[1].notes
    else:
        notes = compile_grammar(functions, limits=limits).notes
    lines = []
    for fn in functions:
        own = f"function '{fn.name}'"
        fn_notes = [n for n in notes if n.where == own or n.where.startswith(own + ",")]
        lines.append(f"{own}:")
        params = fn.parameters.get("properties", {}) if isinstance(fn.parameters, dict) else {}
        for name, sub in params.items():
            where = f"{own}, parameter '{name}'"
            nested = f"{own}, parameter '{name}."  # notes inside it: parameter 'name.sub'
            mine = [n for n in fn_notes if n.where == where or n.where.startswith(nested)]
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
            elif not any(n.where == f"{own}, parameter '{p}'" or n.where.startswith(f"{own}, parameter '{p}.")
                         for p in params):
                lines.append(f"  checked after generation: {n}")
    return lines
