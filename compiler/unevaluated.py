"""``unevaluatedProperties`` rewritten into object keywords, where the keys a schema evaluates are known.

JSON Schema 2020-12 (section 11.3): ``unevaluatedProperties`` applies to the keys that no ``properties``,
``patternProperties``, ``additionalProperties`` or nested ``unevaluatedProperties`` of the same schema or of
its in-place subschemas (``allOf``, ``$ref``, and the ``anyOf``/``oneOf`` branches, ``if``/``then``/``else``
and dependent schemas that apply) has evaluated. Where those keys are known without the instance, the
keyword is one more ``allOf`` branch, a *layer* ``{"properties": {name: true, ...}, "patternProperties":
{pattern: true, ...}, "additionalProperties": U}`` (an ``additionalProperties`` anywhere evaluates every key:
then there is nothing left to check).

The branches that apply depend on the instance: each ``anyOf``/``oneOf`` branch, the ``then`` and ``else``
of an ``if``, each dependent schema with and without its key carries its own layer, those at the top of the
schema in place of the keyword (``oneOf`` stays too: it is exclusive), those met deeper through ``allOf``
and ``$ref`` beside it. An ``anyOf`` instance valid for two branches at once is refused when its keys need
both (noted "limited"). ``$dynamicRef`` and a ``$ref`` met again on the same path are not followed: the keys
only they evaluate count as unevaluated, which refuses some valid instances (noted "limited"), never admits
an invalid one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .diagnostics import SchemaContext
from .keywords import LAYERS

_ALTERNATIVES = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "dependencies", "$dynamicRef",
                 "$recursiveRef")


@dataclass
class Evaluated:
    """The keys a schema evaluates: ``names`` (declared properties), ``patterns`` (pattern properties),
    ``every`` (an ``additionalProperties`` or nested ``unevaluatedProperties``: every key); ``partial``: some
    evaluation depends on the instance below the top and was left out."""

    names: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    every: bool = False
    partial: bool = False

    def add(self, other: Evaluated) -> Evaluated:
        """The keys evaluated by this and ``other``."""
        return Evaluated(list(dict.fromkeys(self.names + other.names)),
                         list(dict.fromkeys(self.patterns + other.patterns)),
                         self.every or other.every, self.partial or other.partial)


#: An alternative whose branch decides what is evaluated: ("anyOf"/"oneOf", branches), ("if", (if, then,
#: else)) or ("dependentSchemas", (name, schema)).
Group = tuple[str, Any]


def evaluated(ctx: SchemaContext, schema: Any, path: list[str],
              seen: frozenset[str] = frozenset()) -> tuple[Evaluated, list[Group], frozenset[str]]:
    """The keys ``schema`` evaluates whatever the instance, following ``allOf`` and ``$ref`` (each ``$ref``
    once per path: ``seen``), with the alternatives met on the way (their branches evaluate more, depending
    on the instance) and the references followed. ``$dynamicRef``/``$recursiveRef`` are not followed
    (``partial``)."""
    from .references import resolve  # noqa: PLC0415 (references imports this module)

    out = Evaluated()
    groups: list[Group] = []
    if not isinstance(schema, dict):
        return out, groups, seen
    for layer in [schema, *schema.get(LAYERS, [])]:
        props, pats = layer.get("properties"), layer.get("patternProperties")
        if isinstance(props, dict):
            out.names.extend(n for n in props if n not in out.names)
        if isinstance(pats, dict):
            out.patterns.extend(p for p in pats if p not in out.patterns)
        if "additionalProperties" in layer:
            out.every = True
    if "unevaluatedProperties" in schema:
        out.every = True
    groups.extend(alternatives(schema))
    if "$dynamicRef" in schema or "$recursiveRef" in schema:
        out.partial = True
    subs = schema.get("allOf") if isinstance(schema.get("allOf"), list) else []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            out.partial = True
        else:
            seen = seen | {ref}
            subs = [*subs, resolve(ctx, ref, path)]
    for sub in subs:
        more, more_groups, seen = evaluated(ctx, sub, path, seen)
        out = out.add(more)
        groups.extend(more_groups)
    return out, groups, seen


def alternatives(schema: dict[str, Any]) -> list[Group]:
    """The alternatives at the top of ``schema`` (:data:`Group`)."""
    out: list[Group] = []
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            out.append((key, schema[key]))
    if "if" in schema:
        out.append(("if", (schema["if"], schema.get("then", True), schema.get("else", True))))
    for key in ("dependentSchemas", "dependencies"):
        if isinstance(schema.get(key), dict):
            out.extend(("dependentSchemas", (name, dep)) for name, dep in schema[key].items()
                       if isinstance(dep, (dict, bool)))
    return out


def _layer(e: Evaluated, rule: Any) -> Any:
    """The ``allOf`` branch that applies ``rule`` to the keys ``e`` does not evaluate (True: none)."""
    if e.every:
        return True
    layer: dict[str, Any] = {"additionalProperties": rule}
    if e.names:
        layer["properties"] = {n: True for n in e.names}
    if e.patterns:
        layer["patternProperties"] = {p: True for p in e.patterns}
    return layer


def rewrite(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """``schema`` with its ``unevaluatedProperties`` turned into ``allOf`` layers (see the module
    docstring); the schema itself when it has none. Raises SchemaError for a ``$ref`` that does not resolve,
    CompileLimitError when the alternatives would pass the ``nodes`` limit."""
    if "unevaluatedProperties" not in schema:
        return schema
    rule = schema["unevaluatedProperties"]
    rest = {k: v for k, v in schema.items() if k != "unevaluatedProperties"}
    if rule is True or rule == {}:
        return rest
    base, groups, seen = evaluated(ctx, rest, path)
    if base.every:
        return rest
    # the alternatives at the top are replaced by their branches with layers (oneOf stays: it is exclusive);
    # those deeper stay where they are, and their branches with layers are added
    for key in ("anyOf", "if", "then", "else", "dependentSchemas"):
        rest.pop(key, None)
    if isinstance(rest.get("dependencies"), dict):
        kept = {k: v for k, v in rest["dependencies"].items() if isinstance(v, list)}
        if kept:
            rest["dependencies"] = kept
        else:
            rest.pop("dependencies")
    if any(kind == "anyOf" for kind, _ in groups):
        ctx.note("limited", path, "unevaluatedProperties",
                 "with anyOf: keys that only two matching branches together evaluate are refused")
    work = _Work(ctx, rule, path)
    layer = work.distribute(groups, base, seen)
    if work.partial:
        ctx.note("limited", path, "unevaluatedProperties",
                 "keys evaluated through $dynamicRef or a recursive $ref count as unevaluated")
    if layer is True:
        return rest
    rest["allOf"] = [*rest.get("allOf", []), layer] if isinstance(rest.get("allOf"), list) else [layer]
    return rest


class _Work:
    """One distribution of ``rule`` over alternatives; ``partial`` is set when some evaluation was left out."""

    def __init__(self, ctx: SchemaContext, rule: Any, path: list[str]):
        self.ctx, self.rule, self.path = ctx, rule, path
        self.partial = False

    def distribute(self, groups: list[Group], e: Evaluated, seen: frozenset[str]) -> Any:
        """The schema that applies the rule to the keys not evaluated, given the keys ``e`` evaluated so far
        and the alternative ``groups`` still to take (each branch carries its own layer)."""
        self.ctx.budget.count_nodes(1, "#")
        if not groups:
            self.partial = self.partial or e.partial
            return _layer(e, self.rule)
        (kind, group), later = groups[0], groups[1:]

        def inner(*subs: Any) -> Any:
            more, more_groups, now = e, [], seen
            for sub in subs:
                got, got_groups, now = evaluated(self.ctx, sub, self.path, now)
                more = more.add(got)
                more_groups.extend(got_groups)
            return self.distribute(more_groups + later, more, now)

        if kind in ("anyOf", "oneOf"):
            return {"anyOf": [{"allOf": [b, inner(b)]} for b in group]}
        if kind == "if":
            cond, then, other = group
            return {"if": cond, "then": {"allOf": [then, inner(cond, then)]},
                    "else": {"allOf": [other, inner(other)]}}
        name, dep = group
        return {"anyOf": [{"properties": {name: False}, "allOf": [inner()]},
                          {"required": [name], "allOf": [dep, inner(dep)]}]}
