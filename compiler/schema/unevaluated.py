"""``unevaluatedProperties`` turned into object keywords, where the keys a schema evaluates are known.

JSON Schema 2020-12 (section 11.3): ``unevaluatedProperties`` applies to the keys that no ``properties``,
``patternProperties``, ``additionalProperties`` or nested ``unevaluatedProperties`` of the same schema or of
its in-place subschemas (``allOf``, ``$ref``, and the ``anyOf``/``oneOf`` branches, ``if``/``then``/``else``
and dependent schemas that apply) has evaluated.

:func:`~.references.expand` takes the keyword out, merges the schema with its ``allOf`` branches and ``$ref``
targets (each nested ``unevaluatedProperties`` applied in its own subschema first), then calls :func:`apply`:
the keys the merged schema evaluates are its declared names and patterns (an ``additionalProperties``
evaluates every key: nothing is left to check), and the rule becomes one more ``allOf`` branch, a *layer*
``{"properties": {name: true, ...}, "patternProperties": {pattern: true, ...}, "additionalProperties": U}``.

The branches that apply depend on the instance: each ``anyOf``/``oneOf`` branch, the ``then`` and ``else``
of an ``if``, each dependent schema with and without its key carries its own layer, in place of the
keyword; an ``anyOf`` of a few branches carries a layer for each set of branches that may match together
(the keys they evaluate between them). A ``oneOf`` keeps its exclusivity through
:data:`~.keywords.ONEOF_LOOSE`: each branch with its layer is exclusive of the *other branches as written*
(an instance that two branches accept is refused whatever their layers say), without a second copy of the
``oneOf`` beside the layers. Keys evaluated through ``$dynamicRef`` are not known: they count as
unevaluated, which refuses some valid instances (noted "limited"), never admits an invalid one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from .diagnostics import SchemaContext
from .keywords import LAYERS, ONEOF_LOOSE

#: An ``anyOf`` of at most this many branches is distributed over every set of branches that may match
#: together (2**n - 1 of them), so keys that two matching branches evaluate between them are exact; a
#: longer one over single branches (noted "limited").
MAX_ANYOF_SUBSETS = 4
#: The keywords whose branches apply depending on the instance (distributed by :func:`apply`).
ALTERNATIVES = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "dependencies")
#: An alternative: ("anyOf", branches), ("oneOf", (branches, the branches' loose schemas or None)), ("if",
#: (if, then, else)) or ("dependentSchemas", (name, schema)).
Group = tuple[str, Any]


@dataclass
class Evaluated:
    """The keys a schema evaluates: ``names`` (declared properties), ``patterns`` (pattern properties),
    ``every`` (an ``additionalProperties``: every key); ``partial``: some are not known (``$dynamicRef``)."""

    names: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    every: bool = False
    partial: bool = False

    def add(self, other: Evaluated) -> Evaluated:
        """The keys evaluated by this and ``other``."""
        return Evaluated(list(dict.fromkeys(self.names + other.names)),
                         list(dict.fromkeys(self.patterns + other.patterns)),
                         self.every or other.every, self.partial or other.partial)


def evaluated(schema: Any) -> Evaluated:
    """The keys a merged schema (no ``$ref``/``allOf`` at its top) evaluates whatever the instance: its own
    object keywords and those of its layers (:data:`~.keywords.LAYERS`)."""
    out = Evaluated()
    if not isinstance(schema, dict):
        return out
    for layer in [schema, *schema.get(LAYERS, [])]:
        props, pats = layer.get("properties"), layer.get("patternProperties")
        if isinstance(props, dict):
            out.names.extend(n for n in props if n not in out.names)
        if isinstance(pats, dict):
            out.patterns.extend(p for p in pats if p not in out.patterns)
        if "additionalProperties" in layer or "unevaluatedProperties" in layer:
            out.every = True
    if "$dynamicRef" in schema or "$recursiveRef" in schema:
        out.partial = True
    return out


def alternatives(schema: Any) -> list[Group]:
    """The alternatives at the top of ``schema`` (:data:`Group`)."""
    out: list[Group] = []
    if not isinstance(schema, dict):
        return out
    if isinstance(schema.get("anyOf"), list) and schema["anyOf"]:
        out.append(("anyOf", schema["anyOf"]))
    if isinstance(schema.get("oneOf"), list) and schema["oneOf"]:
        out.append(("oneOf", (schema["oneOf"], schema.get(ONEOF_LOOSE))))
    if "if" in schema:
        out.append(("if", (schema["if"], schema.get("then", True), schema.get("else", True))))
    for key in ("dependentSchemas", "dependencies"):
        if isinstance(schema.get(key), dict):
            out.extend(("dependentSchemas", (name, dep)) for name, dep in schema[key].items()
                       if isinstance(dep, (dict, bool)))
    return out


def core(schema: Any) -> Any:
    """``schema`` without its alternatives (dependency lists kept)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items()
           if k not in ("anyOf", "oneOf", ONEOF_LOOSE, "if", "then", "else", "dependentSchemas")}
    if isinstance(out.get("dependencies"), dict):
        lists = {k: v for k, v in out["dependencies"].items() if isinstance(v, list)}
        if lists:
            out["dependencies"] = lists
        else:
            out.pop("dependencies")
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


def apply(ctx: SchemaContext, schema: dict[str, Any], rule: Any, path: list[str], refs: tuple[str, ...],
          at: str, expand: Callable) -> dict[str, Any]:
    """``schema`` (merged: no ``$ref``/``allOf`` at its top) with ``unevaluatedProperties: rule`` turned into
    ``allOf`` layers (see the module docstring). ``refs``, ``at``: as in :func:`~.references.expand`, which
    calls this with itself as ``expand`` to expand the branches (passed in, so that this module imports
    nothing of that one). Raises SchemaError for a branch that does not resolve, CompileLimitError past the
    ``nodes`` limit."""
    if rule is True or rule == {}:  # no constraint, but every key is evaluated now (for an outer rule)
        return schema if "additionalProperties" in schema else {**schema, "additionalProperties": True}
    base = evaluated(schema)
    if base.every:
        return schema
    groups = alternatives(schema)
    work = _Work(ctx, rule, path, refs, at, expand)
    layer = work.distribute(groups, base)
    if work.partial:
        ctx.note("limited", path, "unevaluatedProperties", "keys evaluated through $dynamicRef count as unevaluated")
    out = core(schema)
    if layer is not True:
        out["allOf"] = [layer]
    return out


class _Work:
    """One distribution of ``rule`` over alternatives; ``partial`` is set when some evaluation was unknown."""

    def __init__(self, ctx: SchemaContext, rule: Any, path: list[str], refs: tuple[str, ...], at: str,
                 expand: Callable):
        self.ctx, self.rule, self.path, self.refs, self.at = ctx, rule, path, refs, at
        self._expand = expand
        self.partial = False

    def expand(self, schema: Any) -> Any:
        """A branch merged (:func:`~.references.expand`); False when it admits no value."""
        if not isinstance(schema, dict):
            return schema
        out, _, _ = self._expand(self.ctx, schema, self.path, self.refs, self.at)
        return False if out is None else out

    def distribute(self, groups: list[Group], e: Evaluated) -> Any:
        """The schema that applies the rule to the keys not evaluated, given the keys ``e`` evaluated so far
        and the alternative ``groups`` still to take (each branch carries its own layer and its own
        alternatives)."""
        self.ctx.budget.count_nodes(1, self.at)
        if not groups:
            self.partial = self.partial or e.partial
            return _layer(e, self.rule)
        (kind, group), later = groups[0], groups[1:]

        def branch(*subs: Any) -> Any:
            """The conjunction of ``subs`` (merged) with the rule for the keys still unevaluated."""
            parts, more, more_groups = [], e, []
            for sub in subs:
                if sub is False:
                    return False
                parts.append(core(sub))
                more = more.add(evaluated(sub))
                more_groups.extend(alternatives(sub))
            parts.append(self.distribute(more_groups + later, more))
            parts = [p for p in parts if p is not True and p != {}]
            return {"allOf": parts} if parts else True

        if kind == "anyOf":
            expanded = [self.expand(b) for b in group]
            if len(group) <= MAX_ANYOF_SUBSETS:  # every set of branches that may match together
                subsets = [c for size in range(1, len(group) + 1)
                           for c in itertools.combinations(expanded, size)]
            else:
                self.ctx.note("limited", self.path, "unevaluatedProperties",
                              f"with anyOf of more than {MAX_ANYOF_SUBSETS} branches: keys that only two "
                              "matching branches together evaluate are refused")
                subsets = [(b,) for b in expanded]
            options = [b for b in (branch(*c) for c in subsets) if b is not False]
            return {"anyOf": options} if options else False
        if kind == "oneOf":
            subs, loose = group
            expanded = [self.expand(b) for b in subs]
            options = [branch(b) for b in expanded]
            if all(b is False for b in options):
                return False
            return {"oneOf": options, ONEOF_LOOSE: list(loose) if isinstance(loose, list) else expanded}
        if kind == "if":
            cond, then, other = (self.expand(s) for s in group)
            return {"if": cond, "then": branch(cond, then), "else": branch(other)}
        name, dep = group
        return {"anyOf": [{"properties": {name: False}, "allOf": [branch()]},
                          {"required": [name], "allOf": [branch(self.expand(dep))]}]}
