"""The grammar node of a string schema: ``format`` (:mod:`..automata.formats`), ``pattern`` (:mod:`..automata.pattern`) and
``minLength``/``maxLength`` (:mod:`..automata.lengths`), each an automaton over the whole JSON string, intersected
(:class:`~..automata.leaves.Meet`) when several are present, so that all of them are enforced together.

Lengths count decoded code points (JSON Schema: the number of characters per RFC 8259, which counts a
surrogate-pair escape as one): a maximum more than 64 past the minimum is counted by a counter where the
compile uses counters (:mod:`..automata.counters`: one loop, at any size); otherwise, and for the minimum, each
count is a copy (:mod:`..automata.lengths`: about 20 states per character), enforced up to 64 always and up to 256
where the schema affords it (:mod:`..automata.long_counts`); a longer bound is noted and checked after generation.
A pattern the translation cannot express exactly, and a format the grammar does not know, are noted "not
enforced" and left to the check after generation.
"""

from __future__ import annotations

import hashlib
from typing import Any

import jsonschema

from ..automata import counters, long_counts
from .diagnostics import SchemaContext
from ..automata.formats import format_node
from ..automata.leaves import FastLeaf, Meet
from ..automata.lengths import cached_length_dfa, counted_length_dfa
from ..automata.lexical import COUNTED_CHAR, STRING, string_of
from ..automata.nodes import Leaf, Node
from ..automata.pattern import PatternError, pattern_dfa, pattern_piece, pattern_regex
from ..automata.syntax import repeat

#: JSON Schema's defined formats (draft 2020-12) that the grammar leaves to the check after generation.
KNOWN_FORMATS = frozenset({
    "idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "regex",
})


def _draft_formats(root: Any) -> frozenset[str]:
    """The formats the format checker of ``root``'s draft checks (2020-12's where it names none)."""
    cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator) \
        if isinstance(root, dict) else jsonschema.Draft202012Validator
    return frozenset(cls.FORMAT_CHECKER.checkers)


def length_node(lo: int, hi: int | None, counter: int | None = None) -> Node:
    """The node of the JSON strings of ``lo``..``hi`` decoded code points (``hi`` None: unbounded); with
    ``counter`` (:mod:`..automata.counters`), the ``hi - lo`` optional code points are counted by it, not copied."""
    regex = string_of(repeat(COUNTED_CHAR, lo, hi))
    if counter is None or hi is None:
        return FastLeaf(regex, lambda timings: cached_length_dfa(lo, hi))
    leaf = FastLeaf(regex, lambda timings: counted_length_dfa(lo, hi, counter))
    key = repr(("counted length", lo, hi, counter))
    leaf.__dict__["_key"] = hashlib.blake2b(key.encode(), digest_size=20).hexdigest()  # not the copies'
    return leaf


def pattern_node(pattern: str) -> Node:
    """The node of the JSON strings whose decoded value matches ``pattern`` (a search); long repeats are
    counted where the compile uses counters and one is free (:mod:`..automata.counters`). Raises PatternError when
    the pattern cannot be translated exactly (checked now, the automaton is built later)."""
    piece, counted = None, False
    if counters.active():
        try:
            piece, counted = pattern_piece(pattern, counted=True), True
        except counters.CounterClash:  # the counters are all taken: copies, as without them
            piece = None
    if piece is None:
        piece = pattern_piece(pattern)
    regex = pattern_regex(pattern, counted=counted)
    return FastLeaf(string_of(regex), lambda timings: pattern_dfa(pattern, timings, piece))


def _lengths(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> tuple[int, int | None]:
    """(minLength, maxLength) (0 and None when absent); an integral number such as 2.0 is a length. Raises
    SchemaError when either is not a non-negative integer."""
    raw = (schema.get("minLength", 0), schema.get("maxLength"))
    out = []
    for value in raw:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ctx.error(path, f"malformed minLength/maxLength ({raw[0]!r}, {raw[1]!r})")
        out.append(value)
    return out[0], out[1]


def string_node(ctx: SchemaContext, schema: dict[str, Any], path: list[str]) -> Node | None:
    """The node of a string schema (see the module docstring); compiled loosely, a ``format`` is a superset of
    its values (:data:`~..automata.formats.LOOSE_FORMATS`; any string where the schema's draft does not check
    it). None when the lengths admit no string. Raises SchemaError for a malformed length."""
    lo, hi = _lengths(ctx, schema, path)
    if hi is not None and hi < lo:
        return None
    parts: list[Node] = []
    fmt = schema.get("format")
    if fmt is not None and ctx.loose:  # a superset of the format's values, or none (any string)
        checked = isinstance(fmt, str) and fmt in _draft_formats(ctx.root)
        node = format_node(fmt, loose=True) if checked else None
        parts += [node] if node is not None else []
    elif fmt is not None:
        node = format_node(fmt) if isinstance(fmt, str) else None
        if node is not None:
            parts.append(node)
        elif fmt in KNOWN_FORMATS:
            ctx.note("not enforced", path, "format", f"format {fmt!r} is checked after generation")
        else:
            ctx.note("not enforced", path, "format", f"unknown format {fmt!r}")
    if "pattern" in schema:
        try:
            parts.append(pattern_node(schema["pattern"]))
        except PatternError as exc:
            ctx.note("not enforced", path, "pattern", str(exc))
    limit = long_counts.cap()
    if lo > limit:
        ctx.note("not enforced", path, "minLength", long_counts.why_not(lo))
        lo = 0
    counter = None
    if hi is not None and hi - lo > long_counts.SHORT_COUNT:
        counter = counters.try_counter(("length", lo, hi), hi - lo)
    if hi is not None and hi > limit and counter is None:
        ctx.note("not enforced", path, "maxLength", long_counts.why_not(hi))
        hi = None
    long_counts.use(max(lo, hi or 0) if counter is None else lo)
    if lo or hi is not None:
        parts.append(length_node(lo, hi, counter))
    if not parts:
        return Leaf(STRING)
    return parts[0] if len(parts) == 1 else Meet(parts)


