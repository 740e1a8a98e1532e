"""``$ref`` and ``allOf``: inlining local references (recursion unrolled to a bounded depth) and merging the
conjunction of schemas into one schema, before the keywords of each type are read (:mod:`.scalars`,
:mod:`.compiler`)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from . import unevaluated
from .array_merge import ITEM_KEYS, conj, localize, merge_items
from .diagnostics import SchemaContext
from .keywords import ANNOTATIONS, LAYERS, ONEOF_LOOSE, is_number
from .uris import RemoteRef, UnresolvedRef


#: Marks an entry of ``refs`` that is the place a reference was written (not a target entered): the
#: resources passed on the way down to it are in the dynamic scope too.
FROM = "from:"


def dynamic_scope(refs: tuple[str, ...], at: str) -> list[str]:
    """The dynamic scope at location ``at`` (JSON Schema 2020-12 core, section 7.1): the locations of the
    schemas entered on the way, outermost first. ``refs`` alternates the place each reference was written
    (marked :data:`FROM`) and its target; between a target (or the root) and the next place written, every
    schema passed going down is in the scope (a subschema with its own ``$id`` is a resource entered)."""
    out, last = ["#"], "#"
    for entry in [*refs, FROM + at]:
        if not entry.startswith(FROM):
            out.append(entry)
            last = entry
            continue
        place = entry[len(FROM):]
        if place != last and place.startswith(last + "/"):
            tokens = place[len(last) + 1:].split("/")
            out.extend(last + "/" + "/".join(tokens[:i]) for i in range(1, len(tokens) + 1))
    return out


def resolve(ctx: SchemaContext, ref: Any, path: list[str], at: str = "#", refs: tuple[str, ...] = (),
            dynamic: bool = False) -> tuple[Any, str]:
    """The sub-schema of ``ctx.root`` that ``ref`` (a ``$ref``, or a ``$dynamicRef`` when ``dynamic``) written
    at location ``at`` refers to, and its location (a JSON pointer from the root, see :mod:`.uris`: base
    URIs from ``$id``, JSON pointers, ``$anchor``, ``$dynamicAnchor`` with the dynamic scope of ``refs``
    and ``at``, :func:`dynamic_scope`). Raises SchemaError for a reference outside the document
    (nothing is fetched) or one that does not resolve."""
    if not isinstance(ref, str):
        raise ctx.error(path, f"$ref must be a string, got {type(ref).__name__}")
    try:
        if dynamic:
            location = ctx.resources.locate_dynamic(ref, at, dynamic_scope(refs, at))
        else:
            location = ctx.resources.locate(ref, at)
        return ctx.resources.at(location), location
    except RemoteRef:
        raise ctx.error(path, f"unsupported $ref {ref!r} (a reference outside the document: nothing is "
                              "fetched)") from None
    except UnresolvedRef:
        raise ctx.error(path, f"$ref {ref!r} does not resolve") from None


_UNSET = object()


def expand(ctx: SchemaContext, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#"):
    """Inline ``$ref`` / ``$dynamicRef`` and merge ``allOf`` until none is left at the top of ``schema``; then
    apply its ``unevaluatedProperties`` (:func:`~.unevaluated.apply`, which sees the merged schema; an
    ``allOf`` branch or reference target with its own is expanded on its own first).

    ``refs``: for each reference entered on the path so far, the place it was written (marked :data:`FROM`)
    and its target's location (:func:`dynamic_scope`); ``at``: the place of ``schema``
    (a JSON pointer from the root). Returns (schema, refs, place), the place being the location of the last
    reference target inlined (else ``at``), or (None, refs, place) when the schema admits no value or
    recursion through one reference reaches ``ctx.max_recursion`` (noted as "unrolled", and recorded in
    ``ctx.cuts``; a reference in ``ctx.assume``, or any reference while compiling loosely, is then taken as
    admitting any value). Under drafts 4-7 (the root's ``$schema``), keywords beside ``$ref`` are ignored
    as those drafts say. The keywords beside a reference merge before its target's: the schema's own
    declared properties come first in the layout, then those it refers to (the order of a document walk).
    Raises SchemaError for a malformed ``allOf`` or an unresolvable reference.
    """
    rule = schema.get("unevaluatedProperties", _UNSET)
    if rule is not _UNSET:
        schema = {k: v for k, v in schema.items() if k != "unevaluatedProperties"}
    while True:
        while "$ref" in schema or "$dynamicRef" in schema or "allOf" in schema:
            if "$ref" in schema or "$dynamicRef" in schema:
                schema, refs, at, final = _inline_reference(ctx, schema, path, refs, at, rule is _UNSET)
            else:
                schema, refs, at, final = _merge_all_of(ctx, schema, path, refs, at)
            if final:
                return schema, refs, at
        if rule is _UNSET:
            return schema, refs, at
        schema, rule = unevaluated.apply(ctx, schema, rule, path, refs, at, expand), _UNSET


def _inline_reference(ctx: SchemaContext, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str,
                      last: bool):
    """One step of :func:`expand`: ``schema``'s ``$ref`` (or ``$dynamicRef``) replaced by its target, merged
    with the keywords beside it. ``last``: no ``unevaluatedProperties`` waits for the result, so a schema
    left empty is final. Returns (schema, refs, place, final): ``final`` when :func:`expand` returns them as
    they are (recursion cut, a target that admits no value, or nothing left)."""
    key = "$ref" if "$ref" in schema else "$dynamicRef"
    ref = schema[key]
    target, location = resolve(ctx, ref, path, at, refs, dynamic=key == "$dynamicRef")
    if refs.count(location) >= ctx.max_recursion:
        ctx.note("unrolled", path, key, f"recursion through {ref} cut at depth {ctx.max_recursion}")
        ctx.cuts.append((location, at))
        return ({} if location in ctx.assume or ctx.loose else None), refs, at, True
    refs = refs + (FROM + at, location)
    at = location
    rest = {} if ctx.ref_overrides else {k: v for k, v in schema.items() if k != key}
    if isinstance(target, dict) and "unevaluatedProperties" in target:  # its own, first
        target, refs, _ = expand(ctx, target, path, refs, at)
        if target is None:
            return None, refs, at, True
    if target is True or target == {}:
        schema = rest or {}
        return schema, refs, at, not schema and last
    if target is False:
        return None, refs, at, True
    if not isinstance(target, dict):
        raise ctx.error(path, f"{key} {ref!r} points to a {type(target).__name__}, not a schema")
    # the schema's own keywords first (its declared properties before those it refers to)
    return (merge(ctx, rest, target, path, at, local="b") if rest else dict(target)), refs, at, False


def _merge_all_of(ctx: SchemaContext, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str):
    """One step of :func:`expand`: ``schema``'s ``allOf`` merged into it (a branch with a reference or its
    own ``unevaluatedProperties`` expanded first). Returns (schema, refs, place, final): ``final`` (schema
    None) when a branch admits no value. Raises SchemaError for a malformed ``allOf``."""
    subs = schema["allOf"]
    if not isinstance(subs, list) or not subs:
        raise ctx.error(path, "'allOf' must be a non-empty list")
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for i, sub in enumerate(subs):
        if sub is False:
            return None, refs, at, True
        if sub is True:
            continue
        if not isinstance(sub, dict):
            raise ctx.error(path, "'allOf' entries must be schemas")
        if "$ref" in sub or "$dynamicRef" in sub or "unevaluatedProperties" in sub:
            sub, refs, _ = expand(ctx, sub, path, refs, f"{at}/allOf/{i}")
            if sub is None:
                return None, refs, at, True
        merged = merge(ctx, merged, sub, path, at)
    return merged, refs, at, False


_LAYER_KEYS = ("properties", "patternProperties", "additionalProperties")
_LOWER = ("minimum", "minLength", "minItems", "exclusiveMinimum", "minProperties")  # merged by max
_UPPER = ("maximum", "maxLength", "maxItems", "exclusiveMaximum", "maxProperties")  # merged by min
_ANY = (None, True)  # an additionalProperties that admits every value (None: absent)


def _has_layer(schema: dict[str, Any]) -> bool:
    return LAYERS in schema or any(k in schema for k in _LAYER_KEYS)


def _flat(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when the object keywords of ``a`` and ``b`` merge into one set exactly: no patterns, no layers,
    and each side's ``additionalProperties`` admits any value of the names only the other side declares."""
    if LAYERS in a or LAYERS in b or "patternProperties" in a or "patternProperties" in b:
        return False
    pa, pb = a.get("properties", {}), b.get("properties", {})
    if not isinstance(pa, dict) or not isinstance(pb, dict):
        return True  # malformed: reported when the object is compiled
    extra_a, extra_b = a.get("additionalProperties"), b.get("additionalProperties")
    if any(k not in pa for k in pb) and extra_a not in _ANY and extra_a != {}:
        return False
    if any(k not in pb for k in pa) and extra_b not in _ANY and extra_b != {}:
        return False
    return True


def merge(ctx: SchemaContext, a: dict[str, Any], b: dict[str, Any], path: list[str],
          at: str = "#", local: str = "b") -> dict[str, Any]:
    """The conjunction of two schemas as one schema (``allOf`` of both), as far as the grammar needs.

    Keywords of one side only are kept; where both sides give a keyword: properties are merged per name,
    required lists joined, types and enums intersected, bounds tightened (``minProperties``/``maxProperties``
    too), ``items`` and ``additionalProperties`` conjoined, ``anyOf``/``oneOf`` multiplied out, ``allOf``
    lists joined, ``propertyNames`` and dependent schemas conjoined, dependent name lists joined; a lone
    ``then``/``else`` or ``if`` of either side dropped (it does nothing), a second conditional written as the
    ``anyOf`` it means, two ``not`` joined into ``not`` of their ``anyOf``; any other conflict keeps the first
    value (noted as not enforced). ``at`` (the place, a JSON pointer) is named when
    the product of two ``anyOf`` lists would pass the ``nodes`` limit (CompileLimitError).

    Object keywords (``properties``, ``patternProperties``, ``additionalProperties``) merge into one set only
    where that is exact (:func:`_flat`); otherwise ``b``'s are kept apart as a layer under
    :data:`~.keywords.LAYERS` (with ``a``'s and ``b``'s own layers): a key's value then satisfies every
    layer (JSON Schema 2020-12 section 10.3.2 applied to each branch), so a name only ``b`` declares still
    meets ``a``'s ``additionalProperties`` (``false``: the name is refused).

    Array keywords are conjoined by :func:`~.array_merge.merge_items`; ``local`` names the side that is a
    sub-schema of the other ("b": an ``allOf`` or ``anyOf`` entry; "a": the target of a ``$ref`` beside
    other keywords), whose ``unevaluatedItems`` cannot see the other side's items
    (:func:`~.array_merge.localize`).
    """
    if local == "b":
        b = localize(ctx, b, path)
    else:
        a = localize(ctx, a, path)
    a, b = _own_conditional(a), _own_conditional(b)
    if "if" in a and "if" in b:  # one conditional per schema: the other written as the anyOf it means
        b = _conditional_as_anyof(b)
    if "not" in a and "not" in b and a["not"] != b["not"]:  # not A and not B = not (A or B)
        a = {**a, "not": {"anyOf": [a["not"], b["not"]]}}
        b = {k: v for k, v in b.items() if k != "not"}
    if _has_layer(a) and _has_layer(b) and not _flat(a, b):
        own_b = {k: b[k] for k in _LAYER_KEYS if k in b}
        out = merge(ctx, {k: v for k, v in a.items() if k != LAYERS},
                    {k: v for k, v in b.items() if k not in _LAYER_KEYS and k != LAYERS}, path, at, local)
        out[LAYERS] = list(a.get(LAYERS, [])) + ([own_b] if own_b else []) + list(b.get(LAYERS, []))
        return out
    out = dict(a)
    if any(k in a for k in ITEM_KEYS) and any(k in b for k in ITEM_KEYS):
        for k in ITEM_KEYS:
            out.pop(k, None)
        out.update(merge_items(ctx, a, b, path))
        b = {k: v for k, v in b.items() if k not in ITEM_KEYS}
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif out[key] != value:
            _merge_keyword(ctx, out, key, value, a, b, path, at)
    return out


#: :func:`_merge_value`'s answer for a keyword it does not merge.
_NOT_A_VALUE = object()


def _merge_keyword(ctx: SchemaContext, out: dict[str, Any], key: str, value: Any, a: dict[str, Any],
                   b: dict[str, Any], path: list[str], at: str) -> None:
    """Set ``out[key]`` (holding ``a``'s value) to the conjunction with ``b``'s different ``value`` (see
    :func:`merge`): a value keyword (:func:`_merge_value`), a keyword of sub-schemas
    (:func:`_merge_subschemas`), else the first value is kept (an annotation silently, any other noted)."""
    merged = _merge_value(key, out[key], value)
    if merged is not _NOT_A_VALUE:
        out[key] = merged
    elif not _merge_subschemas(ctx, out, key, value, a, b, path, at) and key not in ANNOTATIONS:
        ctx.note("not enforced", path, key, "conflicting values in allOf; the first is used")


def _merge_value(key: str, mine: Any, value: Any) -> Any:
    """Both sides' ``properties`` merged per name, ``required`` joined, ``type`` and ``enum`` intersected,
    numeric bounds tightened; :data:`_NOT_A_VALUE` for any other keyword (or a bound that is no number)."""
    if key == "properties":
        props = dict(mine)
        for name, sub in value.items():  # short where one side is trivial: false stays false
            props[name] = conj(props[name], sub) if name in props else sub
        return props
    if key == "required":
        return list(dict.fromkeys([*mine, *value]))
    if key == "type":
        ta = {mine} if isinstance(mine, str) else set(mine)
        tb = {value} if isinstance(value, str) else set(value)
        both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) or
                            ("number" in ta and "integer" in tb) else set())
        return sorted(both)
    if key == "enum":
        return [v for v in mine if v in value]
    if key in _LOWER and is_number(mine) and is_number(value):
        return max(mine, value)
    if key in _UPPER and is_number(mine) and is_number(value):
        return min(mine, value)
    return _NOT_A_VALUE


def _merge_subschemas(ctx: SchemaContext, out: dict[str, Any], key: str, value: Any, a: dict[str, Any],
                      b: dict[str, Any], path: list[str], at: str) -> bool:
    """``out[key]`` conjoined with ``value`` for the keywords of sub-schemas (``items``,
    ``additionalProperties``, ``anyOf``/``oneOf`` multiplied out, ``allOf``, ``propertyNames``, dependencies)
    and ``multipleOf``; False (``out`` unchanged) for any other keyword or malformed values. The
    :data:`~.keywords.ONEOF_LOOSE` of ``b`` counts as merged: it is taken with ``oneOf``."""
    mine = out[key]
    if key in ("items", "additionalProperties") and isinstance(mine, (dict, bool)) and isinstance(value, (dict, bool)):
        if mine is False or value is False:
            out[key] = False
        elif mine is True:
            out[key] = value
        elif value is not True:
            out[key] = {"allOf": [mine, value]}
    elif key in ("anyOf", "oneOf"):
        if isinstance(mine, list) and isinstance(value, list):
            ctx.budget.check_nodes(len(mine) * len(value), at)
        out[key] = [merge(ctx, x, y, path, at) if isinstance(x, dict) and isinstance(y, dict) else x
                    for x in mine for y in value]
        if key == "oneOf" and (ONEOF_LOOSE in a or ONEOF_LOOSE in b):
            # exactly one of a's and one of b's branches <=> exactly one pair: each pair's loose schema
            # is both sides' loose schemas together
            out[ONEOF_LOOSE] = [conj(x, y) for x in a.get(ONEOF_LOOSE, mine) for y in b.get(ONEOF_LOOSE, value)]
    elif key == ONEOF_LOOSE:
        pass  # taken with "oneOf"
    elif key == "allOf" and isinstance(mine, list) and isinstance(value, list):
        out[key] = [*mine, *value]
    elif key == "propertyNames":
        out[key] = {"allOf": [mine, value]}
    elif key in ("dependentRequired", "dependentSchemas", "dependencies") and isinstance(mine, dict) \
            and isinstance(value, dict):
        out[key] = _merge_dependencies(mine, value)
    elif key == "multipleOf" and is_number(mine) and is_number(value) and mine > 0 and value > 0:
        out[key] = _common_multiple(mine, value)
    else:
        return False
    return True


def _own_conditional(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the parts of a conditional that do nothing on their own: ``then``/``else`` without
    ``if``, ``if`` without either (JSON Schema 2020-12 section 10.2.2), so that merging it with another
    schema cannot join them to that one's."""
    has_if, has_branch = "if" in schema, "then" in schema or "else" in schema
    if has_if == has_branch:
        return schema
    return {k: v for k, v in schema.items() if k not in ("if", "then", "else")}


def _conditional_as_anyof(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``if``/``then``/``else`` written as the ``anyOf`` they mean: (if and then) or (not
    if, and else); an absent branch is ``true``. Its own ``anyOf``, if any, moves into ``allOf``."""
    cond = schema["if"]
    then, other = schema.get("then", True), schema.get("else", True)
    out = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    options = [conj(cond, then), conj({"not": cond} if cond is not True else False, other)]
    options = [o for o in options if o is not False]
    either = {"anyOf": options} if options else False
    if either is False:  # no value passes the conditional
        return {**out, "allOf": [*out.get("allOf", []), False]}
    if "anyOf" in out:
        out["allOf"] = [*out.get("allOf", []), either]
    else:
        out["anyOf"] = either["anyOf"]
    return out


def _merge_dependencies(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two dependency maps (name -> list of names or schema) as one: lists joined, schemas conjoined (a list
    with a schema: the list as ``required``)."""
    out = dict(a)
    for name, dep in b.items():
        if name not in out:
            out[name] = dep
        elif isinstance(out[name], list) and isinstance(dep, list):
            out[name] = list(dict.fromkeys([*out[name], *dep]))
        else:
            def schema(x):
                return {"required": x} if isinstance(x, list) else x
            out[name] = {"allOf": [schema(out[name]), schema(dep)]}
    return out


def _common_multiple(a: int | float, b: int | float) -> int | float:
    """The least common multiple of two positive decimals (read as the decimals they are written as): a
    value is a multiple of both exactly when it is a multiple of it. lcm(p/q, r/s) = lcm(p, r) / gcd(q, s)
    for fractions in lowest terms."""
    fa, fb = Fraction(repr(a)), Fraction(repr(b))
    lcm = Fraction(math.lcm(fa.numerator, fb.numerator), math.gcd(fa.denominator, fb.denominator))
    return int(lcm) if lcm.denominator == 1 and isinstance(a, int) and isinstance(b, int) else float(lcm)
