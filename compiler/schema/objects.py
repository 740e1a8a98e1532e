"""The keywords of the object type read into a grammar node: ``properties``, ``required``,
``patternProperties``, ``additionalProperties``, ``propertyNames``, ``minProperties``/``maxProperties``,
``dependentRequired``/``dependentSchemas`` (and draft 7 ``dependencies``), and the object *layers* that
``allOf`` leaves (:data:`~.keywords.LAYERS`, see :func:`~.references.merge`).

Layout: the *named* keys (declared in ``properties`` in declaration order, then ``required`` names not
declared, then names the dependencies mention) come first, each at most once, optional ones may be left
out; then the *extra* members, any number, in any order. Objects are closed: extra keys come only where
``patternProperties`` or an ``additionalProperties`` schema (a JSON object, ``{}`` included) says so, or
where the object declares no property (a map, ``additionalProperties`` absent or true). Keys are written in
the canonical spelling (:data:`KEY`).

Values (JSON Schema 2020-12, section 10.3.2): a key's value satisfies, in every layer, the schema of the
property it names and of each pattern it matches (a search on the decoded key), or the layer's
``additionalProperties`` when it matches neither. Extra keys are split into *regions* by the patterns they
match (:func:`~..automata.object_automaton.classify`, at most :data:`MAX_REGIONS`), each region with one value node;
a region whose value admits nothing is left out (``false``). Repeated extra keys are not refused (noted "not
enforced": which keys came before is not a regular language).

Counts and dependencies: ``minProperties``/``maxProperties`` are counted in the automaton (above MAX_COUNT
noted and left to the check after generation), and so are the ``dependentRequired`` lists (and draft 7
``dependencies`` lists), at most :data:`MAX_DEPENDENCIES` of them (:class:`~..automata.object_automaton.OpenObject`).
Each dependent schema ``K: S`` splits the object into two alternatives, without ``K`` (``properties: {K:
false}``, the names ``S`` declares still allowed with any value) or with it (``required: [K]`` and ``S`` merged in), at most :data:`MAX_DEPENDENCIES` of them; the
others are noted "not enforced".
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from ...core.errors import SchemaError
from ...core.indexfile import REPEATED_KEYS
from ..automata import dfa as D
from .. import limits
from ..automata import counters
from ..automata.compose import is_empty, product
from ..automata.dfa import ByteDFA
from .diagnostics import SchemaContext
from .keywords import LAYERS, capped, counts
from ..automata.lexical import STRING, string_of
from ..automata.nodes import LEAF_CACHE, Alt, Leaf, MapNode, Node, ObjectNode
from ..automata.object_automaton import OpenObject, Tagged, classify, retag
from ..automata.pattern import PatternError, pattern_regex
from .references import merge

#: The canonical spelling of a key (what ``json.dumps(key, ensure_ascii=False)`` writes): characters as
#: themselves, ``\\" \\\\ \\b \\f \\n \\r \\t``, other control characters as ``\\u00xx`` (lower-case hex).
KEY = string_of(r'(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))*')
#: The most name lists (``dependentRequired``) the automaton follows, each at most doubling its slots, and the
#: most dependent schemas split into alternatives, each doubling them; later ones are noted and checked
#: after generation.
MAX_DEPENDENCIES = 6
#: The most regions of extra keys (combinations of the patterns a key matches, each with its own value
#: automaton): past it the object is refused with CompileLimitError (a few patterns give a few regions; n
#: patterns that all overlap give 2**n).
MAX_REGIONS = 64
LAYER_KEYS = ("properties", "patternProperties", "additionalProperties")
_DEPENDENCY_KEYS = ("dependentRequired", "dependentSchemas", "dependencies")


def layers(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The object layers of a merged schema: its own ``properties``/``patternProperties``/
    ``additionalProperties``, then those ``allOf`` branches left apart (:data:`~.keywords.LAYERS`)."""
    own = {k: schema[k] for k in LAYER_KEYS if k in schema}
    return [own] + list(schema.get(LAYERS, []))


def conjunction(schemas: list[Any]) -> Any:
    """One schema for all of ``schemas``: False if one is false, True if none is left, else the one left
    or their ``allOf``."""
    if any(s is False for s in schemas):
        return False
    rest = [s for s in schemas if s is not True and s != {}]
    if not rest:
        return True
    return rest[0] if len(rest) == 1 else {"allOf": rest}


def pointer_token(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _count(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> tuple[int, int | None]:
    """(minProperties, maxProperties) as whole numbers (``2.0`` is 2); SchemaError when malformed."""
    fixed = {}
    for key in ("minProperties", "maxProperties"):
        v = schema.get(key)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if v is not None:
            fixed[key] = v
    return counts(ctx, fixed, path, "minProperties", "maxProperties")


class ObjectCompiler:
    """Compiles one object schema (already merged: no ``$ref``/``allOf`` at its top) for ``ctx``, a
    :class:`~.compiler.SchemaCompiler`; :meth:`node` is the entry point."""

    def __init__(self, ctx, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str):
        self.ctx, self.schema, self.path, self.refs, self.at = ctx, schema, path, refs, at

    def error(self, message: str):
        return self.ctx.error(self.path, message)

    def node(self) -> Node | None:
        """The object's node, or None when no object satisfies the schema. Raises SchemaError for malformed
        keywords, CompileLimitError past a compile limit."""
        self.name_lists, self.dependent_schemas = self.read_dependencies()
        if self.dependent_schemas:
            return self.dependencies()
        return self.plain()

    # -- dependencies -------------------------------------------------------------------------------------

    def read_dependencies(self) -> tuple[dict[str, list[str]], list[tuple[str, str, Any]]]:
        """(name -> the names it needs, from ``dependentRequired`` and draft 7 ``dependencies`` lists;
        ``(keyword, name, schema)`` of the dependent schemas that constrain something). Raises SchemaError
        for malformed entries."""
        lists: dict[str, list[str]] = {}
        schemas: list[tuple[str, str, Any]] = []
        for key in _DEPENDENCY_KEYS:
            entries = self.schema.get(key)
            if entries is None:
                continue
            if not isinstance(entries, dict):
                raise self.error(f"'{key}' must be a JSON object")
            for name, dep in entries.items():
                if isinstance(dep, list) and key != "dependentSchemas":
                    if not all(isinstance(x, str) for x in dep):
                        raise self.error(f"'{key}' lists must hold property names")
                    lists[name] = list(dict.fromkeys([*lists.get(name, []), *dep]))
                elif isinstance(dep, (dict, bool)) and key != "dependentRequired":
                    if dep is not True and dep != {}:
                        schemas.append((key, name, dep))
                else:
                    raise self.error(f"'{key}' entry {name!r} must be "
                                     + ("a list of names" if key == "dependentRequired" else "a schema"))
        return lists, schemas

    def dependencies(self) -> Node | None:
        """The union of the alternatives the dependent schemas split the object into: without the key, or
        with it and its schema merged in (see the module docstring)."""
        ctx, schema = self.ctx, self.schema
        base = {k: v for k, v in schema.items() if k != "dependentSchemas"}
        if isinstance(base.get("dependencies"), dict):
            base["dependencies"] = {k: v for k, v in base["dependencies"].items() if isinstance(v, list)}
        base["type"] = "object"
        required = {r for r in schema.get("required", []) if isinstance(r, str)}
        groups: list[tuple[str, list[dict[str, Any]]]] = []  # (keyword, [without K, with K])
        for key, name, dep in self.dependent_schemas:
            present = {"required": [name], "allOf": [dep]}
            if name in required:
                base = merge(ctx, base, present, self.path, self.at)
            else:
                # without the key: the names its schema declares may still be written (any value), as
                # objects are closed to the names the schema declares, wherever it declares them
                declared = dep.get("properties") if isinstance(dep, dict) else None
                absent = {name: False, **{n: True for n in (declared if isinstance(declared, dict) else {})
                                          if n != name}}
                groups.append((key, [{"properties": absent}, present]))
        if len(groups) > MAX_DEPENDENCIES:
            for key, _ in groups[MAX_DEPENDENCIES:]:
                ctx.note("not enforced", self.path, key, f"more than {MAX_DEPENDENCIES} dependent schemas")
            groups = groups[:MAX_DEPENDENCIES]
        ctx.budget.check_nodes(2 ** len(groups), self.at)
        parts = []
        for choice in itertools.product(*[alts for _, alts in groups]):
            alt = base
            for piece in choice:
                alt = merge(ctx, alt, piece, self.path, self.at)
            node = ctx.value(alt, self.path, self.refs, self.at)
            if node is not None:
                parts.append(node)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else Alt(parts)

    def needs(self, members: list[tuple[str, Node, bool]]) -> list[tuple[str, Node, bool]] | None:
        """The members with the ``dependentRequired`` lists applied: a name whose needed names cannot appear
        is left out, a required name makes its needed names required; sets ``self.constraints`` to what is
        left for the automaton (``(k, [l, ...])`` member indices, at most MAX_DEPENDENCIES, the rest noted).
        None when a required member is left out."""
        self.constraints: list[tuple[int, list[int]]] = []
        if not self.name_lists:
            return members
        texts = {name: json.dumps(name, ensure_ascii=False) for name in self.name_lists}
        names = {text: i for i, (text, _, _) in enumerate(members)}
        present = {json.loads(text) for text in names}
        required = {json.loads(text) for text, _, r in members if r}
        changed = True
        while changed:  # fixpoint: left out names and forced names spread along the lists
            changed = False
            for name, needed in self.name_lists.items():
                if name in present and not set(needed) <= present:
                    if name in required:
                        return None
                    present.discard(name)
                    changed = True
                elif name in required and not set(needed) <= required:
                    required |= set(needed)
                    changed = True
        out = [(text, node, json.loads(text) in required) for text, node, _ in members
               if json.loads(text) in present]
        index = {text: i for i, (text, _, _) in enumerate(out)}
        kept = [(name, needed) for name, needed in self.name_lists.items()
                if name in present and name not in required and not set(needed) <= required]
        if len(kept) > MAX_DEPENDENCIES:
            key = "dependentRequired" if "dependentRequired" in self.schema else "dependencies"
            self.ctx.note("not enforced", self.path, key, f"more than {MAX_DEPENDENCIES} dependencies")
            kept = kept[:MAX_DEPENDENCIES]
        self.constraints = [(index[texts[name]], [index[json.dumps(x, ensure_ascii=False)] for x in needed])
                            for name, needed in kept]
        return out

    # -- one object ---------------------------------------------------------------------------------------

    def plain(self) -> Node | None:
        ctx, schema, path = self.ctx, self.schema, self.path
        lo, hi = _count(ctx, schema, path)
        if hi is not None and hi < lo:
            return None
        lo, hi = capped(ctx, lo, hi, path, "minProperties", "maxProperties")
        required = schema.get("required", [])
        if not isinstance(required, list):
            raise self.error("'required' must be a list")
        required = list(dict.fromkeys(r for r in required if isinstance(r, str)))
        self.layers = layers(schema)
        for layer in self.layers:
            if not isinstance(layer.get("properties", {}), dict):
                raise self.error("'properties' must be a JSON object")
            if not isinstance(layer.get("patternProperties", {}), dict):
                raise self.error("'patternProperties' must be a JSON object")
        with limits.active(ctx.budget):
            names = self.key_universe()
            self.read_patterns()
            members = self.members(required, names)
            members = None if members is None else self.needs(members)
            if members is None:
                return None
            keys, regions = self.extras(members, names)
        n_req = sum(1 for _, _, r in members if r)
        most = None if keys is not None else len(members)
        if (hi is not None and n_req > hi) or (most is not None and most < lo):
            return None
        if lo <= n_req:
            lo = 0
        if hi is not None and most is not None and hi >= most:
            hi = None
        if keys is None and lo == 0 and hi is None and not self.constraints:
            return ObjectNode(members)
        if (keys is not None and not members and lo == 0 and hi is None and len(regions) == 1
                and names is None and not self.named and not self.patterns and not self.unknown):
            return MapNode(Leaf(STRING), regions[0])  # a map: any key, one value
        return OpenObject(members, keys, regions, lo, hi, self.constraints)

    def key_universe(self) -> ByteDFA | None:
        """The DFA of the key texts ``propertyNames`` admits (canonical spelling, :data:`KEY`), or None when
        it admits every key; sets ``self.no_keys`` when it admits none."""
        self.no_keys = False
        pn = self.schema.get("propertyNames", True)
        if pn is True or pn == {}:
            return None
        node = None
        if pn is not False:
            node = self.ctx.value({"allOf": [pn, {"type": "string"}]}, self.path + ["<name>"], self.refs,
                                  f"{self.at}/propertyNames")
        both = None if node is None else product(LEAF_CACHE.get(KEY), D.minimize(node.dfa()), "and")
        if both is None or is_empty(both):
            self.no_keys = True
            return None
        return D.minimize(both)

    def read_patterns(self) -> None:
        """The patterns of every layer: ``self.patterns`` (translatable, in order) with their DFAs
        ``self.pattern_dfas``; ``self.unknown`` those that cannot be translated (noted: their schema then
        applies to every key, and ``additionalProperties`` too)."""
        self.patterns: list[str] = []
        self.pattern_dfas: list[ByteDFA] = []
        self.unknown: set[str] = set()
        for layer in self.layers:
            for p in layer.get("patternProperties", {}):
                if p in self.patterns or p in self.unknown:
                    continue
                try:
                    dfa = LEAF_CACHE.get(string_of(_key_pattern_regex(p)))
                except (PatternError, SchemaError) as exc:  # a pattern past the pattern limit too
                    if isinstance(exc, limits.CompileLimitError) and "limit is pattern=" not in str(exc):
                        raise
                    self.unknown.add(p)
                    self.ctx.note("limited", self.path, "patternProperties",
                                  f"pattern {p!r} cannot be translated ({exc}); its schema applies to every key")
                    continue
                self.patterns.append(p)
                self.pattern_dfas.append(dfa)

    def value_schema(self, matched: list[str], name: str | None) -> Any:
        """The schema a key's value satisfies: in each layer, the property ``name`` declares and the
        schemas of the ``matched`` patterns (and of untranslatable ones), else ``additionalProperties``."""
        out = []
        for layer in self.layers:
            props = layer.get("properties", {})
            pats = layer.get("patternProperties", {})
            hit = False
            if name is not None and name in props:
                out.append(props[name])
                hit = True
            for p in matched:
                if p in pats:
                    out.append(pats[p])
                    hit = True
            out.extend(pats[p] for p in pats if p in self.unknown)
            if not hit and "additionalProperties" in layer:
                out.append(layer["additionalProperties"])
        return conjunction(out)

    def members(self, required: list[str], names: ByteDFA | None) -> list[tuple[str, Node, bool]] | None:
        """The named members ``(key text, value node, required)``; None when a required one admits no value
        (or no key). Optional ones that admit none are left out."""
        order: list[str] = []
        for layer in self.layers:
            order.extend(k for k in layer.get("properties", {}) if k not in order)
        order.extend(r for r in required if r not in order)
        for name, needed in self.name_lists.items():  # the names dependencies mention may appear too
            order.extend(x for x in [*needed, name] if x not in order)
        self.named = order
        self.ctx.budget.check_properties(sum(1 for k in order if k not in required), self.at)
        out = []
        for name in order:
            text = json.dumps(name, ensure_ascii=False)
            blob = text.encode("utf-8")
            allowed = not self.no_keys and (names is None or names.accepts(blob))
            matched = [p for p, d in zip(self.patterns, self.pattern_dfas) if d.accepts(blob)]
            sub = self.value_schema(matched, name) if allowed else False
            node = None
            if sub is not False:
                declared = [i for i, layer in enumerate(self.layers) if name in layer.get("properties", {})]
                where = (f"{self.at}/properties/{pointer_token(name)}" if declared else f"{self.at}/required")
                node = self.ctx.value(sub, self.path + [name], self.refs, where)
            if node is None:
                if name in required:
                    return None
                continue
            out.append((text, node, name in required))
        return out

    def extras(self, members, names: ByteDFA | None) -> tuple[Tagged | None, list[Node]]:
        """The classifier of extra keys (tag: region) and each region's value node; (None, []) when the
        object takes no extra member."""
        # a property some layer forbids (``false``) is forbidden, whatever the others say (a dependent schema's
        # alternative without its key declares the names the schema declares as ``true``): it declares nothing
        forbidden = {k for layer in self.layers for k, v in layer.get("properties", {}).items() if v is False}
        declared = any(k not in forbidden for layer in self.layers for k in layer.get("properties", {}))
        additional = [layer["additionalProperties"] for layer in self.layers if "additionalProperties" in layer]
        opened_by_schema = any(isinstance(a, dict) for a in additional)
        map_open = not declared and all(a is not False for a in additional)
        if not (self.patterns or opened_by_schema or map_open) or self.no_keys:
            return None, []
        universe = names if names is not None else LEAF_CACHE.get(KEY)
        named = [json.dumps(k, ensure_ascii=False).encode("utf-8") for k in self.named]
        keys = classify(universe, self.pattern_dfas, named)
        if keys is None:
            return None, []
        regions: list[Node] = []
        mapping: dict[int, int] = {}
        masks = sorted({int(t) for t in keys.tags if t >= 0})
        if len(masks) > MAX_REGIONS:
            raise limits.CompileLimitError(
                f"{self.ctx.where_at(self.at)}: the patternProperties split the extra keys into {len(masks):,} "
                f"regions (each with its own value), more than {MAX_REGIONS}")
        for mask in masks:
            matched = [p for i, p in enumerate(self.patterns) if mask >> i & 1]
            if not (matched or opened_by_schema or map_open):
                continue
            sub = self.value_schema(matched, None)
            if sub is False:
                continue
            where = (f"{self.at}/patternProperties/{pointer_token(matched[0])}" if matched
                     else f"{self.at}/additionalProperties")
            node = self.ctx.value(sub, self.path + ["*"], self.refs, where)
            if node is None:
                continue
            mapping[mask] = len(regions)
            regions.append(node)
        keys = retag(keys, mapping) if mapping else None
        if keys is None:
            return None, []
        self.ctx.note("not enforced", self.path, "patternProperties" if self.patterns else "additionalProperties",
                      REPEATED_KEYS)
        return keys, regions


def _key_pattern_regex(pattern: str) -> str:
    """The regex of a ``patternProperties`` key pattern. Where the compile uses counters (:mod:`..automata.counters`),
    which cannot carry keys that several patterns classify, a long repeat whose copies pass 2,500 characters
    (a quarter of the ``pattern`` limit) is refused at once (noted; the pattern's schema then applies to every
    key): ``^.{1,256}$`` in JSONSchemaStore's vercel schema, three times, whose key automaton of thousands of
    states would be copied into each key dispatch of its objects (interegular, which built the patterns before
    :mod:`..automata.positions`, took 1.1-12 s for it and then passed the limit). Raises PatternError."""
    if not counters.active():
        return pattern_regex(pattern)
    return pattern_regex(pattern, max_copies=limits.LIMITS["pattern"][0] // 4)


def compile_object(ctx, schema: dict[str, Any], path: list[str], refs: tuple[str, ...], at: str) -> Node | None:
    """The node of the objects ``schema`` admits (see the module docstring), or None when none; ``ctx`` is
    the :class:`~.compiler.SchemaCompiler`. Raises SchemaError for malformed keywords, CompileLimitError past a
    compile limit (optional properties, states, nodes)."""
    return ObjectCompiler(ctx, schema, path, refs, at).node()


__all__ = ["KEY", "MAX_DEPENDENCIES", "MAX_REGIONS", "compile_object", "conjunction", "layers"]
