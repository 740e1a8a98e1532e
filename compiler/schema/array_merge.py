"""The conjunction (``allOf``, a ``$ref`` beside other keywords, an ``anyOf`` branch with its parent) of the
array keywords of two schemas, for :func:`~.references.merge`; and :func:`localize`, which makes a
sub-schema's ``unevaluatedItems`` independent of the schemas it is merged with.

``unevaluatedItems`` sees the items evaluated by its own schema object and the in-place applicators inside
it, never those of a parent or a sibling (a "cousin"). Once schemas are merged that scope is lost, so a
sub-schema's ``unevaluatedItems`` is rewritten before the merge into the ``items`` it amounts to: the items
after its ``prefixItems`` must match ``unevaluatedItems`` (or its ``contains``), and they are then all
evaluated, exactly as ``unevaluatedItems`` would have made them (:func:`localize`).
"""

from __future__ import annotations

from typing import Any

from .diagnostics import SchemaContext

#: The array keywords merged together here (``minItems``/``maxItems`` are bounds, merged as bounds).
ITEM_KEYS = ("prefixItems", "items", "additionalItems", "contains", "minContains", "maxContains",
             "unevaluatedItems", "uniqueItems")
_CONTAINS = ("contains", "minContains", "maxContains")
#: In-place applicators whose evaluation a sub-schema's ``unevaluatedItems`` would see.
_APPLICATORS = ("allOf", "anyOf", "oneOf", "$ref", "if", "then", "else", "$dynamicRef", "dependentSchemas")


def conj(x: Any, y: Any) -> Any:
    """The schema of both ``x`` and ``y`` (``allOf``), short where one is trivial."""
    if x is True or x == {}:
        return y
    if y is True or y == {}:
        return x
    if x is False or y is False:
        return False
    return x if x == y else {"allOf": [x, y]}


def _shape(schema: dict[str, Any]) -> tuple[list[Any], Any, str | None]:
    """(positional item schemas, the schema of later items or None when no keyword gives one, the form:
    "2020" for ``prefixItems``, "tuple" for the draft 4-7 ``items`` list, None for neither)."""
    items = schema.get("items")
    if "prefixItems" in schema and isinstance(schema["prefixItems"], list):
        return list(schema["prefixItems"]), items, "2020"
    if isinstance(items, list):
        return list(items), schema.get("additionalItems"), "tuple"
    return [], items, None


def localize(ctx: SchemaContext, schema: Any, path: list[str]) -> Any:
    """``schema`` with its own ``unevaluatedItems`` turned into ``items`` (``additionalItems`` in the tuple
    form), which accept the same arrays and evaluate the same items, so that merging it with other schemas
    does not let it see their items. Unchanged without ``unevaluatedItems``. When the schema holds in-place
    applicators of its own (``allOf``, ``$ref``...), ``unevaluatedItems`` is dropped and noted as not
    enforced (a wider language: the check after generation decides)."""
    if not isinstance(schema, dict) or "unevaluatedItems" not in schema:
        return schema
    out = {k: v for k, v in schema.items() if k != "unevaluatedItems"}
    unevaluated = schema["unevaluatedItems"]
    prefix, rest, form = _shape(schema)
    if rest is not None:  # items (or additionalItems) already evaluates every later item
        return out
    if any(k in schema for k in _APPLICATORS):
        ctx.note("not enforced", path, "unevaluatedItems", "inside a schema merged with others, beside "
                 "applicators of its own")
        return out
    if "contains" in schema and unevaluated is not True and unevaluated != {}:
        tail = {"anyOf": [schema["contains"], unevaluated]}
    else:
        tail = unevaluated
    out["additionalItems" if form == "tuple" else "items"] = tail
    return out


def merge_items(ctx: SchemaContext, a: dict[str, Any], b: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """The array keywords of ``allOf: [a, b]`` (only those of :data:`ITEM_KEYS` that the result has).

    Positional items are conjoined position by position, a position past one side's prefix taking that
    side's later-items schema; the later items conjoin both later-items schemas (absent when neither side
    gives one, so that ``unevaluatedItems`` still sees them unevaluated). The form is the draft 4-7 tuple
    form when neither side uses ``prefixItems``. ``uniqueItems`` holds when either side asks for it. Two
    different ``contains`` cannot both be counted: the first side's is kept and the second noted as not
    enforced. ``unevaluatedItems`` is the one side's that has it (the caller localizes the other side's).
    """
    pa, ra, fa = _shape(a)
    pb, rb, fb = _shape(b)
    out: dict[str, Any] = {}
    n = max(len(pa), len(pb))

    def at(prefix: list[Any], rest: Any, i: int) -> Any:
        return prefix[i] if i < len(prefix) else (True if rest is None else rest)

    prefix = [conj(at(pa, ra, i), at(pb, rb, i)) for i in range(n)]
    rest = None if ra is None and rb is None else conj(True if ra is None else ra, True if rb is None else rb)
    if n and "2020" not in (fa, fb):
        out["items"] = prefix
        if rest is not None:
            out["additionalItems"] = rest
    else:
        if n:
            out["prefixItems"] = prefix
        if rest is not None:
            out["items"] = rest
    ga = {k: a[k] for k in _CONTAINS if k in a}
    gb = {k: b[k] for k in _CONTAINS if k in b}
    if "contains" in ga and "contains" in gb and ga != gb:
        ctx.note("not enforced", path, "contains", "a second contains in allOf is checked after generation")
    out.update(ga if "contains" in ga else gb)
    if a.get("uniqueItems") is True or b.get("uniqueItems") is True:
        out["uniqueItems"] = True
    elif "uniqueItems" in a or "uniqueItems" in b:
        out["uniqueItems"] = a.get("uniqueItems", b.get("uniqueItems"))
    for side in (a, b):
        if "unevaluatedItems" in side:
            out["unevaluatedItems"] = side["unevaluatedItems"]
            break
    return out
