"""JSON schema -> grammar node (:mod:`..automata.nodes`): a regex in the canonical layout (one space after ``:`` and
``,``, nothing else) and the byte DFA built from it.

Coverage: ``type`` (also lists; without it every type), ``enum``/``const`` of any JSON value (each value
checked against the rest of the schema with jsonschema, so enums are exact), objects (:mod:`.objects`:
declared properties in declaration order, extra members by ``patternProperties``/``additionalProperties``,
counts, dependencies, ``propertyNames``, ``unevaluatedProperties``), arrays (:mod:`.array_schema`),
strings (:mod:`.strings`), integers and numbers (:mod:`.numbers`), ``anyOf``, ``allOf`` (merged,
:mod:`.references`), ``$ref``/``$dynamicRef`` within the document (:mod:`.uris`; recursion unrolled to a
configurable depth), and ``oneOf``, ``not``, ``if``/``then``/``else`` by intersection and difference of
automata (:meth:`SchemaCompiler.logic`), each subtracting a *loose* language (:meth:`loosened`) that
contains every valid value of what it subtracts, so that nothing invalid is kept. Annotations
(``description``, ``title``, ``default``, ``examples`` ...) are read and not enforced.

What the grammar cannot enforce (a string length above 128 code points, ``uniqueItems`` over an infinite
item language, ...) is recorded as a :class:`Note` of kind ``"not enforced"``; outputs are checked against
the full schema with jsonschema (and its format checker) after generation. A sub-schema that admits no
value compiles to ``None`` and is dropped where it is optional; where it is required the whole schema is
unsatisfiable (SchemaError).

Size: literal sets (names, enum values) become alternations of literals, which interegular determinizes
into a literal trie, and each function is determinized on its own and joined after its name
(:mod:`..grammar`), so a 1,000-value enum or a 30-function catalog does not explode.

Work: bounded by the compile limits (:mod:`..limits`): the schema's size, the sub-schemas compiled (with
``$ref`` inlined), the optional properties of one object, the automaton states built, the states of one
pattern; past one, CompileLimitError names it and the place (a JSON pointer: each method takes ``at``, the
place of the schema it reads, and each node records it). A schema that admits no value because a ``$ref``
cycle never reaches a value without itself is reported as a recursion with no base case, at the ``$ref``.

Modules: this one dispatches on the schema (``anyOf``/``oneOf`` branches, ``type``) and handles the
containers (arrays, objects, maps, any value); :mod:`.references` inlines ``$ref`` and merges ``allOf``;
:mod:`.scalars` reads the keywords of enums, strings, integers and numbers; :mod:`.keywords` lists the
keywords known; :mod:`.diagnostics` holds the notes and the messages.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

from ...core.errors import SchemaError
from . import array_schema, scalars
from .diagnostics import Note, SchemaContext
from .keywords import (
    ANNOTATIONS, ARRAY_KEYWORDS, LAYERS, LOGIC, NOT_ENFORCEABLE, NUMBER_KEYWORDS, OBJECT_KEYWORDS, ONEOF_LOOSE,
    STRING_KEYWORDS, STRUCTURAL, TYPES,
)
from ..automata.lexical import NUMBER, STRING
from ..automata.dfa import EmptyLanguage
from ..limits import active
from ..automata.loose import LOOSE_DEPTH, CoarseValue
from ..automata.nodes import (
    LOOSE_REQUIRED, Alt, AnyValue, ArrayNode, Both, Leaf, Literals, MapNode, MembersNode, Minus, Node, ObjectNode, OneOf,
    alt,
)
from .exclusive import exclusive_required
from .objects import compile_object, pointer_token
from .references import expand, merge

__all__ = ["Note", "SchemaCompiler"]

#: Array keywords dropped when compiling loosely, where a loose language (which must contain every valid value)
#: would come out narrower: ``unevaluatedItems`` is enforced narrower than its meaning where other applicators
#: evaluate items; a loose ``contains`` matches more items than the exact one, so ``maxContains`` would count
#: too many; ``uniqueItems`` tells texts apart, not values.
LOOSE_ARRAY_DROPS = ("unevaluatedItems", "maxContains", "uniqueItems")


class SchemaCompiler(SchemaContext):
    """Compile the JSON schemas of one function into grammar nodes (``node.regex``, ``node.dfa()``).

    ``function`` names the function in messages; ``root`` is the schema ``$ref`` pointers resolve against;
    ``max_recursion`` is how many times one ``$ref`` may be entered on a path (3 by default); ``limits``
    bound the work (:mod:`..limits`, the defaults when None). ``notes`` collects what was not enforced,
    ignored or unrolled. Raises SchemaError naming the function, the parameter path and the keyword for
    anything it cannot compile; CompileLimitError (a SchemaError) past a compile limit.
    """

    def parameters(self, schema: dict[str, Any]) -> Node:
        """The node of a function's whole ``parameters`` object schema; raises SchemaError if unsatisfiable."""
        self.root = schema
        return self.whole(schema, "the parameters schema admits no value (unsatisfiable)")

    def whole(self, schema: Any, unsatisfiable: str | None) -> Node | None:
        """The node of the whole schema ``self.root`` (``schema``): its size checked against the ``bytes``
        limit first. When it admits no value, raises SchemaError: a recursion with no base case where a
        ``$ref`` cycle is the cause (:meth:`endless_recursion`), else ``unsatisfiable``; returns None instead
        when ``unsatisfiable`` is None."""
        self.budget.check_bytes(schema)
        with self.budget.running():
            node = self.value(schema, [], (), "#")
        if node is None and unsatisfiable is None:
            return None
        if node is None:
            endless = self.endless_recursion(schema)
            if endless is not None:
                ref, at = endless
                raise SchemaError(f"{self.where_at(at)}: recursive $ref with no base case "
                                  f"({ref!r} admits no finite value)")
            empty = self.empty_required(schema, [])
            if empty is not None:
                raise self.error(empty, "the parameter's schema admits no value (unsatisfiable), and it is required")
            raise self.error([], unsatisfiable)
        return node

    def empty_required(self, schema: Any, path: list[str]) -> list[str] | None:
        """After ``schema`` compiled to no value: the path of a required property whose own schema admits no
        value (the deepest such, through required object properties), or None when none alone is the cause
        (the keywords conflict only together). Each property is compiled again on its own, grammar nodes only
        (a property that passes a compile limit is skipped)."""
        if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
            return None
        required = schema.get("required", [])
        for name in required if isinstance(required, list) else []:
            sub = schema["properties"].get(name)
            if sub is None:
                continue
            again = SchemaCompiler(self.function, self.root, self.max_recursion, self.any_depth, self.label,
                                   self.limits)
            try:
                with again.budget.running():
                    empty = again.value(sub, path + [name], (), f"#/properties/{pointer_token(name)}") is None
            except SchemaError:
                continue
            if empty:
                return self.empty_required(sub, path + [name]) or path + [name]
        return None

    def endless_recursion(self, schema: Any) -> tuple[str, str] | None:
        """After ``schema`` compiled to no value: the ``(ref, place)`` of a cut recursion that is the cause,
        or None when the schema admits no value even if every cut recursion admitted one.

        Compiles the schema again (grammar nodes only, no automata) taking the cut references as admitting
        any value: all of them, then all but one, to name the first one the schema cannot do without.
        """
        first: dict[str, str] = {}
        for ref, at in self.cuts:
            first.setdefault(ref, at)
        if not first:
            return None

        def satisfiable(assume: frozenset[str]) -> bool:
            again = SchemaCompiler(self.function, self.root, self.max_recursion, self.any_depth, self.label,
                                   self.limits)
            again.assume = assume
            return again.value(schema, [], (), "#") is not None

        if not satisfiable(frozenset(first)):
            return None
        for ref, at in first.items():
            if not satisfiable(frozenset(first) - {ref}):
                return ref, at
        return next(iter(first.items()))

    def value(self, schema: Any, path: list[str], refs: tuple[str, ...] = (), at: str = "#") -> Node | None:
        """The node of any value ``schema`` accepts (``.regex`` is its regex), or None when it accepts none.
        ``at``: the place of ``schema`` (a JSON pointer), recorded in the node and named by limit errors."""
        self.budget.count_nodes(1, at)
        node = self._value(schema, path, refs, at)
        if node is not None and node.at is None:
            node.at = at
        return node

    def _value(self, schema: Any, path: list[str], refs: tuple[str, ...], at: str) -> Node | None:
        if schema is True or schema == {}:
            return self.anything(path)
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise self.error(path, f"schema must be a JSON object, got {type(schema).__name__}")
        schema, refs, at = expand(self, schema, path, refs, at)
        if schema is None:
            return None
        node = self._expanded(schema, path, refs, at)
        if node is not None and node.at is None:
            node.at = at  # the place of the definition a $ref led to
        return node

    def _expanded(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str) -> Node | None:
        for key in schema:
            if key in NOT_ENFORCEABLE:
                self.note("not enforced", path, key)
            elif key not in STRUCTURAL and key not in ANNOTATIONS and key not in LOGIC:
                self.note("ignored", path, key, "unknown keyword")
        if any(k in schema for k in ("not", "if", "oneOf")):
            return self.logic(schema, path, refs, at)
        if "anyOf" in schema:
            return self.branches(schema, path, refs, at)
        if "const" in schema or "enum" in schema:
            return scalars.enum(self, schema, path)
        types = self.types(schema, path)
        parts = [self.typed(t, schema, path, refs, at) for t in types]
        return alt([p for p in parts if p is not None])

    def logic(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str) -> Node | None:
        """The node of a schema with ``oneOf``, ``not`` or ``if``/``then``/``else``, by the closure of regular
        languages under intersection and difference (:mod:`..automata.compose`):

        * ``oneOf``: each branch (merged with the other keywords) minus every other branch compiled loosely
          (a language that contains all its valid values), so a value is kept only when it can satisfy no
          other branch;
        * ``not``: the rest of the schema minus the negated schema compiled loosely;
        * ``if``/``then``/``else``: (the schema and ``then``, within the condition compiled exactly) or (the
          schema and ``else``, outside the condition compiled loosely); the names the condition declares may
          be written on both sides, and beside ``unevaluatedItems`` the ``then`` side is merged with the
          condition (an ``if`` alone too), so that the items it evaluates count.

        Each combination's automaton is built here, so that one admitting no value is None like any other
        (:meth:`settle`). Raises SchemaError for a malformed ``oneOf``.
        """
        base = {k: v for k, v in schema.items() if k not in ("oneOf", ONEOF_LOOSE, "not", "if", "then", "else")}
        if self.loose:
            return self._loose_logic(schema, base, path, refs, at)
        node = self._one_of(schema, base, path, refs, at) if "oneOf" in schema else self.value(base, path, refs, at)
        if node is None:
            return None
        if "not" in schema:
            with self.loosened([node]):
                negated = self.value(schema["not"], path, refs, f"{at}/not")
            if negated is not None:
                node = self.settle(Minus(node, negated))
                if node is None:
                    return None
        annotated = "unevaluatedItems" in base  # an if passing evaluates its items for unevaluatedItems
        if "if" in schema and ("then" in schema or "else" in schema or annotated):
            node = self._conditional(schema, base, node, annotated, path, refs, at)
        return node

    def _loose_logic(self, schema: dict[str, Any], base: dict[str, Any], path: list[str], refs: tuple[str, ...],
                     at: str) -> Node | None:
        """:meth:`logic` compiled loosely (a language that holds every valid value): what is subtracted is the
        *exact* language of the subtracted schema (:meth:`_subset`), which holds only texts of its values, so
        no valid value is taken out (a loose language subtracted from a loose one is no superset: ``not: {not:
        {type: integer}}`` lost ``15e-1``). ``oneOf``: each branch (over :data:`~.keywords.ONEOF_LOOSE` where
        given) less the others' exact languages; ``not``: less the negated schema's; ``if`` with both
        ``then`` and ``else``: within (the ``then`` side, or the ``else`` side less the condition's); with one
        of them, no restriction. None when nothing is left."""
        if "oneOf" in schema and (split := _exclusive_split(schema, base)) is not None:
            node = self._exclusive(split, base, path, refs, at)
        elif "oneOf" in schema:
            subs, raws = self._one_of_lists(schema, path)
            exact = [self._subset(self.conjoin(base, sub, path, f"{at}/oneOf/{i}"), path, refs, f"{at}/oneOf/{i}")
                     for i, sub in enumerate(subs)]
            parts = []
            for i, raw in enumerate(raws):
                both = self.conjoin(base, raw, path, f"{at}/oneOf/{i}")
                part = None if both is None else self.value(both, path, refs, f"{at}/oneOf/{i}")
                others = [e for j, e in enumerate(exact) if j != i and e is not None]
                if part is not None and others:
                    part = self.settle(Minus(part, alt(others)))
                if part is not None:
                    parts.append(part)
            node = alt(parts)
        else:
            node = self.value(base, path, refs, at)
        if node is not None and "not" in schema:
            negated = self._subset(schema["not"], path, refs, f"{at}/not")
            node = node if negated is None else self.settle(Minus(node, negated))
        if node is not None and "if" in schema and "then" in schema and "else" in schema:
            then = self.value(schema["then"], path, refs, f"{at}/then")
            other = self.value(schema["else"], path, refs, f"{at}/else")
            condition = self._subset(schema["if"], path, refs, f"{at}/if")
            if other is not None and condition is not None:
                other = self.settle(Minus(other, condition))
            sides = alt([p for p in (then, other) if p is not None])
            node = None if sides is None else self.settle(Both([node, sides]))
        return node

    def _subset(self, schema: Any, path: list[str], refs: tuple[str, ...], at: str) -> Node | None:
        """The exact node of ``schema`` compiled inside a loose one, as a language that holds only texts of its
        valid values; None (nothing to subtract) when it admits none or some keyword of it is not enforced
        (its notes are not kept: they concern a language subtracted)."""
        if schema is None:
            return None
        before, self.loose = self.loose, False
        notes, noted = self.notes, self._noted
        self.notes, self._noted = [], set()
        try:
            node = self.value(schema, path, refs, at)
            unenforced = any(n.kind == "not enforced" for n in self.notes)
        finally:
            self.notes, self._noted, self.loose = notes, noted, before
        return None if unenforced else node

    def _one_of(self, schema: dict[str, Any], base: dict[str, Any], path: list[str], refs: tuple[str, ...],
                at: str) -> Node | None:
        """The ``oneOf`` of :meth:`logic`: each branch merged with ``base`` (the other keywords), minus the other
        branches compiled loosely; None when no branch admits a value. Raises SchemaError for a malformed
        ``oneOf`` or :data:`~.keywords.ONEOF_LOOSE`."""
        subs, raws = self._one_of_lists(schema, path)
        if (split := _exclusive_split(schema, base)) is not None:
            return self._exclusive(split, base, path, refs, at)
        strict, loose = [], []
        for i, sub in enumerate(subs):
            sub_at, sub_refs = f"{at}/oneOf/{i}", refs
            if isinstance(sub, dict):  # its references first, so that the base's keys come first
                sub, sub_refs, sub_at = expand(self, sub, path, refs, sub_at)
                sub = False if sub is None else sub
            both = self.conjoin(base, sub, path, sub_at)
            strict.append(None if both is None else self.value(both, path, sub_refs, sub_at))
        with self.loosened(strict):
            for i, raw in enumerate(raws):
                loose.append(None if raw is False else self.value(raw, path, refs, f"{at}/oneOf/{i}"))
        if all(p is None for p in strict):
            return None
        return self.settle(OneOf(strict, loose)) if len(subs) > 1 else strict[0]

    def _exclusive(self, split: list[list[dict[str, Any]]], base: dict[str, Any], path: list[str],
                   refs: tuple[str, ...], at: str) -> Node | None:
        """A ``oneOf`` of branches that only require names, as the alternation of :func:`.exclusive_required`'s
        object schemas (``split``: for each branch, its list), each merged with ``base``; None when none admits a
        value."""
        parts = []
        for i, options in enumerate(split):
            for sub in options:
                both = self.conjoin(base, sub, path, f"{at}/oneOf/{i}")
                part = None if both is None else self.value(both, path, refs, f"{at}/oneOf/{i}")
                if part is not None:
                    parts.append(part)
        return alt(parts)

    def _one_of_lists(self, schema: dict[str, Any], path: list[str]) -> tuple[list, list]:
        """(the ``oneOf`` branches, what each is exclusive of: :data:`~.keywords.ONEOF_LOOSE` where given, else the
        branches). Raises SchemaError for a malformed ``oneOf`` or :data:`~.keywords.ONEOF_LOOSE`."""
        subs = schema["oneOf"]
        if not isinstance(subs, list) or not subs:
            raise self.error(path, "'oneOf' must be a non-empty list")
        raws = schema.get(ONEOF_LOOSE, subs)
        if not isinstance(raws, list) or len(raws) != len(subs):
            raise self.error(path, f"'{ONEOF_LOOSE}' must list one schema per 'oneOf' branch")
        return subs, raws

    def _conditional(self, schema: dict[str, Any], base: dict[str, Any], node: Node, annotated: bool,
                     path: list[str], refs: tuple[str, ...], at: str) -> Node | None:
        """The ``if``/``then``/``else`` of :meth:`logic` applied to ``node`` (the schema without them):
        the ``then`` side within the condition, the ``else`` side outside it (see :meth:`logic`);
        ``annotated``: an ``unevaluatedItems`` beside them (the ``then`` side merged with the condition). None
        when neither side admits a value."""
        plain = not ("oneOf" in schema or "not" in schema)  # node is then the base alone
        names = _names(schema["if"])  # keys the condition declares may be written in either branch
        parts = []
        for key, within in (("then", True), ("else", False)):
            branch, sub = node, base
            if key in schema or names or annotated:
                sub = self._branch_schema(schema, base, key, within, names, annotated, path, at)
                extra = None if sub is None else self.value(sub, path, refs, f"{at}/{key}")
                if extra is None:
                    continue
                branch = extra if plain else Both([node, extra])
            part = self._within(schema, sub, branch, key, path, refs, at) if within else \
                self._outside(schema, branch, path, refs, at)
            if part is not None:
                parts.append(part)
        return alt(parts)

    def _branch_schema(self, schema: dict[str, Any], base: dict[str, Any], key: str, within: bool, names: Any,
                       annotated: bool, path: list[str], at: str) -> dict[str, Any] | bool | None:
        """The schema of the ``then`` or ``else`` side (``key``): ``base`` and the branch, the names the
        condition declares first, and (``within`` beside ``unevaluatedItems``) the condition itself."""
        sub = self.conjoin(base, schema.get(key, True), path, f"{at}/{key}")
        if sub is not None and names:  # first: the condition comes before its branches
            sub = self.conjoin(names, sub, path, f"{at}/{key}")
        if sub is not None and within and annotated:  # its items seen as evaluated
            sub = self.conjoin(sub if isinstance(sub, dict) else {}, schema["if"], path, f"{at}/if")
        return sub

    def _within(self, schema: dict[str, Any], sub: Any, branch: Node, key: str, path: list[str],
                refs: tuple[str, ...], at: str) -> Node | None:
        """``branch`` (the ``then`` side, of schema ``sub``) within the condition compiled exactly: the condition
        with the branch's declared properties (any value), so that its objects are closed to the same names as
        the branch's and the intersection keeps them. None when none is left."""
        seen = expand(self, sub, path, refs, f"{at}/{key}")[0] if isinstance(sub, dict) else sub
        shaped = self.conjoin(_shape(seen), schema["if"], path, f"{at}/if")
        condition = None if shaped is None else self.value(shaped, path, refs, f"{at}/if")
        if condition is None:
            return None
        return self.settle(Both([branch, condition]))

    def _outside(self, schema: dict[str, Any], branch: Node, path: list[str], refs: tuple[str, ...],
                 at: str) -> Node | None:
        """``branch`` (the ``else`` side) outside the condition compiled loosely."""
        with self.loosened([branch]):
            outside = self.value(schema["if"], path, refs, f"{at}/if")
        return branch if outside is None else self.settle(Minus(branch, outside))

    loose_depth = 0  # how deep the exact side a loose language is subtracted from nests (loosened)

    @contextmanager
    def loosened(self, exact: list[Node | None] | None = None) -> Iterator[None]:
        """Compile loosely inside the ``with`` block (:meth:`~.diagnostics.SchemaContext.loosened`), the
        coarse "any value" (:mod:`..automata.loose`) following brackets as deep as the ``exact`` nodes nest, the
        side the loose language is subtracted from (so that it contains every value they can write)."""
        depth = max((n.nesting() for n in exact or [] if n is not None), default=0)
        before = self.loose_depth
        self.loose_depth = max(before, depth)
        try:
            with super().loosened():
                yield
        finally:
            self.loose_depth = before

    def conjoin(self, base: dict[str, Any], sub: Any, path: list[str], at: str) -> dict[str, Any] | bool | None:
        """The schema ``base`` and ``sub`` (``allOf`` of both, merged: :func:`~.references.merge`); None when
        ``sub`` is false."""
        if sub is False:
            return None
        if sub is True or sub == {}:
            return base if base else True
        if not isinstance(sub, dict):
            raise self.error(path, f"schema must be a JSON object, got {type(sub).__name__}")
        return merge(self, base, sub, path, at) if base else sub

    def settle(self, node: Node) -> Node | None:
        """``node`` with its automaton built now (kept in the node), or None when its language is empty (an
        intersection or difference that leaves no value). Raises CompileLimitError past a limit."""
        with active(self.budget):
            try:
                node.dfa()
            except EmptyLanguage:
                return None
        return node

    def branches(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...],
                 at: str = "#") -> Node | None:
        """The alternation of ``anyOf`` branches, each merged with the schema's other keywords; None when no
        branch admits a value."""
        base = {k: v for k, v in schema.items() if k != "anyOf"}
        # each option with the references entered to make it (a branch that is a $ref counts as entering
        # it, so that a cycle through anyOf is cut like any other) and its place
        options: list[tuple[dict[str, Any], tuple[str, ...], str]] = [(base, refs, at)]
        for key in ("anyOf",):
            if key not in schema:
                continue
            subs = schema[key]
            if not isinstance(subs, list) or not subs:
                raise self.error(path, f"'{key}' must be a non-empty list")
            self.budget.check_nodes(len(options) * len(subs), at)
            nxt = []
            for opt, opt_refs, _ in options:
                for i, sub in enumerate(subs):
                    sub_at, sub_refs = f"{at}/{key}/{i}", opt_refs
                    if sub is False:
                        continue
                    if sub is True:
                        nxt.append((opt, opt_refs, sub_at))
                        continue
                    if isinstance(sub, dict):
                        sub, sub_refs, sub_at = expand(self, sub, path, opt_refs, sub_at)
                    if sub is None:
                        continue
                    nxt.append((merge(self, opt, sub, path, sub_at) if opt else sub, sub_refs, sub_at))
            options = nxt
        parts = [self.value(opt, path, opt_refs, opt_at) for opt, opt_refs, opt_at in options]
        return alt([p for p in parts if p is not None])

    def types(self, schema: dict[str, Any], path: list[str]) -> list[str]:
        """The JSON types ``schema`` allows ("any" for an unconstrained value); raises SchemaError for a
        malformed or unknown ``type``."""
        t = schema.get("type")
        if t is None:
            # Without "type" every type is allowed, and type-specific keywords constrain only their own type.
            return ["any"] if not set(schema) & (OBJECT_KEYWORDS | ARRAY_KEYWORDS | STRING_KEYWORDS |
                                                 NUMBER_KEYWORDS) else list(TYPES)
        if isinstance(t, str):
            t = [t]
        if not isinstance(t, list):
            raise self.error(path, "'type' must be a string or a list")
        if not t:  # e.g. an allOf/anyOf branch whose types do not meet: no value
            return []
        for x in t:
            if x not in TYPES and x != "integer":
                raise self.error(path, f"unknown type {json.dumps(x)}")
        if "number" in t and "integer" in t:
            t = [x for x in t if x != "integer"]
        return list(dict.fromkeys(t))

    def typed(self, type_: str, schema: dict[str, Any], path: list[str], refs: tuple[str, ...],
              at: str = "#") -> Node | None:
        """The node of ``schema`` restricted to one JSON type."""
        if type_ == "any":
            return self.anything(path)
        if type_ == "string":
            return scalars.string(self, schema, path)
        if type_ == "integer":  # loose: with 3.0 and 1.5e+16 too (scalars._loose_numeric)
            return scalars.integer(self, schema, path)
        if type_ == "number":
            return scalars.number(self, schema, path)
        if type_ == "boolean":
            return Literals(["true", "false"])
        if type_ == "null":
            return Literals(["null"])
        if type_ == "array":
            if self.loose:
                schema = {k: v for k, v in schema.items() if k not in LOOSE_ARRAY_DROPS}
            return self.array(schema, path, refs, at)
        if self.loose:
            return self.loose_object(schema, path, refs, at)
        return self.object(schema, path, refs, at)

    def array(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#") -> Node | None:
        """An array: ``prefixItems`` (or draft-4 tuple ``items``/``additionalItems``), then ``items``, with
        ``minItems``/``maxItems``, ``contains`` (``minContains``/``maxContains``), ``uniqueItems`` and
        ``unevaluatedItems`` (:mod:`.array_schema`); None when no array fits."""
        return array_schema.array(self, schema, path, refs, at)

    def object(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#") -> Node | None:
        """An object (:mod:`.objects`): named properties in declaration order (optional ones may be left
        out), extra members where ``patternProperties``/``additionalProperties`` allow them, member counts,
        dependencies and ``propertyNames``. None when no object fits; raises SchemaError for malformed
        keywords, CompileLimitError past a compile limit."""
        return compile_object(self, schema, path, refs, at)

    def loose_object(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#") -> Node | None:
        """An object compiled loosely: members in any order, any number of them; a declared key's value follows
        its (loose) schema, any other key's value ``additionalProperties`` (any value when absent, or when
        ``patternProperties`` may apply); the first :data:`LOOSE_REQUIRED` ``required`` names must appear.
        Contains every valid object (:class:`~..automata.nodes.MembersNode`); None when a required member admits no
        value."""
        props = schema.get("properties", {})
        props = props if isinstance(props, dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)][:LOOSE_REQUIRED] \
            if isinstance(schema.get("required"), list) else []
        extra = schema.get("additionalProperties", True)
        if schema.get("patternProperties"):
            extra = True
        pairs: list[tuple[Node, Node]] = []
        needed: list[bool] = []
        names = []
        for name in list(props) + [r for r in required if r not in props]:
            key = json.dumps(name, ensure_ascii=False)
            names.append(key)
            sub = props[name] if name in props else (extra if isinstance(extra, dict) else extra is not False)
            value = self.value(sub, path + [name], refs, f"{at}/properties/{pointer_token(name)}")
            if value is None:
                if name in required:
                    return None
                continue
            pairs.append((Literals([key]), value))
            needed.append(name in required)
        if extra is not False:
            value = self.value(extra if isinstance(extra, dict) else True, path + ["*"], refs,
                               f"{at}/additionalProperties")
            if value is not None:
                pairs.append((Minus(Leaf(STRING), Literals(names)) if names else Leaf(STRING), value))
                needed.append(False)
        if not pairs:
            return ObjectNode([])
        return MembersNode(pairs, needed)


    def anything(self, path: list[str]) -> Node:
        """Any JSON value, nested at most ``any_depth`` deep (noted as limited); when compiling loosely, the
        coarse value of :mod:`..automata.loose` instead (every JSON value nested as deep as the exact side it is
        subtracted from, :data:`~..automata.loose.LOOSE_DEPTH` at least, and texts that are not JSON, which nothing
        exact holds), a few states a level where the exact one has hundreds."""
        if self.loose:
            return CoarseValue(max(LOOSE_DEPTH, self.loose_depth))
        self.note("limited", path, "any value", f"nested at most {self.any_depth} deep")
        return self.any_value(self.any_depth)

    def any_value(self, depth: int) -> Node:
        """Any JSON value, nested at most ``depth`` arrays/objects deep (its automaton is built once per
        process, :class:`~..automata.nodes.AnyValue`)."""
        leaves = [Leaf(STRING), Leaf(NUMBER), Literals(["true", "false", "null"])]
        if depth <= 0:
            return AnyValue(0, Alt(leaves))
        inner = self.any_value(depth - 1)
        return AnyValue(depth, Alt(leaves + [ArrayNode([], inner, 0, None), MapNode(Leaf(STRING), inner)]))


def _exclusive_split(schema: dict[str, Any], base: dict[str, Any]) -> list[list[dict[str, Any]]] | None:
    """:func:`.exclusive.exclusive_required` of the schema's ``oneOf`` (None where it does not apply, or the
    schema gives :data:`~.keywords.ONEOF_LOOSE`), the names ``base`` never holds left out."""
    if ONEOF_LOOSE in schema:
        return None
    return exclusive_required(schema["oneOf"], _never(base, schema["oneOf"]))


def _never(base: Any, branches: Any) -> frozenset[str]:
    """The names the ``oneOf`` ``branches`` require that an object of ``base`` never holds: with
    ``additionalProperties: false``, no ``patternProperties`` and no layers, those ``properties`` does not
    declare or declares ``false`` (:func:`.exclusive.exclusive_required`)."""
    if not isinstance(base, dict) or base.get("additionalProperties") is not False or "patternProperties" in base \
            or LAYERS in base or not isinstance(base.get("properties", {}), dict) or not isinstance(branches, list):
        return frozenset()
    declared = base.get("properties", {})
    required = [b.get("required") for b in branches if isinstance(b, dict)]
    names = {k for r in required if isinstance(r, list) for k in r if isinstance(k, str)}
    return frozenset(k for k in names if k not in declared or declared[k] is False)


def _shape(schema: Any) -> dict[str, Any]:
    """The object shape of ``schema`` (and of its ``allOf`` entries): its declared property names (each
    admitting any value) and what it says of other keys (``patternProperties``, ``additionalProperties``);
    {} for a schema without them."""
    if not isinstance(schema, dict):
        return {}
    out: dict[str, Any] = {}
    names: dict[str, bool] = {}
    for part in [schema] + [s for s in schema.get("allOf", []) if isinstance(s, dict)]:
        if isinstance(part.get("properties"), dict):
            names.update({name: True for name in part["properties"]})
        for key in ("patternProperties", "additionalProperties"):
            if key in part and key not in out:
                out[key] = part[key]
    if names:
        out["properties"] = names
    return out


def _names(schema: Any) -> dict[str, Any]:
    """``{"properties": {name: true, ...}}`` for the property names ``schema`` (and its ``allOf`` entries)
    declares; {} when it declares none."""
    names = _shape(schema).get("properties")
    return {"properties": names} if names else {}


