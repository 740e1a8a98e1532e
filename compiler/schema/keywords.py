"""The JSON Schema keywords the compiler knows (handled, not enforceable, annotations; which type each
constrains) and the reading of count keywords (``minLength``/``maxLength``, ``minItems``/``maxItems``,
``minContains``/``maxContains``)."""

from __future__ import annotations

from typing import Any

from .diagnostics import SchemaContext

#: Keywords read and never enforced.
ANNOTATIONS = frozenset({
    "description", "title", "default", "examples", "$comment", "$schema", "$id", "id", "readOnly",
    "writeOnly", "deprecated", "contentMediaType", "contentEncoding", "$anchor", "$dynamicAnchor",
    "nullable", "$defs", "definitions", "discriminator", "example", "xml", "externalDocs",
})
#: Keywords that restrict values in ways the grammar does not follow (checked after generation).
NOT_ENFORCEABLE = frozenset({
})
#: A private keyword of merged schemas: the object keywords (``properties``, ``patternProperties``,
#: ``additionalProperties``) of ``allOf`` branches kept apart, one dict per branch, because one set of them
#: cannot say what several say together (:func:`~.references.merge`, :mod:`.objects`).
LAYERS = "$callmaybe:layers"
#: A private keyword beside ``oneOf``: for each branch, a schema whose valid values include all of that
#: branch's, subtracted (compiled loosely) from the other branches in its place. Set where a branch carries
#: more than its own schema (:mod:`.unevaluated` gives each ``oneOf`` branch the ``unevaluatedProperties``
#: rule for the keys it leaves), so that exclusivity is still decided by the branches as written.
ONEOF_LOOSE = "$callmaybe:oneOf-loose"
#: Keywords the grammar handles.
STRUCTURAL = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "anyOf", "allOf", "$ref", "$dynamicRef",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
    "minProperties", "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames",
    "unevaluatedProperties", LAYERS, ONEOF_LOOSE,
})
#: Boolean combinations of schemas, enforced by intersection and difference of automata (:meth:`SchemaCompiler.logic`).
LOGIC = frozenset({"oneOf", "not", "if", "then", "else"})
TYPES = ("null", "boolean", "object", "array", "number", "string")
STRING_KEYWORDS = {"minLength", "maxLength", "pattern", "format"}
NUMBER_KEYWORDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
ARRAY_KEYWORDS = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                  "minContains", "maxContains", "unevaluatedItems"}
OBJECT_KEYWORDS = {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                   "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames",
                   LAYERS}
#: Counted repetitions above this many units are not enforced (they would blow up the automaton).
MAX_COUNT = 64


def is_number(x: Any) -> bool:
    """True for a JSON number (int or float, not bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def count(value: Any) -> int | None:
    """A count keyword's value as an int: a non-negative integer, or a float with a whole value (``2.0``,
    which JSON Schema allows); None for anything else (negative, fractional, a boolean, not a number)."""
    if isinstance(value, bool) or not is_number(value):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    return value if value >= 0 else None


def counts(ctx: SchemaContext, schema: dict[str, Any], path: list[str], min_key: str, max_key: str,
           default: int = 0) -> tuple[int, int | None]:
    """(lo, hi) of a minX/maxX pair (``minItems``/``maxItems``, ``minLength``/``maxLength``,
    ``minContains``/``maxContains``...): ``lo`` is ``default`` and ``hi`` None when absent; whole-number
    floats are read as ints. Raises SchemaError when one is malformed; hi < lo means no value."""
    raw_lo, raw_hi = schema.get(min_key, default), schema.get(max_key)
    lo, hi = count(raw_lo), None if raw_hi is None else count(raw_hi)
    if lo is None or (raw_hi is not None and hi is None):
        raise ctx.error(path, f"malformed {min_key}/{max_key} ({raw_lo}, {raw_hi})")
    return lo, hi


def capped(ctx: SchemaContext, lo: int, hi: int | None, path: list[str], min_key: str, max_key: str):
    """Counts above MAX_COUNT are left to the check after generation (noted): (0 or lo, None or hi). Used for
    string lengths; array counts are not capped (the ``states`` compile limit bounds them)."""
    if lo > MAX_COUNT:
        ctx.note("not enforced", path, min_key, f"above {MAX_COUNT}")
        lo = 0
    if hi is not None and hi > MAX_COUNT:
        ctx.note("not enforced", path, max_key, f"above {MAX_COUNT}")
        hi = None
    return lo, hi
