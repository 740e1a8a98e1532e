"""JSON schema -> grammar node (:mod:`.nodes`): a regex in the canonical layout (one space after ``:`` and
``,``, nothing else) and the byte DFA built from it.

Coverage: ``type`` (also lists), ``enum``/``const`` of any JSON value (each value checked against the rest of
the schema with jsonschema, so enums are exact), objects (:mod:`.objects`: ``properties``/``required``,
optional properties in every subset, in declaration order, then extra members where ``patternProperties`` or
an ``additionalProperties`` schema allow them, otherwise closed; an object without properties is a map of
string keys; ``propertyNames``, ``minProperties``/``maxProperties``, ``dependentRequired``,
``dependentSchemas``, draft 7 ``dependencies``, ``unevaluatedProperties`` (:mod:`.unevaluated`)), ``items``,
``prefixItems`` (and draft-4 tuple ``items``/``additionalItems``), ``minItems``/``maxItems``, ``anyOf``,
``oneOf`` (compiled as anyOf: exclusivity is not enforced), ``allOf`` (merged), ``$ref`` to any local JSON
pointer (``$defs``/``definitions``; recursion unrolled to a configurable depth), string
``minLength``/``maxLength`` (in decoded code points), ``pattern`` (see :mod:`.pattern`), ``format``
(see :mod:`.formats`), integer ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` (exact digit
ranges, see :mod:`.ranges`). Annotations (``description``, ``title``, ``default``, ``examples`` ...) are read
and not enforced.

What the grammar cannot enforce (number bounds on fractions, ``multipleOf``, ``uniqueItems``, ``not``,
repeated extra keys ...) is recorded as a :class:`Note` of kind ``"not enforced"``; outputs are checked
against the full schema with jsonschema after generation. A sub-schema that admits no value compiles to ``None``
and is dropped where it is optional; where it is required the whole schema is unsatisfiable (SchemaError).

Size: literal sets (names, enum values) become alternations of literals, which interegular determinizes
into a literal trie, and each function is determinized on its own and joined after its name
(:mod:`.grammar`), so a 1,000-value enum or a 30-function catalog does not explode.

Work: bounded by the compile limits (:mod:`.limits`): the schema's size, the sub-schemas compiled (with
``$ref`` inlined), the optional properties of one object, the automaton states built, the states of one
pattern; past one, CompileLimitError names it and the place (a JSON pointer: each method takes ``at``, the
place of the schema it reads, and each node records it). A schema that admits no value because a ``$ref``
cycle never reaches a value without itself is reported as a recursion with no base case, at the ``$ref``.

Modules: this one dispatches on the schema (``anyOf``/``oneOf`` branches, ``type``) and handles the
containers (arrays, any value); :mod:`.references` inlines ``$ref`` and merges ``allOf``; :mod:`.scalars`
reads the keywords of enums, strings, integers and numbers; :mod:`.objects` those of objects (automata in
:mod:`.object_automaton`); :mod:`.keywords` lists the keywords known; :mod:`.diagnostics` holds the notes
and the messages.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import SchemaError
from . import scalars
from .diagnostics import Note, SchemaContext
from .keywords import (
    ANNOTATIONS, ARRAY_KEYWORDS, NOT_ENFORCEABLE, NUMBER_KEYWORDS, OBJECT_KEYWORDS, STRING_KEYWORDS, STRUCTURAL,
    TYPES, capped, counts,
)
from .lexical import NUMBER, STRING
from .nodes import Alt, ArrayNode, Leaf, Literals, MapNode, Node
from .objects import compile_object
from .references import expand, merge

__all__ = ["Note", "SchemaCompiler"]


class SchemaCompiler(SchemaContext):
    """Compile the JSON schemas of one function into grammar nodes (``node.regex``, ``node.dfa()``).

    ``function`` names the function in messages; ``root`` is the schema ``$ref`` pointers resolve against;
    ``max_recursion`` is how many times one ``$ref`` may be entered on a path (3 by default); ``limits``
    bound the work (:mod:`.limits`, the defaults when None). ``notes`` collects what was not enforced,
    ignored or unrolled. Raises SchemaError naming the function, the parameter path and the keyword for
    anything it cannot compile; CompileLimitError (a SchemaError) past a compile limit.
    """

    def parameters(self, schema: dict[str, Any]) -> Node:
        """The node of a function's whole ``parameters`` object schema; raises SchemaError if unsatisfiable."""
        self.root = schema
        return self.whole(schema, "the parameters schema admits no value (unsatisfiable)")

    def whole(self, schema: Any, unsatisfiable: str) -> Node:
        """The node of the whole schema ``self.root`` (``schema``): its size checked against the ``bytes``
        limit first. When it admits no value, raises SchemaError: a recursion with no base case where a
        ``$ref`` cycle is the cause (:meth:`endless_recursion`), else ``unsatisfiable``."""
        self.budget.check_bytes(schema)
        with self.budget.running():
            node = self.value(schema, [], (), "#")
        if node is None:
            endless = self.endless_recursion(schema)
            if endless is not None:
                ref, at = endless
                raise SchemaError(f"{self.where_at(at)}: recursive $ref with no base case "
                                  f"({ref!r} admits no finite value)")
            raise self.error([], unsatisfiable)
        return node

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
            self.note("limited", path, "any value", f"nested at most {self.any_depth} deep")
            return self.any_value(self.any_depth)
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
            elif key not in STRUCTURAL and key not in ANNOTATIONS:
                self.note("ignored", path, key, "unknown keyword")
        if "anyOf" in schema or "oneOf" in schema:
            return self.branches(schema, path, refs, at)
        if "const" in schema or "enum" in schema:
            return scalars.enum(self, schema, path)
        types = self.types(schema, path)
        parts = [self.typed(t, schema, path, refs, at) for t in types]
        return _alt([p for p in parts if p is not None])

    def branches(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...],
                 at: str = "#") -> Node | None:
        """The alternation of ``anyOf``/``oneOf`` branches, each merged with the schema's other keywords
        (both lists multiplied out when both are present); None when no branch admits a value."""
        base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        # each option with the references entered to make it (a branch that is a $ref counts as entering
        # it, so that a cycle through anyOf is cut like any other) and its place
        options: list[tuple[dict[str, Any], tuple[str, ...], str]] = [(base, refs, at)]
        for key in ("anyOf", "oneOf"):
            if key not in schema:
                continue
            subs = schema[key]
            if not isinstance(subs, list) or not subs:
                raise self.error(path, f"'{key}' must be a non-empty list")
            if key == "oneOf" and len(subs) > 1:
                self.note("not enforced", path, "oneOf", "compiled as anyOf: exclusivity is not enforced")
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
        return _alt([p for p in parts if p is not None])

    def types(self, schema: dict[str, Any], path: list[str]) -> list[str]:
        """The JSON types ``schema`` allows ("any" for an unconstrained value); raises SchemaError for a
        malformed or unknown ``type``."""
        t = schema.get("type")
        if t is None:
            # Without "type" every type is allowed and type-specific keywords constrain only their own type.
            # Scalars are always included; objects and arrays only when their keywords say so (an
            # unconstrained structure would be any JSON value), which narrows the language (noted).
            keys = set(schema)
            inferred = []
            if keys & OBJECT_KEYWORDS:
                inferred.append("object")
            if keys & ARRAY_KEYWORDS:
                inferred.append("array")
            if not inferred and not keys & (STRING_KEYWORDS | NUMBER_KEYWORDS):
                return ["any"]
            self.note("limited", path, "type", "no 'type': " + ", ".join(inferred + ["scalars"]))
            return inferred + ["string", "number", "boolean", "null"]
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
            self.note("limited", path, "any value", f"nested at most {self.any_depth} deep")
            return self.any_value(self.any_depth)
        if type_ == "string":
            return scalars.string(self, schema, path)
        if type_ == "integer":
            return scalars.integer(self, schema, path)
        if type_ == "number":
            return scalars.number(self, schema, path)
        if type_ == "boolean":
            return Literals(["true", "false"])
        if type_ == "null":
            return Literals(["null"])
        if type_ == "array":
            return self.array(schema, path, refs, at)
        return self.object(schema, path, refs, at)

    def array(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#") -> Node | None:
        """An array: ``prefixItems`` (or draft-4 tuple ``items``/``additionalItems``), then ``items``, with
        ``minItems``/``maxItems`` (capped at MAX_COUNT); None when no array fits."""
        lo, hi = counts(self, schema, path, "minItems", "maxItems")
        if hi is not None and hi < lo:
            return None
        lo, hi = capped(self, lo, hi, path, "minItems", "maxItems")
        items = schema.get("items", True)
        prefix: list[Any] = []
        rest: Any = items
        prefix_at, rest_at = f"{at}/prefixItems", f"{at}/items"
        if "prefixItems" in schema:
            prefix = list(schema["prefixItems"])
        elif isinstance(items, list):  # draft 4-7 tuple form
            prefix = items
            rest = schema.get("additionalItems", True)
            prefix_at, rest_at = f"{at}/items", f"{at}/additionalItems"
        sub = path + ["[]"]
        prefix_rx = [self.value(p, sub, refs, f"{prefix_at}/{i}") for i, p in enumerate(prefix)]
        rest_rx = self.value(rest, sub, refs, rest_at) if rest is not False else None
        # the longest possible array: up to the first impossible prefix item, or the prefix if no rest
        usable = len(prefix_rx)
        for i, rx in enumerate(prefix_rx):
            if rx is None:
                usable = i
                break
        cap = usable if (usable < len(prefix_rx) or rest_rx is None) else None
        if hi is not None:
            cap = hi if cap is None else min(cap, hi)
        if cap is not None and cap < lo:
            return None
        return ArrayNode(prefix_rx[:usable], rest_rx if usable == len(prefix_rx) else None, lo, cap)

    def object(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str = "#") -> Node | None:
        """An object (:mod:`.objects`): named properties in declaration order (optional ones may be left
        out), extra members where ``patternProperties``/``additionalProperties`` allow them, member counts,
        dependencies and ``propertyNames``. None when no object fits; raises SchemaError for malformed
        keywords, CompileLimitError past a compile limit."""
        return compile_object(self, schema, path, refs, at)

    def any_value(self, depth: int) -> Node:
        """Any JSON value, nested at most ``depth`` arrays/objects deep."""
        leaves = [Leaf(STRING), Leaf(NUMBER), Literals(["true", "false", "null"])]
        if depth <= 0:
            return Alt(leaves)
        inner = self.any_value(depth - 1)
        return Alt(leaves + [ArrayNode([], inner, 0, None), MapNode(Leaf(STRING), inner)])


def _alt(parts: list[Node]) -> Node | None:
    """None for no parts, the part itself for one, else their :class:`~.nodes.Alt`."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Alt(parts)
