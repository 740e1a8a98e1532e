"""Compile, load and per-token-mask benchmark: callmaybe against outlines-core, xgrammar and llguidance.

One run builds the same workloads (the public catalog and the 30-function catalog) for the same
vocabularies (Qwen3, 151,936 wide; SmolLM2, 49,152 wide) with callmaybe and with every installed peer, and
prints one table and an agreement summary. Usage::

    python bench/compile_bench.py [--workload public|fn30|long|all] [--vocab qwen3|smollm2|all] [--repeat N]
    python bench/compile_bench.py --workload realistic [--engines callmaybe,xgrammar,llguidance] [--limit N]
        [--timeout S]     # formats and lengths: compile time, entries, size, peak memory (bench/realistic.py)

What is measured, per engine x vocabulary x workload (each in its own single-threaded subprocess):

* vocabulary preparation (s): ``load_vocabulary`` (shared by every engine: it gives the token bytes all
  engines are fed) plus the engine's own per-tokenizer structure: callmaybe's token trie, outlines-core's
  ``Vocabulary``, xgrammar's ``TokenizerInfo`` + ``GrammarCompiler``, llguidance's ``LLTokenizer``;
* compile (s): median of ``--repeat`` cold builds of the grammar for that vocabulary (wall clock; imports
  done before; callmaybe: ``compile_index``, its per-process cache of scalar automata cleared before each
  build; outlines-core: ``Index``; xgrammar: ``compile_regex`` with its cache off; llguidance:
  ``grammar_from`` + ``LLMatcher``, which defers most of its work to decoding);
* index size (bytes): what the engine serializes (callmaybe: the index file; outlines-core: the pickled
  ``Index``; xgrammar: ``CompiledGrammar.serialize_json``; llguidance: the grammar text);
* load (ms): from the serialized file to the first mask;
* mask per token, median and p99 (us): computing the mask of the current state plus advancing by the
  replayed token, over ``--repeat`` passes of every replayed call on one loaded index (the garbage
  collector is off meanwhile; the allowed sets compared below are recorded beforehand, untimed, on a
  second loaded copy, so the timed passes run undisturbed); "p99 warm": the passes after the first (callmaybe's mask is a view of the
  stored row, made on the row's first use, and its next state is memoized, so cold steps are in the first
  pass);
* apply (us): masking a float32 logits tensor of the vocabulary size with that mask, in each engine's own
  CPU way (callmaybe: ``TokenIndex.apply`` as its decoder does: short id rows scattered, others by adding
  the row's cached float bias; xgrammar: ``apply_token_bitmask_inplace``;
  llguidance: its numpy kernel; outlines-core ships only torch.compile/numba kernels, so an eager torch
  unpack of its bitmask is used);
* peak RSS (MB) of the subprocess (``os.wait4``), and its RSS after imports and vocabulary loading;
* peer / callmaybe ratios of the times (above 1: callmaybe is faster).

Every peer compiles callmaybe's regex of the whole call (``index.header["regex"]``; canonical layout, one
space after ``:`` and ``,``), so that the allowed-token sets must agree exactly. Should a peer refuse the
regex, or should the header say it is no exact regex (``regex_exact`` false: parts of it are descriptions),
it falls back to a JSON schema of the call (anyOf over the functions, name as const) and says so.

Agreement: at each replayed step the set of allowed regular token ids (ids with bytes; special tokens,
padding and EOS left out) of each peer is compared with callmaybe's; EOS and special-token handling are
reported apart.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED_BENCH = ROOT.parent / "shared" / "data" / "bench"

WORKLOADS = {
    "public": ROOT / "schemas" / "functions_definition.json",
    "fn30": SHARED_BENCH / "catalog_fn30.openai.json",
    # long counts (maxLength 255, pattern repeats {1,255}, maxItems 100 and 1,000): counters in callmaybe
    "long": ROOT / "bench" / "catalogs" / "long_counts.json",
}
#: A child (one engine x vocabulary x workload) is stopped after this many seconds, and may map at most this
#: many bytes (a peer expanding long counts into copies could take the machine's memory).
CHILD_SECONDS = 600
CHILD_BYTES = 12 * 1024**3


@dataclass(frozen=True)
class VocabSpec:
    """A vocabulary: ``spec`` for ``load_vocabulary`` and the cached model whose tokenizer.json tokenizes."""

    spec: str
    tokenizer_model: str


VOCABS = {
    "qwen3": VocabSpec("Qwen/Qwen3-0.6B", "qwen2.5-coder-1.5b-instruct"),  # same ids for regular tokens; the default model
    "smollm2": VocabSpec("smollm2-135m-instruct", "smollm2-135m-instruct"),
}

#: engine name -> (import name, distribution name)
ENGINES = {
    "callmaybe": ("callmaybe", "callmaybe"),
    "outlines-core": ("outlines_core", "outlines-core"),
    "xgrammar": ("xgrammar", "xgrammar"),
    "llguidance": ("llguidance", "llguidance"),
}

SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "RAYON_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


# ----------------------------------------------------------------------------------------------------------
# Replayed calls (canonical layout: json.dumps' default ", " and ": ")
# ----------------------------------------------------------------------------------------------------------


def _call(function: str, **parameters) -> str:
    return json.dumps({"name": function, "parameters": parameters}, ensure_ascii=False)


PUBLIC_CALLS = [
    ("add", _call("fn_add_numbers", a=2, b=3)),
    ("greet", _call("fn_greet", name="Alice")),
    ("regex-escapes", '{"name": "fn_substitute_string_with_regex", "parameters": {"source_string": '
                      '"Say \\"hi\\"\\n\\ttwice\\\\", "regex": "\\\\d+(\\\\.\\\\d+)?", "replacement": '
                      '"N\\u0001 / caf\u00e9"}}'),  # strings as json.dumps writes them: a control escaped
    ("sqrt-exponent", '{"name": "fn_get_square_root", "parameters": {"a": -12.5e-3}}'),
    ("reverse-unicode", _call("fn_reverse_string", s="日本語 😀 naïve")),
]

FN30_CALLS = PUBLIC_CALLS + [
    ("create_event", _call("create_event", title="Standup", start="2025-03-04T09:00", duration_min=15,
                           attendees=["ana@example.com", "Bo"], location={"city": "Paris", "room": "B2"},
                           all_day=False)),
    ("send_email", _call("send_email", to="x@y.z", subject="Re: \"plan\"", body="Line 1\nLine 2",
                         cc=["a@b.c"], urgent=True)),
    ("convert_currency", _call("convert_currency", amount=1234.56, from_currency="EUR", to_currency="JPY")),
    ("create_user", _call("create_user", username="zoë", email="z@e.io", age=31, roles=["admin", "viewer"],
                          profile={"first_name": "Zoë", "last_name": "Ng"})),
    ("query_database", _call("query_database", table="orders", columns=["id", "total"], limit=10,
                             filter={"field": "total", "op": "<=", "value": "100"})),
    ("order_food", _call("order_food", restaurant="Chez Marcel",
                         items=[{"name": "crêpe", "quantity": 2}, {"name": "cidre", "quantity": 1}],
                         delivery=False)),
    ("compute_statistics", '{"name": "compute_statistics", "parameters": {"values": [1, 2.5, -3E+2, 0.001], '
                           '"metrics": ["mean", "std"]}}'),
    ("translate_text", _call("translate_text", text="Ça va? Grüße — 你好 🙂", target_language="ja",
                             formal=True)),
    ("get_weather-optional", _call("get_weather", city="Oslo")),
    ("list_files-backslash", _call("list_files", path="C:\\Users\\me", recursive=True, pattern="*.py")),
]

LONG_CALLS = [  # every parameter of a catalog in this format is required
    ("short", _call("tag_devices", attribute="rack-7", tags=[], ids=[])),
    ("tags", _call("tag_devices", attribute="a" * 40, tags=[{"key": "room", "value": "B2 \"north\""},
                                                                {"key": "owner", "value": "Zoë"}],
                   ids=["abcdef0123456789ABCDEF01"])),
    ("long-value", _call("tag_devices", attribute="x" * 255, tags=[{"key": "k" * 255, "value": "v" * 255}],
                         ids=["0123456789abcdefABCDEF01"] * 3)),
]

CALLS = {"public": PUBLIC_CALLS, "fn30": FN30_CALLS, "long": LONG_CALLS}


# ----------------------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------------------


def version_of(engine: str) -> str | None:
    """Installed version of ``engine``'s distribution, or None when it cannot be imported."""
    module, dist = ENGINES[engine]
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


NO_EXACT_REGEX = "callmaybe's regex of this catalog holds descriptions (header regex_exact false)"


def _exact(regex: str | None) -> str:
    """``regex``, or ValueError when callmaybe's header regex is not an exact regex (``regex_exact`` false):
    the peer then compiles the call's JSON schema."""
    if regex is None:
        raise ValueError(NO_EXACT_REGEX)
    return regex


def tokenizer_json(vocab: str) -> Path | None:
    """The cached tokenizer.json used to tokenize the replayed calls (and by llguidance): the one of any
    converted checkpoint of the vocabulary's registry model (``hf``, ``hf-int8-v3`` ...), or, where none is
    there yet, of the model converted now (callmaybe's own loader: the pinned GGUF, once); None for Qwen's
    vocabulary when no checkpoint is converted (its tokenizer is rebuilt from the pinned ranks instead:
    :func:`qwen_lltokenizer`, no model fetched)."""
    from callmaybe.core.files import cache_dir

    name = VOCABS[vocab].tokenizer_model
    found = sorted(cache_dir("models", name).glob("hf*/tokenizer.json"))
    if found:
        return found[0]
    if vocab == "qwen3":
        return None
    from callmaybe.runtime.model.load import resolve_model_dir

    return resolve_model_dir(name) / "tokenizer.json"


def qwen_lltokenizer(vocabulary):
    """llguidance's tokenizer for Qwen, from the pinned ``qwen.tiktoken`` ranks callmaybe reads and Qwen2's
    pre-tokenizer pattern (see ``bench/realistic.py``)."""
    import llguidance

    from callmaybe.core import registry
    from callmaybe.core.vocabulary.tiktoken import read_tiktoken
    from realistic import QWEN_PATTERN, QWEN_SPECIAL  # bench/ is on sys.path

    ranks = read_tiktoken(Path(registry.extract_member(registry.QWEN_TIKTOKEN)))
    return llguidance.LLTokenizer.from_tiktoken(encoder={b: i for i, b in enumerate(ranks)},
                                                special_tokens=QWEN_SPECIAL, pattern=QWEN_PATTERN,
                                                eos_token=list(vocabulary.eos_ids), n_vocab=vocabulary.vocab_size)


def tokenize_calls(vocab: str, token_bytes, workload: str, vocabulary=None) -> list[dict]:
    """The replayed calls of ``workload`` as token ids; checks that the ids spell the text exactly."""
    path = tokenizer_json(vocab)
    if path is not None:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        encode = lambda text: tok.encode(text, add_special_tokens=False).ids  # noqa: E731
    else:
        lltok = qwen_lltokenizer(vocabulary)
        encode = lambda text: lltok.tokenize_str(text)  # noqa: E731
    out = []
    for label, text in CALLS[workload]:
        json.loads(text)  # every replayed call is valid JSON
        ids = encode(text)
        spelled = b"".join(token_bytes[i] or b"<?>" for i in ids)
        if spelled != text.encode("utf-8"):
            raise SystemExit(f"{vocab}: tokens of {label!r} do not spell the text ({spelled!r})")
        out.append({"label": label, "text": text, "ids": ids})
    return out


def call_schema(functions) -> dict:
    """JSON schema of one call (anyOf over the functions, name as const); the peers' fallback grammar."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"const": fn.name}, "parameters": fn.parameters},
                "required": ["name", "parameters"],
                "additionalProperties": False,
            }
            for fn in functions
        ]
    }


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100, nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(np.ceil(q / 100 * len(ordered))) - 1))
    return ordered[k]


def bits_of_bitmask(bitmask, vocab_size: int) -> np.ndarray:
    """Bool array (vocab_size,) of an int32 bitmask (bit j of word k = token 32k+j), as the peers fill it."""
    raw = np.ascontiguousarray(bitmask.numpy() if hasattr(bitmask, "numpy") else bitmask).reshape(-1)
    return np.unpackbits(raw.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


# ----------------------------------------------------------------------------------------------------------
# Engines (used inside the child process). Each: prepare -> compile -> save -> load -> sessions.
# ----------------------------------------------------------------------------------------------------------


class CallmaybeEngine:
    """callmaybe: index compiled ahead of time; a step is a cached row lookup plus a memoized DFA walk."""

    grammar = "callmaybe catalog"
    modules = ("callmaybe.compiler.compile", "callmaybe.compiler.automata.nodes", "callmaybe.core.indexfile",
               "callmaybe.runtime.decoding.masks", "callmaybe.runtime.decoding.index",
               "callmaybe.runtime.decoding.matcher", "interegular")

    @staticmethod
    def clear_caches() -> None:
        """Forget the per-process caches of scalar and minimal automata, so that every build is a cold build."""
        from callmaybe.compiler.automata.dfa import MINIMAL_CACHE
        from callmaybe.compiler.automata.nodes import LEAF_CACHE

        LEAF_CACHE.clear()
        MINIMAL_CACHE.clear()

    def prepare(self, vocabulary, tokenizer_path: Path):
        from callmaybe.compiler.compile import token_trie

        token_trie(vocabulary)
        self.vocabulary = vocabulary
        self.phases: dict[str, float] = {}

    def compile(self, functions, regex, schema):
        from callmaybe.compiler.compile import compile_index

        index, report = compile_index(functions, self.vocabulary)
        self.phases = dict(report.timings)
        self.phases["compile_seconds"] = report.compile_seconds
        return index

    def save(self, built, path: Path) -> int | None:
        from callmaybe.core.indexfile import save_index

        return save_index(path, built)

    def load(self, path: Path, built):
        from callmaybe.core.indexfile import read_index_for
        from callmaybe.runtime.decoding.index import open_index

        return open_index(read_index_for(path), self.vocabulary.token_bytes)

    def session(self, loaded) -> "CallmaybeSession":
        return CallmaybeSession(loaded)

    def apply(self, logits, snapshot) -> None:
        """As runtime/decoding/decoder.py does: ``TokenIndex.apply_mask`` of the matcher's mask (a short id row scatters
        the allowed logits into a -inf tensor; a longer row adds its cached 0/-inf float bias, built on the
        untimed first call)."""
        index, mask = snapshot
        index.apply_mask(mask, logits)


class CallmaybeSession:
    """One call decoded under a callmaybe TokenIndex, as the runtime decodes it: a :class:`Matcher` (no budget,
    as the peers have none), and the Mask of the last fill (a view of the stored row: sorted ids or packed bits,
    plus EOS when accepting)."""

    def __init__(self, index):
        from callmaybe.runtime.decoding.matcher import Matcher, TokenNotAllowed

        self.matcher, self.m, self.refused = Matcher(index), None, TokenNotAllowed

    def fill(self) -> None:
        self.m = self.matcher.mask()

    def advance(self, token: int) -> bool:
        try:
            self.matcher.advance(token)
        except self.refused:
            return False
        return True

    def bits(self, vocab_size: int) -> np.ndarray:
        return self.m.tensor().numpy()[:vocab_size].copy()

    def snapshot(self):
        return (self.matcher.index, self.m)


class BitmaskSession:
    """A peer session that fills an int32 bitmask of ceil(vocab_size/32) words."""

    def __init__(self, fill, advance, vocab_size: int):
        import torch

        self.bitmask = torch.zeros((1, (vocab_size + 31) // 32), dtype=torch.int32)
        self._fill, self._advance = fill, advance

    def fill(self) -> None:
        self._fill(self.bitmask)

    def advance(self, token: int) -> bool:
        try:
            return bool(self._advance(token))
        except Exception:  # outlines-core raises on a token it does not allow
            return False

    def bits(self, vocab_size: int) -> np.ndarray:
        return bits_of_bitmask(self.bitmask, vocab_size)

    def snapshot(self):
        return self.bitmask.clone()


class OutlinesCoreEngine:
    """outlines-core: brute-force Index over the regex (one EOS id), Guide for decoding."""

    modules = ("outlines_core", "outlines_core.json_schema")

    def prepare(self, vocabulary, tokenizer_path: Path):
        import outlines_core

        by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(vocabulary.token_bytes):
            if b is not None:
                by_bytes.setdefault(b, []).append(i)
        self.vocab_size = vocabulary.vocab_size
        self.vocab = outlines_core.Vocabulary(vocabulary.eos_ids[0], by_bytes)

    def compile(self, functions, regex, schema):
        import outlines_core

        try:
            self.grammar = "regex"
            return outlines_core.Index(_exact(regex), self.vocab)
        except Exception as exc:  # fall back to outlines' own regex of the call's schema
            from outlines_core.json_schema import build_regex_from_schema

            self.grammar = f"json schema via build_regex_from_schema (regex refused: {exc})"
            return outlines_core.Index(build_regex_from_schema(json.dumps(schema), whitespace_pattern=" ?"),
                                       self.vocab)

    def save(self, built, path: Path) -> int | None:
        path.write_bytes(pickle.dumps(built))
        return path.stat().st_size

    def load(self, path: Path, built):
        return pickle.loads(path.read_bytes())

    def session(self, loaded) -> BitmaskSession:
        import outlines_core

        guide = outlines_core.Guide(loaded)
        return BitmaskSession(
            lambda bm: guide.write_mask_into(bm.data_ptr(), bm.numel(), bm.element_size()),
            lambda tok: guide.advance(tok, return_tokens=False) or True,
            self.vocab_size,
        )

    def apply(self, logits, snapshot) -> None:
        apply_bitmask_eager(logits, snapshot)


def apply_bitmask_eager(logits, bitmask) -> None:
    """In-place -inf on (1, vocab_size) float logits where the int32 bitmask bit is 0 (eager torch)."""
    import torch

    shifts = torch.arange(32, dtype=torch.int32)
    bits = ((bitmask.unsqueeze(-1) >> shifts) & 1).view(1, -1)[:, : logits.shape[1]]
    logits.masked_fill_(bits == 0, float("-inf"))


class XGrammarEngine:
    """xgrammar: adaptive token mask cache compiled from the regex; GrammarMatcher for decoding."""

    modules = ("xgrammar",)

    def prepare(self, vocabulary, tokenizer_path: Path):
        import xgrammar as xgr

        encoded = [b if b is not None else b"" for b in vocabulary.token_bytes]  # "" marks special tokens
        self.info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=vocabulary.vocab_size,
                                      stop_token_ids=list(vocabulary.eos_ids))
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.vocab_size = vocabulary.vocab_size

    def compile(self, functions, regex, schema):
        try:
            self.grammar = "regex"
            return self.compiler.compile_regex(_exact(regex))
        except Exception as exc:
            self.grammar = f"json schema (regex refused: {exc})"
            return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                     separators=(", ", ": "), strict_mode=True)

    def save(self, built, path: Path) -> int | None:
        path.write_text(built.serialize_json())
        return path.stat().st_size

    def load(self, path: Path, built):
        import xgrammar as xgr

        return xgr.CompiledGrammar.deserialize_json(path.read_text(), self.info)

    def session(self, loaded) -> BitmaskSession:
        import xgrammar as xgr

        matcher = xgr.GrammarMatcher(loaded)
        return BitmaskSession(matcher.fill_next_token_bitmask, matcher.accept_token, self.vocab_size)

    def apply(self, logits, snapshot) -> None:
        import xgrammar as xgr

        xgr.apply_token_bitmask_inplace(logits, snapshot)


class LLGuidanceEngine:
    """llguidance: token trie walked at decode time; a fresh LLMatcher per call (as servers do)."""

    modules = ("llguidance", "llguidance.numpy")

    def prepare(self, vocabulary, tokenizer_path: Path):
        import llguidance

        if tokenizer_path is None:  # Qwen without a converted checkpoint: from the ranks
            self.tok = qwen_lltokenizer(vocabulary)
            self.vocab_size, self.vocabulary = vocabulary.vocab_size, vocabulary
            return
        self.tok = llguidance.LLTokenizer(tokenizer_path.read_text(), n_vocab=vocabulary.vocab_size,
                                          eos_token=list(vocabulary.eos_ids))
        self.vocab_size = vocabulary.vocab_size
        self.vocabulary = vocabulary

    def vocabulary_note(self) -> str:
        """How llguidance's token bytes (from tokenizer.json) differ from callmaybe's (untimed check)."""
        differ = [i for i, b in enumerate(self.vocabulary.token_bytes)
                  if b is not None and self.tok.decode_bytes([i]) != b]
        if not differ:
            return "llguidance token bytes = callmaybe's for every regular token"
        shown = ", ".join(f"{i} {self.vocabulary.token_bytes[i]!r}" for i in differ[:5])
        return f"llguidance token bytes differ from callmaybe's for {len(differ)} regular token(s): {shown}"

    def compile(self, functions, regex, schema):
        import llguidance

        self.grammar = "regex"
        why = NO_EXACT_REGEX
        if regex is not None:
            grammar = llguidance.grammar_from("regex", regex)
            matcher = llguidance.LLMatcher(self.tok, grammar)
            if not matcher.is_error():
                return grammar
            why = matcher.get_error()
        self.grammar = f"json schema (regex refused: {why})"
        schema = dict(schema, **{"x-guidance": {"item_separator": ", ", "key_separator": ": ",
                                                "whitespace_flexible": False}})
        grammar = llguidance.grammar_from("json_schema", json.dumps(schema))
        matcher = llguidance.LLMatcher(self.tok, grammar)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return grammar

    def save(self, built, path: Path) -> int | None:
        path.write_text(built)
        return path.stat().st_size

    def load(self, path: Path, built):
        return path.read_text()

    def session(self, loaded) -> BitmaskSession:
        import llguidance

        matcher = llguidance.LLMatcher(self.tok, loaded)
        return BitmaskSession(
            lambda bm: matcher.unsafe_compute_mask_ptr(bm.data_ptr(), bm.numel() * bm.element_size()),
            matcher.consume_token,
            self.vocab_size,
        )

    def apply(self, logits, snapshot) -> None:
        from llguidance.numpy import apply_token_bitmask_inplace

        apply_token_bitmask_inplace(logits.numpy(), snapshot.numpy())


ENGINE_CLASSES = {
    "callmaybe": CallmaybeEngine,
    "outlines-core": OutlinesCoreEngine,
    "xgrammar": XGrammarEngine,
    "llguidance": LLGuidanceEngine,
}


# ----------------------------------------------------------------------------------------------------------
# Child process: one engine x vocabulary x workload
# ----------------------------------------------------------------------------------------------------------


def _rss_mb() -> float:
    """Peak RSS of this process so far, MB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(spec: dict) -> dict:
    """Measure one engine; writes the first pass's masks to ``spec["masks"]``; returns the measurements."""
    import torch

    torch.set_num_threads(1)
    from callmaybe.core.catalog import load_catalog
    from callmaybe.core.vocabulary import load_vocabulary

    engine = ENGINE_CLASSES[spec["engine"]]()
    for module in engine.modules:  # imports are not part of any timing
        importlib.import_module(module)
    functions = load_catalog(spec["catalog"])
    out: dict = {}

    t0 = time.perf_counter()
    vocabulary = load_vocabulary(spec["vocab_spec"])
    engine.prepare(vocabulary, Path(spec["tokenizer_json"]) if spec["tokenizer_json"] else None)
    out["vocab_prep_s"] = time.perf_counter() - t0
    out["rss_base_mb"] = _rss_mb()
    if hasattr(engine, "vocabulary_note"):
        out["vocabulary_note"] = engine.vocabulary_note()

    built, times = None, []
    for _ in range(spec["repeat"]):
        built = None
        if hasattr(engine, "clear_caches"):
            engine.clear_caches()
        gc.collect()
        t = time.perf_counter()
        built = engine.compile(functions, spec["regex"], call_schema(functions))
        times.append(time.perf_counter() - t)
    out["compile_s"] = statistics.median(times)
    out["compile_runs_s"] = times
    out["grammar"] = engine.grammar
    if spec["engine"] == "callmaybe":
        out["regex"] = built.header["regex"]
        out["regex_exact"] = built.header.get("regex_exact", True)
        out["phases"] = engine.phases

    path = Path(spec["workdir"]) / f"index.{spec['engine']}"
    out["size_bytes"] = engine.save(built, path)

    gc.collect()
    t = time.perf_counter()
    loaded = engine.load(path, built)
    engine.session(loaded).fill()
    out["load_ms"] = (time.perf_counter() - t) * 1000

    recorder = engine.load(path, built)
    out.update(replay(engine, loaded, spec["calls"], vocabulary.vocab_size, spec["repeat"], spec["masks"], recorder))
    return out


def replay(engine, loaded, calls: list[dict], vocab_size: int, passes: int, masks_path: str, recorder=None) -> dict:
    """Replay every call ``passes`` times: per token, mask + advance (timed, ns); then time mask application.

    Each step's allowed tokens and each final state's mask are recorded first, in an untimed pass over
    ``recorder`` (a second loaded copy of the index; ``loaded`` itself if None), and saved to ``masks_path``
    (npz, one (steps+1, vocab_size/8) packed array per call). Recording apart keeps its full-width work from
    disturbing the timed passes, the first of which is still the first visit of every state of ``loaded``.
    """
    import torch

    steps_us: list[float] = []
    warm_us: list[float] = []  # passes after the first
    slowest = (0.0, "", 0, 0)  # (us, call, step, pass)
    rejected: list[dict] = []
    recorded: dict[str, np.ndarray] = {}
    snapshots = []
    for ci, call in enumerate(calls):  # the untimed recording pass
        session = engine.session(recorder if recorder is not None else loaded)
        rows = []
        for step, token in enumerate(call["ids"]):
            session.fill()
            rows.append(np.packbits(session.bits(vocab_size), bitorder="little"))
            snapshots.append(session.snapshot())
            if not session.advance(token):
                rejected.append({"call": call["label"], "step": step, "token": token})
                break
        else:  # the final state: EOS only, if the call is complete
            session.fill()
            rows.append(np.packbits(session.bits(vocab_size), bitorder="little"))
        recorded[f"c{ci}"] = np.stack(rows) if rows else np.zeros((0, (vocab_size + 7) // 8), np.uint8)
    np.savez(masks_path, **recorded)
    gc.collect()
    gc.disable()
    try:
        for p in range(passes):
            for call in calls:
                session = engine.session(loaded)
                for step, token in enumerate(call["ids"]):
                    t0 = time.perf_counter_ns()
                    session.fill()
                    ok = session.advance(token)
                    us = (time.perf_counter_ns() - t0) / 1000
                    steps_us.append(us)
                    if p:
                        warm_us.append(us)
                    if us > slowest[0]:
                        slowest = (us, call["label"], step, p)
                    if not ok:
                        break
    finally:
        gc.enable()

    logits = torch.randn((1, vocab_size), dtype=torch.float32)
    flat = logits[0]
    apply_us = []
    for snap in snapshots:
        target = flat if isinstance(engine, CallmaybeEngine) else logits
        if isinstance(engine, CallmaybeEngine):
            engine.apply(target.clone(), snap)  # build the row's bias outside the timing, as the runtime caches it
        t = time.perf_counter_ns()
        engine.apply(target, snap)
        apply_us.append((time.perf_counter_ns() - t) / 1000)
    return {
        "steps": len(steps_us) // max(passes, 1),
        "mask_med_us": statistics.median(steps_us) if steps_us else None,
        "mask_p99_us": percentile(steps_us, 99) if steps_us else None,
        "mask_p99_warm_us": percentile(warm_us, 99) if warm_us else None,
        "slowest_step": {"us": slowest[0], "call": slowest[1], "step": slowest[2], "pass": slowest[3]},
        "apply_us": statistics.median(apply_us) if apply_us else None,
        "rejected": rejected,
    }


def child_main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    try:
        result = {"status": "ok", **child(spec)}
    except ImportError as exc:
        result = {"status": f"skipped ({exc})"}
    except Exception as exc:  # reported in the table, not fatal to the run
        import traceback

        traceback.print_exc()
        result = {"status": f"error: {type(exc).__name__}: {exc}"}
    Path(spec["result"]).write_text(json.dumps(result))


# ----------------------------------------------------------------------------------------------------------
# Parent: run the children, compare the masks, build the rows
# ----------------------------------------------------------------------------------------------------------


def run_child(spec: dict, workdir: Path) -> dict:
    """Run one measurement subprocess; adds its peak RSS (MB, from os.wait4) and wall time (s)."""
    spec_path = workdir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, **SINGLE_THREAD_ENV)
    t = time.perf_counter()
    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_BYTES, CHILD_BYTES))

    with open(workdir / "child.log", "w") as log:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)],
                                env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=cap_memory)
        timer = threading.Timer(CHILD_SECONDS, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    result_path = Path(spec["result"])
    if not result_path.exists() and wall >= CHILD_SECONDS:
        return {"status": f"timeout: stopped after {CHILD_SECONDS} s", "wall_s": wall}
    if not result_path.exists():
        tail = (workdir / "child.log").read_text()[-400:]
        return {"status": f"error: exit {proc.returncode}: {tail.strip()}", "wall_s": wall}
    result = json.loads(result_path.read_text())
    result["rss_peak_mb"] = usage.ru_maxrss / 1024
    result["wall_s"] = wall
    return result


def measure(engine: str, vocab: str, workload: str, regex: str | None, calls: list[dict], repeat: int,
            tmp: Path) -> dict:
    """One row: the measurements of ``engine`` (or its skip reason), with the path of its recorded masks."""
    row = {"engine": engine, "version": version_of(engine), "vocab": vocab, "workload": workload}
    if row["version"] is None:
        return dict(row, status="skipped (not importable)")
    workdir = tmp / f"{engine}-{vocab}-{workload}"
    workdir.mkdir()
    spec = {
        "engine": engine, "vocab_spec": VOCABS[vocab].spec,
        "tokenizer_json": str(tokenizer_json(vocab)) if tokenizer_json(vocab) else None,
        "catalog": str(WORKLOADS[workload]), "regex": regex, "calls": calls, "repeat": repeat,
        "workdir": str(workdir), "result": str(workdir / "result.json"), "masks": str(workdir / "masks.npz"),
    }
    print(f"  {engine:<13} {vocab:<8} {workload:<6} ...", end="", file=sys.stderr, flush=True)
    row.update(run_child(spec, workdir))
    row["masks"] = spec["masks"]
    print(f" {row['status']} ({row['wall_s']:.1f} s)", file=sys.stderr, flush=True)
    return row


RATIO_KEYS = {"compile_s": "x_compile", "load_ms": "x_load", "mask_med_us": "x_mask_med",
              "mask_p99_us": "x_mask_p99", "mask_p99_warm_us": "x_p99_warm", "apply_us": "x_apply",
              "size_bytes": "x_size"}


def add_ratios(rows: list[dict]) -> None:
    """Peer value / callmaybe value for times and size, per vocabulary x workload (callmaybe rows: 1.0)."""
    base = {(r["vocab"], r["workload"]): r for r in rows if r["engine"] == "callmaybe" and r["status"] == "ok"}
    for r in rows:
        b = base.get((r["vocab"], r["workload"]))
        for key, name in RATIO_KEYS.items():
            if b and r.get("status") == "ok" and r.get(key) and b.get(key):
                r[name] = r[key] / b[key]


def run(workloads: list[str], vocabs: list[str], repeat: int) -> list[dict]:
    """Measure every engine on every vocabulary x workload; returns one dict per row of the table.

    Peer rows carry ``agreement`` (see :func:`compare_masks`). Times: seconds (``*_s``), milliseconds
    (``*_ms``), microseconds (``*_us``); sizes in bytes; RSS in MB; ``x_*``: peer / callmaybe.
    """
    from callmaybe.core.vocabulary import load_vocabulary

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="compile_bench-") as tmpname:
        tmp = Path(tmpname)
        for vocab in vocabs:
            vocabulary = load_vocabulary(VOCABS[vocab].spec)
            for workload in workloads:
                calls = tokenize_calls(vocab, vocabulary.token_bytes, workload, vocabulary)
                ours = measure("callmaybe", vocab, workload, None, calls, repeat, tmp)
                rows.append(ours)
                if ours["status"] != "ok":
                    continue
                for engine in ENGINES:
                    if engine == "callmaybe":
                        continue
                    exact = ours["regex"] if ours.get("regex_exact", True) else None  # else: the JSON schema
                    row = measure(engine, vocab, workload, exact, calls, repeat, tmp)
                    if row["status"] == "ok":
                        row["agreement"] = compare_masks(ours, row, calls, vocabulary)
                    rows.append(row)
        for r in rows:
            r.pop("masks", None)
    add_ratios(rows)
    return rows


# ----------------------------------------------------------------------------------------------------------
# Agreement
# ----------------------------------------------------------------------------------------------------------


def compare_masks(ours: dict, theirs: dict, calls: list[dict], vocabulary, show: int = 10) -> dict:
    """Compare the allowed regular tokens of callmaybe and a peer at every replayed step.

    Returns counts per kind (``equal``; ``peer_forced``: the peer allows one token only, as llguidance does
    for the canonical tokenization of forced text; ``peer_subset``: the peer allows fewer otherwise;
    ``peer_superset``; ``crossed``), up to ``show`` examples per kind (2 for ``peer_forced``), and EOS /
    special-token handling.
    """
    vocab_size = vocabulary.vocab_size
    regular = np.zeros(vocab_size, dtype=bool)
    regular[[i for i, b in enumerate(vocabulary.token_bytes) if b is not None]] = True
    eos = np.zeros(vocab_size, dtype=bool)
    eos[list(vocabulary.eos_ids)] = True
    other = ~regular & ~eos
    a_all, b_all = np.load(ours["masks"]), np.load(theirs["masks"])
    counts = {"equal": 0, "peer_forced": 0, "peer_subset": 0, "peer_superset": 0, "crossed": 0}
    limits = {"peer_forced": min(show, 2)}
    examples: dict[str, list] = {k: [] for k in counts if k != "equal"}
    eos_steps = {"callmaybe": [], "peer": []}
    special = {"steps": 0, "ids": set(), "first": None}
    for ci, call in enumerate(calls):
        a_rows, b_rows = a_all[f"c{ci}"], b_all[f"c{ci}"]
        for step in range(min(len(a_rows), len(b_rows))):
            a = np.unpackbits(a_rows[step], bitorder="little")[:vocab_size].astype(bool)
            b = np.unpackbits(b_rows[step], bitorder="little")[:vocab_size].astype(bool)
            final = step == len(call["ids"])
            for who, m in (("callmaybe", a), ("peer", b)):
                if (m & eos).any():
                    eos_steps[who].append((call["label"], step, final,
                                           [int(i) for i in np.flatnonzero(m & eos)]))
            if (b & other).any():
                ids = np.flatnonzero(b & other)
                special["steps"] += 1
                special["ids"].update(int(i) for i in ids)
                if special["first"] is None:
                    special["first"] = (call["label"], step, _context(call, step, vocabulary.token_bytes))
            only_a = np.flatnonzero(a & ~b & regular)
            only_b = np.flatnonzero(b & ~a & regular)
            kind = ("equal" if not len(only_a) and not len(only_b) else
                    "peer_subset" if not len(only_b) else "peer_superset" if not len(only_a) else "crossed")
            if kind == "peer_subset" and (b & regular).sum() == 1:
                kind = "peer_forced"
            counts[kind] += 1
            if kind != "equal" and len(examples[kind]) < limits.get(kind, show):
                examples[kind].append(_example(call, step, a & regular, b & regular, only_a, only_b,
                                               vocabulary.token_bytes))
    special["ids"] = sorted(special["ids"])
    return {"counts": counts, "examples": examples, "eos_steps": eos_steps, "special": special,
            "compared_calls": len(calls)}


def _context(call: dict, step: int, token_bytes, chars: int = 40) -> str:
    """The last ``chars`` characters of the text before ``step`` of a replayed call."""
    return b"".join(token_bytes[i] for i in call["ids"][:step]).decode("utf-8", "replace")[-chars:]


def _example(call, step, a, b, only_a, only_b, token_bytes) -> dict:
    nxt = call["ids"][step] if step < len(call["ids"]) else None
    return {
        "call": call["label"], "step": step, "context": _context(call, step, token_bytes),
        "next": None if nxt is None else f"{nxt} {token_bytes[nxt]!r}",
        "n_callmaybe": int(a.sum()), "n_peer": int(b.sum()),
        "only_callmaybe": [f"{int(i)} {token_bytes[i]!r}" for i in only_a[:10]], "n_only_callmaybe": len(only_a),
        "only_peer": [f"{int(i)} {token_bytes[i]!r}" for i in only_b[:10]], "n_only_peer": len(only_b),
    }


# ----------------------------------------------------------------------------------------------------------
# Printing
# ----------------------------------------------------------------------------------------------------------

COLUMNS = [
    ("engine", "engine", "{}"), ("vocab", "vocab", "{}"), ("workload", "workload", "{}"),
    ("vocab prep s", "vocab_prep_s", "{:.3f}"), ("compile s", "compile_s", "{:.3f}"),
    ("size B", "size_bytes", "{:,}"), ("load ms", "load_ms", "{:.1f}"),
    ("mask med us", "mask_med_us", "{:.1f}"), ("mask p99 us", "mask_p99_us", "{:.1f}"),
    ("p99 warm us", "mask_p99_warm_us", "{:.1f}"),
    ("apply us", "apply_us", "{:.1f}"), ("RSS base MB", "rss_base_mb", "{:.0f}"),
    ("RSS peak MB", "rss_peak_mb", "{:.0f}"),
    ("x compile", "x_compile", "{:.2f}"), ("x load", "x_load", "{:.2f}"), ("x mask med", "x_mask_med", "{:.2f}"),
    ("x mask p99", "x_mask_p99", "{:.2f}"), ("x p99 warm", "x_p99_warm", "{:.2f}"),
    ("x apply", "x_apply", "{:.2f}"), ("x size", "x_size", "{:.2f}"),
]


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "n/a" if row.get("status") == "ok" else "-"
    return fmt.format(value)


def format_table(rows: list[dict]) -> str:
    """The rows as a fixed-width text table; a skipped or failed engine shows its status instead."""
    header = [c[0] for c in COLUMNS]
    body = {id(r): [_cell(r, key, fmt) for _, key, fmt in COLUMNS] for r in rows}
    measured = [body[id(r)] for r in rows if r.get("status") == "ok"] + [header]
    widths = [max(len(cells[i]) for cells in measured) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines = [line(header)]
    for r in rows:
        cells = body[id(r)]
        if r.get("status") == "ok":
            lines.append(line(cells))
        else:
            lines.append(line(cells[:3]) + "  " + r["status"])
    return "\n".join(lines)


def format_agreement(rows: list[dict]) -> str:
    """Per peer row: step counts by kind, EOS and special-token handling, rejected tokens, examples."""
    out = ["Agreement of allowed regular tokens with callmaybe, per replayed step (EOS and special ids apart):"]
    for r in rows:
        if r["engine"] == "callmaybe" and r.get("status") == "ok":
            if r.get("rejected"):
                out.append(f"  callmaybe {r['vocab']} {r['workload']}: REJECTED replayed tokens {r['rejected']}")
            continue
        ag = r.get("agreement")
        if not ag:
            continue
        c = ag["counts"]
        total = sum(c.values())
        out.append(f"  {r['engine']} {r['vocab']} {r['workload']}: {total} steps: {c['equal']} equal, "
                   f"{c['peer_forced']} peer allows only its canonical token, {c['peer_subset']} peer allows "
                   f"fewer (other), {c['peer_superset']} peer allows more, {c['crossed']} crossed")
        if r.get("rejected"):
            out.append(f"    peer REJECTED replayed tokens: {r['rejected']}")
        out.extend("    " + line for line in _eos_lines(ag))
        for kind, examples in ag["examples"].items():
            for e in examples:
                out.append(f"    [{kind}] {e['call']} step {e['step']} after ...{e['context']!r} "
                           f"(next {e['next']}): callmaybe {e['n_callmaybe']}, peer {e['n_peer']}")
                if e["n_only_callmaybe"]:
                    out.append(f"      only callmaybe ({e['n_only_callmaybe']}): {', '.join(e['only_callmaybe'])}")
                if e["n_only_peer"]:
                    out.append(f"      only peer ({e['n_only_peer']}): {', '.join(e['only_peer'])}")
    return "\n".join(out)


def _eos_lines(ag: dict) -> list[str]:
    lines = []
    for who in ("callmaybe", "peer"):
        steps = ag["eos_steps"][who]
        early = [s for s in steps if not s[2]]
        ids = sorted({i for s in steps for i in s[3]})
        lines.append(f"EOS {who}: allowed at {len(steps) - len(early)}/{ag['compared_calls']} final states, "
                     f"{len(early)} earlier steps; ids {ids}"
                     + (f"; early: {early[:5]}" if early else ""))
    sp = ag["special"]
    if sp["steps"]:
        ids = sp["ids"]
        label, step, context = sp["first"]
        lines.append(f"SPECIAL/PADDING ids (no token bytes, not EOS) allowed by the peer at {sp['steps']} steps: "
                     f"{len(ids)} ids in {ids[0]}..{ids[-1]}; first at {label} step {step} after ...{context!r}")
    return lines


def format_notes(rows: list[dict]) -> str:
    out = ["Notes:"]
    versions = {r["engine"]: r["version"] or "not installed" for r in rows}
    out.append("  versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    grammars = {(r["engine"], r.get("grammar")) for r in rows
                if r.get("status") == "ok" and r["engine"] != "callmaybe"}
    out.append("  peer grammar input: " + "; ".join(f"{e}: {g}" for e, g in sorted(grammars)))
    for r in rows:
        if r["engine"] == "callmaybe" and r.get("phases"):
            phases = ", ".join(f"{k} {v:.3f}" for k, v in r["phases"].items())
            out.append(f"  callmaybe {r['vocab']} {r['workload']} phases (s): {phases}; compile runs "
                       + ", ".join(f"{t:.3f}" for t in r["compile_runs_s"]))
        elif r.get("status") == "ok" and len(r.get("compile_runs_s", [])) > 1:
            out.append(f"  {r['engine']} {r['vocab']} {r['workload']} compile runs (s): "
                       + ", ".join(f"{t:.3f}" for t in r["compile_runs_s"]))
        if r.get("slowest_step"):
            w = r["slowest_step"]
            out.append(f"  {r['engine']} {r['vocab']} {r['workload']}: slowest step {w['us']:.0f} us "
                       f"({w['call']} step {w['step']}, pass {w['pass'] + 1})")
        if r.get("vocabulary_note") and r["workload"] == rows[0]["workload"]:
            out.append(f"  {r['vocab']}: {r['vocabulary_note']}")
    steps = {(r["vocab"], r["workload"]): r.get("steps") for r in rows if r["engine"] == "callmaybe"}
    out.append("  replayed tokens per pass: " + ", ".join(f"{v} {w}: {n}" for (v, w), n in steps.items()))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "realistic" in argv and argv[argv.index("realistic") - 1] == "--workload":  # bench/realistic.py
        import realistic  # bench/ is on sys.path when run as a script

        i = argv.index("realistic")
        realistic.main(argv[: i - 1] + argv[i + 1 :])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "all"], default="all")
    parser.add_argument("--vocab", choices=[*VOCABS, "all"], default="all")
    parser.add_argument("--repeat", type=int, default=3, help="builds (median reported) and replay passes")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child)
        return
    for k, v in SINGLE_THREAD_ENV.items():
        os.environ.setdefault(k, v)
    workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    vocabs = list(VOCABS) if args.vocab == "all" else [args.vocab]
    t = time.perf_counter()
    rows = run(workloads, vocabs, max(1, args.repeat))
    print(format_table(rows))
    print()
    print(format_agreement(rows))
    print()
    print(format_notes(rows))
    print(f"  total wall time: {time.perf_counter() - t:.1f} s (repeat {args.repeat})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
