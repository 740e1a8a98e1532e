"""A catalog -> the regex and the byte-level DFA of one call ``{"name": "<fn>", "parameters": {...}}``.

Technique: per-function automata joined after the literal name. Each function's parameters automaton is
composed on its own (:mod:`.nodes`) and minimized; the call automaton is then the
literal ``{"name": `` followed by a trie of ``"<fn>", "parameters": `` prefixes, each leading into its
function's automaton, followed by ``}``. This never determinizes the whole-catalog regex, whose subset
construction dominates compile time for large catalogs; the whole regex is still built and recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ..core.catalog import Function
from . import dfa as dfa_mod
from .compose import structure
from .dfa import ByteDFA
from .nodes import Node
from .schema import Note, SchemaCompiler
from .syntax import call_regex


@dataclass
class Grammar:
    """The compiled grammar of a catalog: the whole-call ``regex`` (str), its minimal byte ``dfa`` and the
    ``notes`` of every function (what the grammar does not enforce, ignores, limits or unrolls)."""

    regex: str
    dfa: ByteDFA
    notes: list[Note]

    @property
    def not_enforced(self) -> list[Note]:
        """Notes of kind "not enforced": what is left to the check after generation."""
        return [n for n in self.notes if n.kind == "not enforced"]


def parameters_node(fn: Function, notes: list[Note] | None = None, max_recursion: int = 3) -> Node:
    """The grammar node of ``fn``'s parameters object (``.regex``: what the grammar accepts after
    ``"parameters": ``); raises SchemaError naming the function and parameter.

    What the grammar does not enforce is appended to ``notes``.
    """
    compiler = SchemaCompiler(fn.name, max_recursion=max_recursion)
    node = compiler.parameters(fn.parameters)
    if notes is not None:
        notes.extend(compiler.notes)
    return node


def compile_grammar(
    functions: list[Function],
    parameters_key: str = "parameters",
    timings: dict[str, float] | None = None,
    max_recursion: int = 3,
) -> Grammar:
    """Compile a catalog into its call regex and byte DFA.

    ``parameters_key`` is the key holding the arguments; ``max_recursion`` bounds how often one ``$ref`` is
    unrolled on a path. ``timings`` (if given) receives seconds spent in "automaton" (interegular on the
    leaf regexes), "byte expansion" (their UTF-8 byte DFAs) and "join" (composing objects, arrays and the
    call, and minimizing); leaves found in :data:`~.nodes.LEAF_CACHE` cost nothing. Raises SchemaError for
    an uncompilable schema.
    """
    timings = {} if timings is None else timings
    leaves = {"automaton": 0.0, "byte expansion": 0.0}
    t0 = time.perf_counter()
    notes: list[Note] = []
    nodes = {fn.name: parameters_node(fn, notes, max_recursion) for fn in functions}
    regexes = {name: node.regex for name, node in nodes.items()}
    parts: dict[str, ByteDFA] = {}
    key = json.dumps(parameters_key, ensure_ascii=False).encode("utf-8")
    alternatives = []
    for fn in functions:
        regex = regexes[fn.name]
        if regex not in parts:
            parts[regex] = nodes[fn.name].dfa(leaves)  # minimized once, with the whole call
        prefix = json.dumps(fn.name, ensure_ascii=False).encode("utf-8") + b", " + key + b": "
        alternatives.append((prefix, parts[regex]))
    # `{"name": ` then a trie of `"<fn>", "parameters": ` prefixes, each entering its function's automaton,
    # whose completion is followed by the closing `}`
    entry = [(prefix, i) for i, (prefix, _) in enumerate(alternatives)]
    items = [part for _, part in alternatives]
    call = structure(b'{"name": ', items, [[(b"}", None)]] * len(items), entry)
    call = dfa_mod.minimize(call)
    timings["automaton"] = leaves["automaton"]
    timings["byte expansion"] = leaves["byte expansion"]
    timings["join"] = time.perf_counter() - t0 - timings["automaton"] - timings["byte expansion"]
    regex = call_regex([(fn.name, regexes[fn.name]) for fn in functions], parameters_key)
    return Grammar(regex=regex, dfa=call, notes=notes)


def schema_dfa(schema: Any, max_recursion: int = 3, name: str = "schema") -> tuple[ByteDFA, list[Note]]:
    """The minimal byte DFA of the values of one JSON schema (a parameters schema or any other), with its
    notes. ``name`` names the schema in messages.

    Raises SchemaError when the schema cannot be compiled or admits no value.
    """
    compiler = SchemaCompiler(name, root=schema, max_recursion=max_recursion, label="schema")
    node = compiler.value(schema, [], ())
    if node is None:
        raise compiler.error([], "the schema admits no value (unsatisfiable)")
    return dfa_mod.minimize(node.dfa()), compiler.notes
