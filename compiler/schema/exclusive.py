"""``oneOf`` whose branches only require names, as the ``anyOf`` of object schemas it means.

``oneOf: [{required: [a]}, {required: [b]}]`` (members that exclude each other: 37 of JSONSchemaBench's 1,937
schemas write it, JSONSchemaStore's statamic blueprint at its root) accepts an object that has every name of
one branch's list R_i and, for every other branch j, lacks at least one name of R_j - R_i; a value that is no
object satisfies every branch (``required`` constrains objects only), so with two branches or more it is
never accepted. Each branch is then written as the object schemas ``{type: object, required: R_i,
properties: {k: false ...}}``, one per minimal choice of the names it lacks (a minimal hitting set of the
sets R_j - R_i), to be merged with the schema's other keywords and joined as ``anyOf``: the same language,
built without the general ``oneOf``'s differences of automata (each branch times every other branch's loose
language, then minimized; statamic's two branches of about 15,700 states each: ~0.6 s of products and
minimizations).
"""

from __future__ import annotations

from itertools import product
from typing import Any

from .keywords import ANNOTATIONS

#: The most object schemas the rewrite may write for one ``oneOf`` (all branches together); past it (many
#: branches, each requiring several names) the general ``oneOf`` is compiled instead.
MAX_CHOICES = 16


def exclusive_required(branches: Any, never: frozenset[str] = frozenset()) -> list[list[dict[str, Any]]] | None:
    """For each of the ``oneOf`` ``branches``, the object schemas (a list, empty where the branch accepts no
    value by itself: another branch requires only names it requires too) whose values are those that branch
    alone accepts; None where ``branches`` is not two or more schemas with a non-empty ``required`` list of
    names and no other keyword than annotations, or the schemas would pass :data:`MAX_CHOICES`.

    ``never``: names the schema around the ``oneOf`` never lets an object hold (``additionalProperties:
    false`` and not declared): a branch requiring one is never satisfied, so no other branch needs a name
    absent because of it, and no ``k: false`` is written for it (merged with ``additionalProperties: false``,
    a name it does not declare makes a layer, which a loose compile, under ``not``, widens)."""
    if not isinstance(branches, list) or len(branches) < 2:
        return None
    names: list[list[str]] = []
    for branch in branches:
        if not isinstance(branch, dict) or set(branch) - ANNOTATIONS != {"required"}:
            return None
        required = branch["required"]
        if not isinstance(required, list) or not required or not all(isinstance(k, str) for k in required):
            return None
        names.append(list(dict.fromkeys(required)))
    out: list[list[dict[str, Any]]] = []
    written = 0
    for i, required in enumerate(names):
        have = set(required)
        lacking = [[k for k in other if k not in have] for j, other in enumerate(names)
                   if j != i and not never.intersection(other)]
        choices = hitting_sets(lacking, MAX_CHOICES - written)
        if choices is None:
            return None
        written += len(choices)
        out.append([{"type": "object", "required": required, "properties": {k: False for k in absent}}
                    for absent in choices])
    return out


def hitting_sets(family: list[list[str]], most: int) -> list[list[str]] | None:
    """The minimal sets of names that share a name with every list of ``family`` (each name in the order
    first seen; sets in the order of the choices from the first list on): ``[]`` when some list is empty (no
    set meets it), ``[[]]`` for no lists. None when there would be more than ``most``."""
    if any(not names for names in family):
        return []
    order = {k: n for n, k in enumerate(k for names in family for k in names)}
    found: list[frozenset[str]] = []
    seen: set[frozenset[str]] = set()
    count = 1
    for names in family:
        count *= len(names)
        if count > 64 * max(most, 1):  # too many choices to enumerate; the result would pass `most` anyway
            return None
    for choice in product(*family):
        chosen = frozenset(choice)
        if chosen not in seen:
            seen.add(chosen)
            found.append(chosen)
    minimal = [s for s in found if not any(t < s for t in found)]
    if len(minimal) > most:
        return None
    return [sorted(s, key=order.__getitem__) for s in minimal]
