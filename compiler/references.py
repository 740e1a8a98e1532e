"""``$ref`` and ``allOf``: inlining local references (recursion unrolled to a bounded depth) and merging the
conjunction of schemas into one schema, before the keywords of each type are read (:mod:`.scalars`,
:mod:`.schema`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from . import unevaluated
from .diagnostics import SchemaContext
from .keywords import ANNOTATIONS, LAYERS, is_number


def _unescape_pointer(token: str) -> str:
    """One JSON pointer token with its escapes undone (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``)."""
    return token.replace("~1", "/").replace("~0", "~")


def resolve(ctx: SchemaContext, ref: str, path: list[str]) -> Any:
    """The sub-schema of ``ctx.root`` that the local ``$ref`` ``ref`` points to (a URI fragment holding a JSON
    pointer, RFC 6901: percent-decoded, then ``~1`` -> ``/`` and ``~0`` -> ``~``). Raises SchemaError for a
    non-local reference or one that does not resolve."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise ctx.error(path, f"unsupported $ref {ref!r} (only local references '#/...' are supported)")
    node = ctx.root
    for token in filter(None, unquote(ref[1:]).split("/")):  # a URI fragment: percent-decoded first
        token = _unescape_pointer(token)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise ctx.error(path, f"$ref {ref!r} does not resolve")
    return node


_UNSET = object()


def expand(ctx: SchemaContext, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#"):
    """Inline ``$ref`` and merge ``allOf`` until neither is left at the top of ``schema``; then apply its
    ``unevaluatedProperties`` (:func:`~.unevaluated.apply`, which sees the merged schema; an ``allOf`` branch
    or ``$ref`` target with its own is expanded on its own first).

    ``refs``: the references entered on the path so far; ``at``: the place of ``schema`` (a JSON pointer).
    Returns (schema, refs, place), the place being that of the last ``$ref`` target inlined (else ``at``),
    or (None, refs, place) when the schema admits no value or recursion through one reference reaches
    ``ctx.max_recursion`` (noted as "unrolled", and recorded in ``ctx.cuts``; a reference in ``ctx.assume``
    is then taken as admitting any value). Raises SchemaError for a malformed ``allOf`` or an unresolvable
    ``$ref``.
    """
    rule = schema.get("unevaluatedProperties", _UNSET)
    if rule is not _UNSET:
        schema = {k: v for k, v in schema.items() if k != "unevaluatedProperties"}
    while True:
        while "$ref" in schema or "allOf" in schema:
            if "$ref" in schema:
                ref = schema["$ref"]
                if refs.count(ref) >= ctx.max_recursion:
                    ctx.note("unrolled", path, "$ref", f"recursion through {ref} cut at depth {ctx.max_recursion}")
                    ctx.cuts.append((ref, at))
                    return ({} if ref in ctx.assume else None), refs, at
                target = resolve(ctx, ref, path)
                refs = refs + (ref,)
                at = ref
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                if isinstance(target, dict) and "unevaluatedProperties" in target:  # its own, first
                    target, refs, _ = expand(ctx, target, path, refs, at)
                    if target is None:
                        return None, refs, at
                if target is True or target == {}:
                    schema = rest or {}
                    if not schema and rule is _UNSET:
                        return {}, refs, at
                    continue
                if target is False:
                    return None, refs, at
                schema = merge(ctx, target, rest, path, at) if rest else dict(target)
            else:
                subs = schema["allOf"]
                if not isinstance(subs, list) or not subs:
                    raise ctx.error(path, "'allOf' must be a non-empty list")
                merged = {k: v for k, v in schema.items() if k != "allOf"}
                for i, sub in enumerate(subs):
                    if sub is False:
                        return None, refs, at
                    if sub is True:
                        continue
                    if not isinstance(sub, dict):
                        raise ctx.error(path, "'allOf' entries must be schemas")
                    if "$ref" in sub or "unevaluatedProperties" in sub:
                        sub, refs, _ = expand(ctx, sub, path, refs, f"{at}/allOf/{i}")
                        if sub is None:
                            return None, refs, at
                    merged = merge(ctx, merged, sub, path, at)
                schema = merged
        if rule is _UNSET:
            return schema, refs, at
        schema, rule = unevaluated.apply(ctx, schema, rule, path, refs, at), _UNSET


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
          at: str = "#") -> dict[str, Any]:
    """The conjunction of two schemas as one schema (``allOf`` of both), as far as the grammar needs.

    Keywords of one side only are kept; where both sides give a keyword: properties are merged per name,
    required lists joined, types and enums intersected, bounds tightened (``minProperties``/``maxProperties``
    too), ``items`` and ``additionalProperties`` conjoined, ``anyOf``/``oneOf`` multiplied out, ``allOf``
    lists joined, ``propertyNames`` and dependent schemas conjoined, dependent name lists joined; any other
    conflict keeps the first value (noted as not enforced). ``at`` (the place, a JSON pointer) is named when
    the product of two ``anyOf`` lists would pass the ``nodes`` limit (CompileLimitError).

    Object keywords (``properties``, ``patternProperties``, ``additionalProperties``) merge into one set only
    where that is exact (:func:`_flat`); otherwise ``b``'s are kept apart as a layer under
    :data:`~.keywords.LAYERS` (with ``a``'s and ``b``'s own layers): a key's value then satisfies every
    layer (JSON Schema 2020-12 section 10.3.2 applied to each branch), so a name only ``b`` declares still
    meets ``a``'s ``additionalProperties`` (``false``: the name is refused).
    """
    if _has_layer(a) and _has_layer(b) and not _flat(a, b):
        own_b = {k: b[k] for k in _LAYER_KEYS if k in b}
        out = merge(ctx, {k: v for k, v in a.items() if k != LAYERS},
                    {k: v for k, v in b.items() if k not in _LAYER_KEYS and k != LAYERS}, path, at)
        out[LAYERS] = list(a.get(LAYERS, [])) + ([own_b] if own_b else []) + list(b.get(LAYERS, []))
        return out
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
            continue
        mine = out[key]
        if mine == value:
            continue
        if key == "properties":
            props = dict(mine)
            for name, sub in value.items():
                props[name] = {"allOf": [props[name], sub]} if name in props else sub
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*mine, *value]))
        elif key == "type":
            ta = {mine} if isinstance(mine, str) else set(mine)
            tb = {value} if isinstance(value, str) else set(value)
            both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) or
                                ("number" in ta and "integer" in tb) else set())
            out[key] = sorted(both)
        elif key == "enum":
            out[key] = [v for v in mine if v in value]
        elif key in _LOWER and is_number(mine) and is_number(value):
            out[key] = max(mine, value)
        elif key in _UPPER and is_number(mine) and is_number(value):
            out[key] = min(mine, value)
        elif key in ("items", "additionalProperties") and isinstance(mine, (dict, bool)) \
                and isinstance(value, (dict, bool)):
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
        elif key == "allOf" and isinstance(mine, list) and isinstance(value, list):
            out[key] = [*mine, *value]
        elif key == "propertyNames":
            out[key] = {"allOf": [mine, value]}
        elif key in ("dependentRequired", "dependentSchemas", "dependencies") and isinstance(mine, dict) \
                and isinstance(value, dict):
            out[key] = _merge_dependencies(mine, value)
        elif key in ANNOTATIONS:
            continue
        else:
            ctx.note("not enforced", path, key, "conflicting values in allOf; the first is used")
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
