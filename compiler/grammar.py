"""A catalog -> the regex and the byte-level DFA of one call ``{"name": "<fn>", "parameters": {...}}``.

Technique: per-function automata joined after the literal name. Each function's parameters automaton is
composed on its own (:mod:`.automata.nodes`) and minimized; the call automaton is then the
literal ``{"name": `` followed by a trie of ``"<fn>", "parameters": `` prefixes, each leading into its
function's automaton, followed by ``}``. This never determinizes the whole-catalog regex, whose subset
construction dominates compile time for large catalogs; the whole regex is still built and recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.catalog import Function
from ..core.errors import SchemaError
from .automata import dfa as dfa_mod
from .automata import counters, long_counts
from .automata.compose import structure
from .automata.dfa import ByteDFA
from .limits import Budget, CompileLimits, active
from .automata.nodes import Node
from .schema.compiler import Note, SchemaCompiler
from .automata.syntax import call_regex


@dataclass
class Grammar:
    """The compiled grammar of a catalog: the whole-call ``regex`` (str), its minimal byte ``dfa`` and the
    ``notes`` of every function (what the grammar does not enforce, ignores, limits or unrolls).
    ``exact``: whether ``regex`` is a regex of exactly the automaton's language; False where some part of it
    is a description (an intersection, a difference, an automaton built directly, a structure that writes a
    long part once: :class:`~.automata.nodes.Node.regular`)."""

    regex: str
    dfa: ByteDFA
    notes: list[Note]
    exact: bool = True

    def transducer(self) -> counters.Transducer | None:
        """The automaton with its counter markers resolved (:func:`~.automata.counters.resolve`), or None when the
        grammar counts nothing with counters. Raises CounterClash where the markers are ambiguous."""
        return self.dfa.transducer()

    @property
    def not_enforced(self) -> list[Note]:
        """Notes of kind "not enforced": what is left to the check after generation."""
        return [n for n in self.notes if n.kind == "not enforced"]


def _resolved(grammar: Grammar) -> Grammar:
    """``grammar`` with its counter markers resolved (memoized on its automaton), so that markers that cannot
    be resolved raise CounterClash inside the attempt that built them, which builds the grammar again
    without counters (:func:`~.automata.long_counts.attempts`), instead of in a later ``accepts``: e.g.
    ``anyOf`` of a ``format: hostname`` string with ``maxLength: 66``, null, and a string-or-null with
    ``maxLength: 1`` ("a byte follows two different paths of counter markers"). :func:`~.compile.compile_index`
    resolves them inside its own attempt already; the memoized result is what it walks."""
    grammar.transducer()
    return grammar


def _compile_node(fn: Function, notes: list[Note] | None, max_recursion: int,
                  limits: CompileLimits | None) -> tuple[Node, Budget]:
    """``fn``'s parameters node and the budget its automaton is built against (see :func:`parameters_node`)."""
    compiler = SchemaCompiler(fn.name, max_recursion=max_recursion, limits=limits)
    node = compiler.parameters(fn.parameters)
    if notes is not None:
        notes.extend(compiler.notes)
    return node, compiler.budget


def parameters_node(fn: Function, notes: list[Note] | None = None, max_recursion: int = 3,
                    limits: CompileLimits | None = None) -> Node:
    """The grammar node of ``fn``'s parameters object (``.regex``: what the grammar accepts after
    ``"parameters": ``); raises SchemaError naming the function and parameter, CompileLimitError past one
    of ``limits`` (the defaults when None).

    What the grammar does not enforce is appended to ``notes``.
    """
    return _compile_node(fn, notes, max_recursion, limits)[0]


def compile_grammar(
    functions: list[Function],
    parameters_key: str = "parameters",
    timings: dict[str, float] | None = None,
    max_recursion: int = 3,
    limits: CompileLimits | None = None,
) -> Grammar:
    """Compile a catalog into its call regex and byte DFA.

    ``parameters_key`` is the key holding the arguments; ``max_recursion`` bounds how often one ``$ref`` is
    unrolled on a path; ``limits`` bound each function's work (:mod:`.limits`; the defaults when None).
    ``timings`` (if given) receives seconds spent in "automaton" (interegular on the leaf regexes), "byte
    expansion" (their UTF-8 byte DFAs) and "join" (composing objects, arrays and the call, and minimizing);
    leaves found in :data:`~.automata.nodes.LEAF_CACHE` cost nothing. Raises SchemaError for an uncompilable schema,
    CompileLimitError (a SchemaError) for one past a limit. The automata are built before the regexes,
    whose size grows like theirs, so a limit stops both.
    """
    if not long_counts.inside():  # one attempt (and one counter registry) for the whole catalog
        return long_counts.attempts(lambda: _resolved(compile_grammar(functions, parameters_key, timings,
                                                                      max_recursion, limits)))
    timings = {} if timings is None else timings
    leaves = {"automaton": 0.0, "byte expansion": 0.0}
    t0 = time.perf_counter()
    notes: list[Note] = []
    nodes: dict[str, Node] = {}
    parts: dict[str, ByteDFA] = {}  # functions with the same parameters schema share one automaton
    key = json.dumps(parameters_key, ensure_ascii=False).encode("utf-8")
    alternatives = []
    policies: dict[str, long_counts.Policy] = {}  # the policy each shared automaton was built under
    for fn in functions:
        same = json.dumps(fn.parameters, ensure_ascii=False)

        def build(fn: Function = fn, same: str = same) -> tuple[Node, list[Note], ByteDFA | None]:
            own: list[Note] = []
            node, budget = _compile_node(fn, own, max_recursion, limits)
            if same in parts:
                return node, own, None
            with active(budget):
                return node, own, node.dfa(leaves)  # minimized once, with the whole call

        if same in policies:  # a twin: its node and notes as the automaton it shares was built
            node, own, dfa = long_counts.under(policies[same], build)
        else:
            (node, own, dfa), policies[same] = long_counts.attempts_with_policy(build)
        nodes[fn.name] = node
        notes.extend(own)
        if dfa is not None:
            parts[same] = dfa
        prefix = json.dumps(fn.name, ensure_ascii=False).encode("utf-8") + b", " + key + b": "
        alternatives.append((prefix, parts[same]))
    # `{"name": ` then a trie of `"<fn>", "parameters": ` prefixes, each entering its function's automaton,
    # whose completion is followed by the closing `}`
    entry = [(prefix, i) for i, (prefix, _) in enumerate(alternatives)]
    items = [part for _, part in alternatives]
    call = structure(b'{"name": ', items, [[(b"}", None)]] * len(items), entry)
    call = with_counters(dfa_mod.minimize(call))
    timings["automaton"] = leaves["automaton"]
    timings["byte expansion"] = leaves["byte expansion"]
    timings["join"] = time.perf_counter() - t0 - timings["automaton"] - timings["byte expansion"]
    regex = call_regex([(fn.name, nodes[fn.name].regex) for fn in functions], parameters_key)
    return Grammar(regex=regex, dfa=call, notes=notes, exact=all(n.regular() for n in nodes.values()))


def with_counters(dfa: ByteDFA) -> ByteDFA:
    """``dfa`` with the bounds of the running attempt's counters attached (``dfa.counters``) when it reads
    counter markers (:mod:`.automata.counters`)."""
    reg = counters.registry()
    if reg is not None and counters.uses_markers(dfa.transitions):
        dfa.counters = tuple(reg.his)
    return dfa


def value_grammar(schema: Any, name: str = "schema", timings: dict[str, float] | None = None,
                  max_recursion: int = 3, limits: CompileLimits | None = None) -> Grammar:
    """The grammar of the values of one JSON schema (any root type): its regex, minimal byte DFA and notes,
    as :func:`compile_grammar` gives a catalog's calls (``timings`` as there). What the ``value`` form of an
    index compiles (a ``response_format`` schema). Raises SchemaError when the schema cannot be compiled or
    admits no value, CompileLimitError (a SchemaError) past a limit.
    """
    timings = {} if timings is None else timings
    leaves = {"automaton": 0.0, "byte expansion": 0.0}
    t0 = time.perf_counter()
    outermost = not long_counts.inside()

    def build() -> tuple[SchemaCompiler, Node, ByteDFA]:
        compiler = SchemaCompiler(name, root=schema, max_recursion=max_recursion, label="schema", limits=limits)
        node = compiler.whole(schema, "the schema admits no value (unsatisfiable)")
        with active(compiler.budget):
            dfa = with_counters(dfa_mod.minimize(node.dfa(leaves)))
        if outermost:  # as compile_grammar: markers resolved inside the attempt
            dfa.transducer()
        return compiler, node, dfa

    compiler, node, dfa = long_counts.attempts(build)
    timings["automaton"] = leaves["automaton"]
    timings["byte expansion"] = leaves["byte expansion"]
    timings["join"] = time.perf_counter() - t0 - timings["automaton"] - timings["byte expansion"]
    return Grammar(regex=node.regex, dfa=dfa, notes=compiler.notes, exact=node.regular())


def schema_dfa(schema: Any, max_recursion: int = 3, name: str = "schema",
               limits: CompileLimits | None = None, empty_ok: bool = False) -> tuple[ByteDFA, list[Note]]:
    """The minimal byte DFA of the values of one JSON schema (a parameters schema or any other), with its
    notes. ``name`` names the schema in messages; ``limits`` bound the work (the defaults when None).
    ``empty_ok``: a schema that admits no value gives an automaton that accepts nothing (one state, noted
    as "empty") instead of an error, for checking texts against it (``callmaybe match``).

    Raises SchemaError when the schema cannot be compiled or (unless ``empty_ok``) admits no value,
    CompileLimitError (a SchemaError) past a limit.
    """
    return long_counts.attempts(lambda: _schema_dfa(schema, max_recursion, name, limits, empty_ok))


def _schema_dfa(schema: Any, max_recursion: int, name: str, limits: CompileLimits | None,
                empty_ok: bool) -> tuple[ByteDFA, list[Note]]:
    compiler = SchemaCompiler(name, root=schema, max_recursion=max_recursion, label="schema", limits=limits)
    node = compiler.whole(schema, None if empty_ok else "the schema admits no value (unsatisfiable)")
    if node is not None:
        with active(compiler.budget):
            try:
                dfa = with_counters(dfa_mod.minimize(node.dfa()))
                dfa.transducer()  # an ambiguous counter is found inside the attempt, which then goes without
                return dfa, compiler.notes
            except dfa_mod.EmptyLanguage:
                if not empty_ok:
                    raise SchemaError(f"schema {name!r}: the schema admits no value (unsatisfiable)") from None
    compiler.note("empty", [], "schema", "admits no value: every text is rejected")
    return ByteDFA(np.full((1, 256), -1, dtype=np.int32), np.zeros(1, dtype=bool), 0), compiler.notes
