"""Keywords of the scalar types: ``enum``/``const`` (exact literal sets), strings (``format``, ``pattern``,
``minLength``/``maxLength``), integers and numbers (``minimum``/``maximum`` and their exclusive forms).
Each function returns the grammar node of the values allowed, or None when the keywords admit none."""

from __future__ import annotations

import math
from typing import Any

import jsonschema

from .diagnostics import SchemaContext
from .keywords import ANNOTATIONS, is_number
from .lexical import INTEGER, NONNEGATIVE_NUMBER, NUMBER, canonical
from .nodes import Leaf, Literals, Node
from .ranges import LIMIT, integer_range
from .strings import string_node


def enum(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The literal node of ``const``/``enum`` values that also satisfy the schema's other keywords (checked
    with jsonschema), each written as canonical JSON; integral numbers also in their other spelling (1 and
    1.0). None when no value is left; raises SchemaError when ``enum`` is not a list."""
    if "const" in schema:
        values = [schema["const"]]
    else:
        values = schema["enum"]
        if not isinstance(values, list):
            raise ctx.error(path, "'enum' must be a list")
    rest = {k: v for k, v in schema.items() if k not in ("enum", "const") and k not in ANNOTATIONS}
    if "enum" in schema and "const" in schema:
        values = [v for v in values if v in schema["enum"]]
    if rest:
        # check each value against its sibling keywords (with the root's definitions for $ref)
        defs = {k: ctx.root[k] for k in ("$defs", "definitions") if isinstance(ctx.root, dict) and k in ctx.root}
        try:
            validator = jsonschema.validators.validator_for(ctx.root)({**defs, **rest})
            values = [v for v in values if validator.is_valid(v)]
        except Exception:  # a sibling keyword jsonschema cannot evaluate: keep every value
            ctx.note("not enforced", path, "enum", "sibling keywords not checked")
    if not values:
        return None
    texts = []
    for v in values:
        texts.append(canonical(v))
        # JSON Schema compares numbers by value: 1 and 1.0 are the same enum value
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            texts.append(canonical(int(v)))
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**15:
            texts.append(canonical(float(v)))
    return Literals(list(dict.fromkeys(texts)))


def string(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of a string: ``format``, ``pattern`` and ``minLength``/``maxLength`` (in decoded code points)
    enforced together (:func:`.strings.string_node`); what is not enforced is noted. None when the lengths
    admit no string; raises SchemaError for malformed lengths."""
    return string_node(ctx, schema, path)


def bounds(schema: dict[str, Any]) -> tuple[Any, bool, Any, bool]:
    """(lower, exclusive, upper, exclusive) across draft 4 (boolean) and draft 6+ (number) spellings; a bound
    that is absent or not a number is None."""
    lo, hi = schema.get("minimum"), schema.get("maximum")
    lo_x = hi_x = False
    emin, emax = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if emin is True:
        lo_x = True
    elif is_number(emin) and (lo is None or emin >= lo):
        lo, lo_x = emin, True
    if emax is True:
        hi_x = True
    elif is_number(emax) and (hi is None or emax <= hi):
        hi, hi_x = emax, True
    if lo is not None and not is_number(lo):
        lo = None
    if hi is not None and not is_number(hi):
        hi = None
    return lo, lo_x, hi, hi_x


def integer(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of an integer within its bounds, exactly (digit ranges, :mod:`.ranges`), at most 15 digits.
    None when no integer is in range; raises SchemaError when the bounds lie wholly beyond 15 digits."""
    lo, lo_x, hi, hi_x = bounds(schema)
    if lo is None and hi is None:
        return Leaf(INTEGER)
    ilo = None if lo is None else (math.floor(lo) + 1 if lo_x else math.ceil(lo))
    ihi = None if hi is None else (math.ceil(hi) - 1 if hi_x else math.floor(hi))
    if (ilo is not None and ilo > LIMIT) or (ihi is not None and ihi < -LIMIT):
        raise ctx.error(path, f"integer bounds ({lo}, {hi}) lie beyond the grammar's 15-digit integers")
    if (ilo is not None and ilo < -LIMIT) or (ihi is not None and ihi > LIMIT):
        ctx.note("limited", path, "integer", "15 digits at most")
    regex = integer_range(ilo, ihi)
    return None if regex is None else Leaf(regex)


def number(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of a number: bounds are checked after generation (noted), except that a lower bound >= 0
    enforces the sign. None when the bounds admit no number."""
    lo, lo_x, hi, hi_x = bounds(schema)
    if lo is None and hi is None:
        return Leaf(NUMBER)
    if lo is not None and hi is not None and (hi < lo or (hi == lo and (lo_x or hi_x))):
        return None
    for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if k in schema:
            ctx.note("not enforced", path, k, "bounds on a number are checked after generation" +
                     ("; the sign is enforced" if lo is not None and lo >= 0 else ""))
    if lo is not None and lo >= 0:
        return Leaf(NONNEGATIVE_NUMBER)
    return Leaf(NUMBER)
