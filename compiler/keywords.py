"""The JSON Schema keywords the compiler knows (handled, not enforceable, annotations; which type each
constrains) and the reading of count keywords (``minLength``/``maxLength``, ``minItems``/``maxItems``)."""

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
    "uniqueItems", "contains", "minContains", "maxContains", "minProperties", "maxProperties",
    "dependencies", "dependentRequired", "dependentSchemas", "not", "if", "then", "else", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems",
})
#: Keywords the grammar handles.
STRUCTURAL = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf",
})
TYPES = ("null", "boolean", "object", "array", "number", "string")
STRING_KEYWORDS = {"minLength", "maxLength", "pattern", "format"}
NUMBER_KEYWORDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
ARRAY_KEYWORDS = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"}
OBJECT_KEYWORDS = {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                   "maxProperties", "dependencies", "dependentRequired", "propertyNames"}
#: Counted repetitions above this many units are not enforced (they would blow up the automaton).
MAX_COUNT = 64


def is_number(x: Any) -> bool:
    """True for a JSON number (int or float, not bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def counts(ctx: SchemaContext, schema: dict[str, Any], path: list[str], min_key: str, max_key: str):
    """(lo, hi) of a minX/maxX pair (hi None when absent); raises SchemaError when malformed; hi < lo means
    no value."""
    lo, hi = schema.get(min_key, 0), schema.get(max_key)
    if not isinstance(lo, int) or lo < 0 or (hi is not None and (not isinstance(hi, int) or hi < 0)):
        raise ctx.error(path, f"malformed {min_key}/{max_key} ({lo}, {hi})")
    return lo, hi


def capped(ctx: SchemaContext, lo: int, hi: int | None, path: list[str], min_key: str, max_key: str):
    """Counts above MAX_COUNT are left to the check after generation (noted): (0 or lo, None or hi)."""
    if lo > MAX_COUNT:
        ctx.note("not enforced", path, min_key, f"above {MAX_COUNT}")
        lo = 0
    if hi is not None and hi > MAX_COUNT:
        ctx.note("not enforced", path, max_key, f"above {MAX_COUNT}")
        hi = None
    return lo, hi
