"""The keywords of arrays -> grammar nodes: ``prefixItems``/``items`` (and the draft 4-7 tuple form
``items``/``additionalItems``), ``minItems``/``maxItems``, ``contains`` with ``minContains``/``maxContains``,
``uniqueItems`` and ``unevaluatedItems``.

* Counts are enforced exactly: the automaton is one copy of the item per count that matters
  (:mod:`..automata.arrays`). Counts up to MAX_COUNT (64) always are (the ``states`` compile limit stops those whose
  copies are too large); larger ones while the copies stay within :data:`COPY_STATES` states,
  :data:`COPY_WIDE` states of string contents (each allows most of a vocabulary: 1,000 copies of a string
  item would pass the ``entries`` limit of the index) and :data:`COPY_BYTES` bytes of the shortest array
  that tells the counts apart (the minimization's steps), else they are noted as not enforced: 1,000
  integers are enforced (18,000 states, 3,000 bytes), 1,000 strings are not.
* ``contains`` splits each item into those that match and those that do not (the intersection and the
  difference of the item's automaton with the ``contains`` one) and counts matches up to
  :data:`CONTAINS_BOUND` (a larger ``minContains`` enforces the bound, a larger ``maxContains`` is left to
  the check after generation; both noted). Items whose language is finite are split by jsonschema itself;
  otherwise an item matching ``contains`` but spelled otherwise than the ``contains`` automaton reads it
  (``1.0`` for an integer, ``\\u0061``, other key orders) counts as no match, so ``maxContains`` is noted as
  not enforced for those spellings unless the split is exact (:func:`exact_split`).
* ``uniqueItems`` is enforced where each position's item language is a finite set of at most
  :data:`UNIQUE_VALUES` values, the sets of values an array can hold are at most :data:`UNIQUE_SETS` (the
  automaton tracks the set of values used) and their tries of the values left come to at most
  :data:`COPY_STATES` states (about ten short values, compiled in about a second); otherwise
  it is noted as not enforced, naming the bound.
* ``unevaluatedItems`` applies to the items after ``prefixItems`` when no ``items`` is given, except those
  that match ``contains``; ``allOf``, ``anyOf``/``oneOf`` and ``$ref`` are merged into the schema before
  (:mod:`.references`), so their ``prefixItems``/``items``/``contains`` count as evaluating; an ``if`` splits
  the schema (:meth:`~.compiler.SchemaCompiler.logic`), the side where it passes merged with it, so its items
  count too. Keywords whose evaluation is not followed (``$dynamicRef``, a second ``contains``) leave it to
  the check after generation (noted).
"""

from __future__ import annotations

from math import comb
from typing import Any

import jsonschema
import numpy as np

from ..automata import arrays
from .. import limits
from ..automata import counters
from ...core.patterns import python_schema
from .diagnostics import SchemaContext
from .keywords import ANNOTATIONS, MAX_COUNT, counts
from ..automata.nodes import Alt, ArrayNode, DistinctArrayNode, Leaf, Literals, Node, structural_key

#: Matches of ``contains`` counted exactly up to this many (a larger ``minContains`` enforces this many).
CONTAINS_BOUND = 64
#: ``uniqueItems`` is enforced when every item position has at most this many values ...
UNIQUE_VALUES = 64
#: ... and the sets of distinct values an array can hold (sum over n <= maxItems of C(values, n)) are at
#: most this many (each set is one state of the control machine, holding a trie of the values left).
UNIQUE_SETS = 4096
#: Item counts above MAX_COUNT are enforced while the copies of the item they need stay within this many
#: states ...
COPY_STATES = 50_000
#: ... and this many states of string contents, each of which allows most of a vocabulary's tokens (the
#: ``entries`` limit: 1,000 copies of a string would need 150 million entries with Qwen's vocabulary).
COPY_WIDE = 64
#: ... and this many bytes of the shortest array that tells the counts apart (copies times the shortest item
#: and its separator): minimization needs about one step per byte of it (JSONSchemaBench Github_easy/o9925:
#: 1,000 ids of 24 hex digits, 28,000 bytes, 27,000 states, builds in about 3 s).
COPY_BYTES = 32_000
#: A state allowing at least this many bytes counts as string contents (those allow 200 bytes and more; the
#: states inside a UTF-8 character allow at most 64).
WIDE_BYTES = 128
#: Keywords whose evaluation of items ``unevaluatedItems`` would have to see but the compiler does not
#: follow.
UNSEEN_EVALUATORS = ("if", "then", "else", "$dynamicRef", "$recursiveRef")


def array(ctx: SchemaContext, schema: dict[str, Any], path: list[str], refs: tuple[str, ...],
          at: str) -> Node | None:
    """The node of the arrays ``schema`` admits (``ctx``: the schema compiler, whose ``value`` compiles the
    item schemas), or None when it admits none. Raises SchemaError for malformed keywords."""
    lo, hi = counts(ctx, schema, path, "minItems", "maxItems")
    if hi is not None and hi < lo:
        return None
    sub = path + ["[]"]
    prefix, rest, rest_at, evaluated = _positions(ctx, schema, path, at)
    rest_schema = rest  # the schema of the items after the prefix (for exact_split)

    has_contains = "contains" in schema
    contains = schema.get("contains") if has_contains else None
    cmin, cmax = counts(ctx, schema, path, "minContains", "maxContains", default=1) if has_contains else (0, None)
    if has_contains and cmax is not None and cmax < cmin:
        return None

    everything = has_contains and (contains is True or contains == {})
    applies = _unevaluated_applies(ctx, schema, path, evaluated, everything)
    cond: Node | None = None  # the contains node, when it counts or evaluates items
    if has_contains and not everything and contains is not False and (cmin or cmax is not None or applies):
        cond = ctx.value(contains, sub, refs, f"{at}/contains")
    if applies:
        unevaluated = schema["unevaluatedItems"]
        tail = None if unevaluated is False else ctx.value(unevaluated, sub, refs, f"{at}/unevaluatedItems")
        rest = _alt([n for n in (cond, tail) if n is not None])
        rest_at, rest_schema = None, unevaluated
    prefix_nodes, rest = _item_nodes(ctx, schema, prefix, rest, rest_at, sub, refs, at)
    usable = len(prefix_nodes)
    cap = hi
    if rest is None:
        cap = usable if cap is None else min(cap, usable)
    if cap is not None and cap < lo:
        return None

    # contains: every item matches (a count of items), none can, or a count of matches
    if everything:
        settled = _every_item_contains(lo, cap, cmin, cmax)
    elif has_contains:
        settled = _contains_bounds(ctx, path, cond, lo, cap, cmin, cmax)
    else:
        settled = lo, cap, cmin, cmax
    if settled is None:
        return None
    lo, cap, cmin, cmax = settled
    counting = cond is not None and (cmin > 0 or cmax is not None)

    positions = prefix_nodes + ([rest] if rest is not None and (cap is None or cap > usable) else [])
    if schema.get("uniqueItems") is True and (cap is None or cap > 1):
        node = _distinct(ctx, schema, path, prefix_nodes, rest, lo, cap, positions, cmin if counting else 0,
                         cmax if counting else None)
        if node is not None:
            return node
    lo, cap, counter = _affordable(ctx, path, prefix_nodes, rest, lo, cap,
                                   1 + (cmin if cmax is None else cmax) if counting else 1)
    if not counting:
        return ArrayNode(prefix_nodes, rest, lo, cap, counter=counter)
    return _counting_contains(ctx, path, contains, cond, prefix[:usable] + [rest_schema], positions, prefix_nodes,
                              rest, lo, cap, cmin, cmax)


def _counting_contains(ctx: SchemaContext, path: list[str], contains: Any, cond: Node, item_schemas: list,
                       positions: list[Node], prefix_nodes: list[Node], rest: Node | None, lo: int, cap: int | None,
                       cmin: int, cmax: int | None) -> Node | None:
    """The array node that counts the items matching ``contains`` (``cond``, its node) between ``cmin`` and
    ``cmax``. With a ``maxContains``, items whose texts are few are split by jsonschema itself (exact);
    otherwise the split is by ``cond``'s automaton, and ``maxContains`` is noted as not enforced for the other
    spellings unless :func:`exact_split` of ``item_schemas`` (the prefix's and the rest's) holds. None when
    no array can hold ``cmin`` matches."""
    if cmax is not None:
        finite = _finite_tables(ctx, positions, UNIQUE_VALUES * 4)
        if finite is not None:  # every item text classified by jsonschema: an exact split
            matching = _matching(ctx, contains, [t for table in finite for texts in table.values() for t in texts])
            if matching is None:
                ctx.note("not enforced", path, "maxContains", "the contains schema cannot be checked on the items")
                cmax = None
            else:
                cond = Literals(matching) if matching else None
                if cond is None:
                    return None if cmin > 0 else ArrayNode(prefix_nodes, rest, lo, cap)
        elif not exact_split(contains, item_schemas):
            ctx.note("not enforced", path, "maxContains", "items matching contains in another spelling than "
                     "its automaton reads (1.0 for an integer, \\u0061, keys in another order) are not counted")
    return ArrayNode(prefix_nodes, rest, lo, cap, cond, cmin, cmax)


def _unevaluated_applies(ctx: SchemaContext, schema: dict[str, Any], path: list[str], evaluated: bool,
                         everything: bool) -> bool:
    """Whether ``unevaluatedItems`` constrains the items after the prefix: no ``items``/``additionalItems``
    (nor ``contains: true``) evaluates them, and no keyword whose evaluation is not followed is present
    (then it is noted as not enforced)."""
    unevaluated = schema.get("unevaluatedItems", True)
    applies = unevaluated is not True and unevaluated != {} and not evaluated and not everything
    unseen = [k for k in UNSEEN_EVALUATORS if k in schema]
    if applies and unseen:
        ctx.note("not enforced", path, "unevaluatedItems", f"the items {', '.join(unseen)} evaluates are not "
                 "followed")
        return False
    return applies


def _item_nodes(ctx: SchemaContext, schema: dict[str, Any], prefix: list, rest: Any, rest_at: str | None,
                sub: list[str], refs: tuple[str, ...], at: str) -> tuple[list[Node], Node | None]:
    """(the nodes of the prefix items up to the first that admits no value, the node of the items after them
    or None): ``rest`` is compiled from its schema at ``rest_at`` unless that is None (a node already), and
    is None when a prefix item admits no value (the array stops before it)."""
    nodes = [ctx.value(p, sub, refs, f"{at}/{'prefixItems' if 'prefixItems' in schema else 'items'}/{i}")
             for i, p in enumerate(prefix)]
    if rest_at is not None:
        rest = ctx.value(rest, sub, refs, rest_at) if rest is not False else None
    usable = len(nodes)
    for i, n in enumerate(nodes):
        if n is None:
            usable = i
            break
    if usable < len(prefix):
        rest = None
    return nodes[:usable], rest


def _every_item_contains(lo: int, cap: int | None, cmin: int, cmax: int | None):
    """``contains: true``: the contains counts bound the item count. (lo, cap, 0, None), or None when no
    count is left."""
    lo = max(lo, cmin)
    cap = cmax if cap is None else min(cap, cmax) if cmax is not None else cap
    if cap is not None and cap < lo:
        return None
    return lo, cap, 0, None


def _contains_bounds(ctx: SchemaContext, path: list[str], cond: Node | None, lo: int, cap: int | None,
                     cmin: int, cmax: int | None):
    """The ``contains`` counts the array enforces: (lo, cap, cmin, cmax), or None when no array can hold
    ``cmin`` matches. No item can match (``cond`` None): no count; a ``maxContains`` of at least ``cap`` bounds
    nothing; counts past :data:`CONTAINS_BOUND` are noted (a ``minContains`` enforces that bound)."""
    if cond is None:
        if cmin > 0:
            return None
        cmin, cmax = 0, None
    if cap is not None:
        if cmin > cap:
            return None
        if cmax is not None and cmax >= cap:
            cmax = None
    if cmin > CONTAINS_BOUND:
        ctx.note("not enforced", path, "minContains", f"above {CONTAINS_BOUND}: {CONTAINS_BOUND} matches "
                 "enforced")
        cmin = CONTAINS_BOUND
    if cmax is not None and cmax > CONTAINS_BOUND:
        ctx.note("not enforced", path, "maxContains", f"above {CONTAINS_BOUND}")
        cmax = None
    return lo, cap, cmin, cmax


def _affordable(ctx: SchemaContext, path: list[str], prefix: list[Node], rest: Node | None, lo: int,
                cap: int | None, counted: int) -> tuple[int, int | None, int | None]:
    """(lo, cap, counter): where the compile uses counters and one is free (:mod:`..automata.counters`), the items
    more than :data:`~..automata.arrays.LOOP_COUNT` past the copied ones (the prefix and ``lo``) are counted by
    ``counter`` (without ``contains`` counts); else counter is None and the counts above MAX_COUNT are left
    to the check after generation (noted) when the copies of the ``rest`` item they need (times
    ``counted``, the ``contains`` counts) would pass :data:`COPY_STATES` states, :data:`COPY_WIDE` states of
    string contents or :data:`COPY_BYTES` bytes of the shortest such array. Counts up to MAX_COUNT are
    always enforced (the ``states`` compile limit stops those that are too large)."""
    big_hi, big_lo = cap is not None and cap > MAX_COUNT, lo > MAX_COUNT
    if rest is None or not (big_hi or big_lo):
        return lo, cap, None
    n_prefix = len(prefix)
    with limits.active(ctx.budget):
        item = rest.dfa()
    tail = max(n_prefix, lo)
    if counters.active() and cap is not None and counted == 1 and cap - tail > arrays.LOOP_COUNT and not big_lo:
        with limits.active(ctx.budget):  # the counters used inside the array, by any item: not this one
            used = np.logical_or.reduce([counters.markers_used(d.transitions) for d in [item] + [
                p.dfa() for p in prefix]])
        inside = frozenset(counters.MARKER_BYTES.index(b) // 2 for b in np.flatnonzero(used).tolist())
        key = ("items", structural_key(rest) or id(rest), tail, cap)
        counter = counters.try_counter(key, cap - tail, avoid=inside)
        if counter is not None:
            return lo, cap, counter
    states = item.num_states
    wide = int(((item.transitions >= 0).sum(axis=1) >= WIDE_BYTES).sum())
    length = (arrays.shortest(item) or 0) + 2
    copies = ((cap if cap is not None else max(n_prefix, lo) + 1) - n_prefix) * counted
    if copies * states <= COPY_STATES and copies * wide <= COPY_WIDE and copies * length <= COPY_BYTES:
        return lo, cap, None
    why = (f"{copies:,} copies of the item: about {copies * states:,} states, {copies * wide:,} of string "
           f"contents, {copies * length:,} bytes to tell the counts apart (enforced up to {COPY_STATES:,}, "
           f"{COPY_WIDE} and {COPY_BYTES:,})")
    if big_hi:
        ctx.note("not enforced", path, "maxItems", why)
        cap = None
    if big_lo:
        ctx.note("not enforced", path, "minItems", why)
        lo = 0
    return lo, cap, None


def _positions(ctx: SchemaContext, schema: dict[str, Any], path: list[str], at: str):
    """(prefix item schemas, rest item schema, the rest's place, whether every item is evaluated) from
    ``prefixItems``/``items`` or the draft 4-7 ``items`` list with ``additionalItems``."""
    items = schema.get("items", True)
    if "prefixItems" in schema:
        prefix = schema["prefixItems"]
        if not isinstance(prefix, list):
            raise ctx.error(path, "'prefixItems' must be a list")
        return list(prefix), items, f"{at}/items", "items" in schema
    if isinstance(items, list):  # draft 4-7 tuple form
        return items, schema.get("additionalItems", True), f"{at}/additionalItems", "additionalItems" in schema
    return [], items, f"{at}/items", "items" in schema


def _alt(parts: list[Node]) -> Node | None:
    """None for no parts, the part itself for one, else their :class:`~..automata.nodes.Alt`."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Alt(parts)


def _maybe_finite(node: Node) -> bool:
    """False when ``node``'s language is surely infinite (a repeating regex, a map, an unbounded array)."""
    if isinstance(node, Leaf):
        rx = node.regex
        return not ("*" in rx or "+" in rx or ",}" in rx)
    if isinstance(node, ArrayNode) and node.hi is None and node.rest is not None:
        return False
    return all(_maybe_finite(c) for c in node.children())


def finite_texts(ctx: SchemaContext, node: Node, limit: int) -> list[str] | None:
    """The texts of ``node``'s language when it is finite and holds at most ``limit`` texts, else None. Builds
    the automaton (counted against the compile budget) unless the language is surely infinite."""
    if not _maybe_finite(node):
        return None
    with limits.active(ctx.budget):
        texts = arrays.finite_texts(node.dfa(), limit)
    return None if texts is None else [t.decode("utf-8") for t in texts]


def _finite_tables(ctx: SchemaContext, positions: list[Node], limit: int) -> list[dict[int, list[str]]] | None:
    """Per position, its values (ids shared across positions, numbered in order of appearance) -> their
    texts; None when some position's language is infinite or has more than ``limit`` texts."""
    ids: dict[Any, int] = {}
    tables = []
    for node in positions:
        texts = finite_texts(ctx, node, limit)
        if texts is None:
            return None
        table: dict[int, list[str]] = {}
        for t in texts:
            v = ids.setdefault(arrays.text_key(t.encode("utf-8")), len(ids))
            table.setdefault(v, []).append(t)
        tables.append(table)
    return tables


def _matching(ctx: SchemaContext, contains: Any, texts: list[str]) -> list[str] | None:
    """The texts among ``texts`` whose values are valid for the ``contains`` schema (checked with jsonschema,
    with the root's definitions for ``$ref``); None when jsonschema cannot check that schema."""
    import json

    if isinstance(contains, bool):
        return list(texts) if contains else []
    root = ctx.root if isinstance(ctx.root, dict) else {}
    try:
        cls = jsonschema.validators.validator_for(root)
        validator = cls({**ctx.python_definitions(), **python_schema(contains)}, format_checker=cls.FORMAT_CHECKER)
        return [t for t in texts if validator.is_valid(json.loads(t))]
    except Exception:  # a reference or keyword jsonschema cannot evaluate here
        return None


def _distinct(ctx: SchemaContext, schema: dict[str, Any], path: list[str], prefix: list[Node],
              rest: Node | None, lo: int, cap: int | None, positions: list[Node], cmin: int,
              cmax: int | None) -> Node | None:
    """The node of distinct items when every position's language is a small finite set (see the module
    docstring); None (with a note) when uniqueItems is left to the check after generation."""
    tables = _finite_tables(ctx, positions, UNIQUE_VALUES * 4)
    values = set() if tables is None else {v for table in tables for v in table}
    if tables is None or max((len(t) for t in tables), default=0) > UNIQUE_VALUES:
        ctx.note("not enforced", path, "uniqueItems", f"the item language is infinite or has more than "
                 f"{UNIQUE_VALUES} values")
        return None
    k = len(values)
    top = k if cap is None else min(cap, k)
    sets = sum(comb(k, j) for j in range(top + 1))
    if sets > UNIQUE_SETS:
        ctx.note("not enforced", path, "uniqueItems", f"{k} distinct item values, up to {top} items: more than "
                 f"{UNIQUE_SETS:,} sets of values")
        return None
    # each set holds a trie of the values left: about the bytes of their texts
    size = max(sum(len(t.encode("utf-8")) for t in texts) for table in tables for texts in [
        [t for ts in table.values() for t in ts]])
    states = sum(comb(k, j) * size * (k - j) // max(k, 1) for j in range(top + 1))
    if states > COPY_STATES:
        ctx.note("not enforced", path, "uniqueItems", f"{k} distinct item values, up to {top} items: about "
                 f"{states:,} states (more than {COPY_STATES:,})")
        return None
    matching: frozenset[int] = frozenset()
    if cmin or cmax is not None:
        by_text = {t: v for table in tables for v, texts in table.items() for t in texts}
        hits = _matching(ctx, schema.get("contains"), list(by_text))
        if hits is None:
            ctx.note("not enforced", path, "uniqueItems", "the contains schema cannot be checked on the items")
            return None
        matching = frozenset(by_text[t] for t in hits)
    n_prefix = len(prefix)
    rest_table = tables[n_prefix] if len(tables) > n_prefix else None
    return DistinctArrayNode(tables[:n_prefix], rest_table, lo, cap, matching, cmin, cmax)


def _types(schema: Any) -> set[str] | None:
    """The JSON types ``schema`` can admit as its keywords say at the top (integer counted as number); None
    when any type may be."""
    if not isinstance(schema, dict):
        return None if schema else set()
    if "type" in schema:
        t = schema["type"]
        names = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else None
        return None if names is None else {"number" if n == "integer" else n for n in names}
    for key in ("const", "enum"):
        if key in schema:
            values = [schema[key]] if key == "const" else schema[key]
            if isinstance(values, list):
                return {_json_type(v) for v in values}
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


_INTEGER_KEYS = {"type", "const", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                 "multipleOf"}


def _integer_items(items: list[Any]) -> bool:
    """True when every schema of ``items`` asks for integers by its type (their texts: canonical integers,
    and ``-0``)."""
    for item in items:
        t = item.get("type") if isinstance(item, dict) else None
        if t != "integer" and t != ["integer"]:
            return False
    return True


def exact_split(contains: Any, items: list[Any]) -> bool:
    """True when the ``contains`` automaton accepts every text of the ``items`` schemas that is valid for
    ``contains`` (so items it rejects truly do not match): ``contains`` only asks for a scalar type whose
    automaton reads every spelling (string, number, boolean, null); or the items are integers and
    ``contains`` only asks for numbers by type, value or bounds that 0 does not meet (``-0`` is the one
    integer spelled otherwise); or no item can have a type it admits."""
    if isinstance(contains, bool):
        return True
    own = {k: v for k, v in contains.items() if k not in ANNOTATIONS}
    if set(own) == {"type"}:
        t = own["type"]
        names = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else {"?"}
        if names <= {"string", "number", "boolean", "null"}:
            return True
    if _integer_items(items) and set(own) <= _INTEGER_KEYS:
        # integer items are written canonically but for "-0": exact unless 0 may match
        try:
            return set(own) == {"type"} or not jsonschema.Draft202012Validator(own).is_valid(0)
        except Exception:
            return False
    ctypes = _types(own)
    if ctypes is None:
        return False
    for item in items:
        itypes = _types(item)
        if itypes is None or itypes & ctypes:
            return False
    return True
