"""The ``realistic`` workload of ``bench/compile_bench.py``: compile time, allowed-token entries, index size and
peak memory of what real API schemas use (formats, lengths), for callmaybe, xgrammar and llguidance side by side.

Items (issue 31), each compiled cold for the default model's vocabulary (Qwen's, 151,936 wide):

* ``six functions``: ``bench/catalogs/six_everyday.json`` (thermostat, ``send_email`` with ``format: email``
  and ``subject`` ``maxLength: 120``, calendar with ``format: date`` and a time pattern, currency, flights,
  to-do); ``send_email``: that function alone;
* ``o55361``: JSONSchemaBench Github_medium/o55361 (lengths of 160 and 255 and ``format: email`` under a
  ``oneOf``), as the parameters of one function (read from ``../shared/data/jsonschemabench``);
* ``jsonschemabench``: every schema of ``../shared/data/jsonschemabench`` that uses ``format``,
  ``maxLength`` or ``minLength`` (261), each compiled as a value (as a ``response_format`` is).

callmaybe compiles the catalog's calls (``compile_index``, its per-process caches of scalar and minimal automata
cleared first; a value with the ``value`` form); the peers compile the JSON schema of the same texts (the call
schema: anyOf over the functions, name as const; or the schema itself), xgrammar with
``compile_json_schema`` (cache off, one thread, no whitespace, ``", "`` and ``": "``), llguidance with
``grammar_from("json_schema")`` + ``LLMatcher`` + the first mask (it builds masks lazily, so its compile is
most of the work of the first step; later steps pay the rest). Each engine runs in child processes (one
thread each); a schema that takes longer than ``--timeout`` seconds is recorded as a timeout and the child is
started again after it. Printed: per item and engine, compile seconds (wall and CPU), entries (callmaybe),
index size, peak RSS during the compile (sampled every 5 ms) and the peer / callmaybe ratio of compile time;
for the JSONSchemaBench set, per engine, compiled / refused / timed out, p50, p90, p99 and max compile seconds
and the largest peak, and the same percentiles in CPU seconds. The load average of the machine is printed
before and after.

llguidance needs a tokenizer, not only token bytes: Qwen's is rebuilt from the same pinned ``qwen.tiktoken``
ranks callmaybe reads (``LLTokenizer.from_tiktoken`` with Qwen2's pre-tokenizer pattern), so no model is needed.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSB = ROOT.parent / "shared" / "data" / "jsonschemabench"
SIX = ROOT / "bench" / "catalogs" / "six_everyday.json"
ENGINES = ("callmaybe", "xgrammar", "llguidance")
VOCAB_SPEC = "Qwen/Qwen2.5-Coder-1.5B-Instruct"  # the default model's tokenizer, built in (no model needed)
#: Qwen2's pre-tokenizer (its tokenizer.json ``Split`` pattern), for llguidance's tokenizer from the ranks.
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                r"|\s+(?!\S)|\s+")
QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


# ----------------------------------------------------------------------------------------------------------
# items


def _call_schema(functions) -> dict:
    return {"anyOf": [{"type": "object", "properties": {"name": {"const": fn.name}, "parameters": fn.parameters},
                       "required": ["name", "parameters"], "additionalProperties": False} for fn in functions]}


def items(limit: int | None = None) -> list[dict]:
    """The workload: ``{"id", "group", "catalog" (OpenAI tools) or "schema" (a value)}`` each."""
    six = json.loads(SIX.read_text())
    out = [{"id": "six functions", "group": "named", "catalog": six},
           {"id": "send_email", "group": "named", "catalog": [t for t in six if t["function"]["name"] == "send_email"]}]
    if not JSB.is_dir():
        print(f"(JSONSchemaBench not found at {JSB}: o55361 and the set left out)", file=sys.stderr)
        return out
    bench = []
    for path in sorted(JSB.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            case = json.loads(line)
            if case["id"].endswith("o55361"):
                params = {"type": "object", **case["schema"]}
                out.append({"id": "o55361", "group": "named", "catalog": [{"type": "function", "function": {
                    "name": "update_zone", "description": "Create or update a DNS zone.", "parameters": params}}]})
            if re.search(r'"(format|maxLength|minLength)"', json.dumps(case["schema"])):
                bench.append({"id": case["id"], "group": "jsonschemabench", "schema": case["schema"]})
    return out + (bench[:limit] if limit else bench)


# ----------------------------------------------------------------------------------------------------------
# the child: one engine, items from a start position, one JSON line each


class PeakRss:
    """The largest resident set size (MB) of this process while the block runs, sampled every 5 ms."""

    def __init__(self):
        self.peak = 0.0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def _rss(self) -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page / 2**20

    def __enter__(self):
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


class Callmaybe:
    def __init__(self, vocabulary):
        from callmaybe.compiler.build import prepare_vocabulary

        prepare_vocabulary(vocabulary)
        self.vocabulary = vocabulary

    def compile(self, item) -> dict:
        from callmaybe.compiler.compile import CompileOptions, compile_index
        from callmaybe.compiler.automata.dfa import MINIMAL_CACHE
        from callmaybe.compiler.automata.nodes import LEAF_CACHE
        from callmaybe.core.catalog import Function, parse_catalog
        from callmaybe.core.indexfile import to_bytes

        LEAF_CACHE.clear()
        MINIMAL_CACHE.clear()
        if "catalog" in item:
            functions, options = parse_catalog(item["catalog"], item["id"]), CompileOptions()
        else:
            functions, options = [Function("value", "", item["schema"])], CompileOptions(form="value")
        index, report = compile_index(functions, self.vocabulary, options)
        return {"entries": report.entries, "states": report.states, "size": len(to_bytes(index)),
                "phases": {k: round(v, 3) for k, v in report.timings.items()}}


def _peer_schema(item) -> str:
    from callmaybe.core.catalog import parse_catalog

    if "catalog" in item:
        return json.dumps(_call_schema(parse_catalog(item["catalog"], item["id"])))
    return json.dumps(item["schema"])


class XGrammar:
    def __init__(self, vocabulary):
        import xgrammar as xgr

        encoded = [b if b is not None else b"" for b in vocabulary.token_bytes]
        info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=vocabulary.vocab_size,
                                 stop_token_ids=list(vocabulary.eos_ids))
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, item) -> dict:
        schema = _peer_schema(item)
        built = self.compiler.compile_json_schema(schema, any_whitespace=False, separators=(", ", ": "),
                                                  strict_mode=True)
        return {"size": len(built.serialize_json())}


class LLGuidance:
    def __init__(self, vocabulary):
        import llguidance

        from callmaybe.core import registry
        from callmaybe.core.vocabulary.tiktoken import read_tiktoken

        ranks = read_tiktoken(Path(registry.extract_member(registry.QWEN_TIKTOKEN)))
        self.tok = llguidance.LLTokenizer.from_tiktoken(
            encoder={b: i for i, b in enumerate(ranks)}, special_tokens=QWEN_SPECIAL, pattern=QWEN_PATTERN,
            eos_token=list(vocabulary.eos_ids), n_vocab=vocabulary.vocab_size)
        self.words = (vocabulary.vocab_size + 31) // 32

    def compile(self, item) -> dict:
        import llguidance
        import numpy as np

        grammar = llguidance.grammar_from("json_schema", _peer_schema(item))
        matcher = llguidance.LLMatcher(self.tok, grammar)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        mask = np.zeros(self.words, dtype=np.int32)
        matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)  # the first mask: most of its work
        return {"size": len(grammar)}


def child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    from callmaybe.core.vocabulary import load_vocabulary

    vocabulary = load_vocabulary(VOCAB_SPEC)
    engine = {"callmaybe": Callmaybe, "xgrammar": XGrammar, "llguidance": LLGuidance}[spec["engine"]](vocabulary)
    work = items(spec["limit"])
    with open(spec["out"], "a") as out:
        out.write(json.dumps({"ready": True}) + "\n")
        out.flush()
        for item in work[spec["start"]:]:
            row = {"id": item["id"], "group": item["group"], "engine": spec["engine"]}
            out.write(json.dumps({"started": item["id"]}) + "\n")
            out.flush()
            t, c = time.perf_counter(), time.process_time()
            try:
                with PeakRss() as rss:
                    row.update(engine.compile(item))
                row["status"] = "ok"
            except Exception as exc:  # a schema the engine refuses: recorded, the next one goes on
                row["status"] = "refused"
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            row["compile_s"], row["cpu_s"] = time.perf_counter() - t, time.process_time() - c
            row["peak_mb"] = rss.peak
            row["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            out.write(json.dumps(row) + "\n")
            out.flush()


# ----------------------------------------------------------------------------------------------------------
# the parent


def run_engine(engine: str, limit: int | None, timeout: float, env: dict) -> list[dict]:
    """Every item with ``engine``, in child processes; a schema past ``timeout`` seconds is a timeout row, one
    whose child dies a crash row, and a new child goes on after it."""
    work = items(limit)
    rows: list[dict] = []
    start = 0
    with tempfile.TemporaryDirectory(prefix="realistic-") as tmp:
        while start < len(work):
            out = Path(tmp) / f"{engine}-{start}.jsonl"
            spec = Path(tmp) / f"{engine}-{start}.json"
            spec.write_text(json.dumps({"engine": engine, "limit": limit, "start": start, "out": str(out)}))
            proc = subprocess.Popen([sys.executable, __file__, "--child", str(spec)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            current, since, ready, seen, lost = None, time.monotonic(), False, 0, None
            while True:
                done = proc.poll() is not None
                lines = out.read_text().splitlines() if out.exists() else []
                for line in lines[seen:]:
                    rec = json.loads(line)
                    if "ready" in rec:
                        ready = True
                    elif "started" in rec:
                        current, since = rec["started"], time.monotonic()
                    else:
                        rows.append(rec)
                        current, start = None, start + 1
                        print(f"  {engine:<10} {rec['id'][:40]:<40} {rec['status']:<8} {rec['compile_s']:.3f} s",
                              file=sys.stderr)
                seen = len(lines)
                if done:
                    lost = "crashed" if current is not None else None
                    break
                if current is not None and time.monotonic() - since > timeout:
                    proc.kill()
                    proc.wait()
                    lost = "timeout"
                    break
                time.sleep(0.05)
            if lost is None and not ready:
                raise SystemExit(f"{engine}: the child did not start: {proc.stderr.read()[-1000:]}")
            if lost is not None:
                rows.append({"id": current, "group": work[start]["group"], "engine": engine, "status": lost,
                             "compile_s": timeout if lost == "timeout" else float("nan")})
                print(f"  {engine:<10} {current[:40]:<40} {lost}", file=sys.stderr)
                start += 1
    return rows


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 100)) - 1))
    return ordered[k]


def report(rows: list[dict], slowest_n: int = 10) -> list[str]:
    by = {(r["engine"], r["id"]): r for r in rows}
    engines = [e for e in ENGINES if any(r["engine"] == e for r in rows)]
    named = [r["id"] for r in rows if r["group"] == "named" and r["engine"] == engines[0]]
    lines = ["| item | engine | compile s | CPU s | entries | index size | peak RSS MB | x compile (peer / callmaybe) |",
             "|---|---|---|---|---|---|---|---|"]
    for item in named:
        base = by.get(("callmaybe", item))
        for e in engines:
            r = by.get((e, item))
            if r is None:
                continue
            if r["status"] != "ok":
                lines.append(f"| {item} | {e} | {r['status']} {r.get('error', '')[:60]} | | | | | |")
                continue
            ratio = (f"{r['compile_s'] / base['compile_s']:.2f}" if base and base["status"] == "ok" and e != "callmaybe"
                     else "")
            lines.append(f"| {item} | {e} | {r['compile_s']:.3f} | {r['cpu_s']:.3f} | "
                         f"{r.get('entries', 0):,} | {r.get('size', 0):,} | {r['peak_mb']:.0f} | {ratio} |")
    bench = [r for r in rows if r["group"] == "jsonschemabench"]
    if bench:
        lines += ["", "JSONSchemaBench schemas with formats or lengths (each compiled cold as a value):", "",
                  "| engine | schemas | compiled | refused | timeouts | p50 s | p90 s | p99 s | max s | largest peak MB "
                  "| CPU p50 / p90 / p99 / max s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for e in engines:
            mine = [r for r in bench if r["engine"] == e]
            ok = [r for r in mine if r["status"] == "ok"]
            times = [r["compile_s"] for r in mine if r["status"] in ("ok", "timeout")]
            if not times:
                continue
            # CPU seconds (steadier than wall time on a shared machine); a timeout counts its wall seconds
            cpu = [r["cpu_s"] if r["status"] == "ok" else r["compile_s"] for r in mine if r["status"] in ("ok", "timeout")]
            timed = [r for r in mine if r["status"] in ("ok", "timeout")]  # the rows the percentiles count
            slowest = max(timed, key=lambda r: r["compile_s"])
            lines.append(f"| {e} | {len(mine)} | {len(ok)} | {sum(r['status'] == 'refused' for r in mine)} | "
                         f"{sum(r['status'] == 'timeout' for r in mine)} | {statistics.median(times):.3f} | "
                         f"{percentile(times, 90):.3f} | {percentile(times, 99):.3f} | {max(times):.3f} "
                         f"({slowest['id']}) | {max((r['peak_mb'] for r in ok), default=0):.0f} | "
                         f"{statistics.median(cpu):.3f} / {percentile(cpu, 90):.3f} / {percentile(cpu, 99):.3f} / "
                         f"{max(cpu):.3f} |")
    if bench and slowest_n:
        mine = sorted((r for r in bench if r["engine"] == "callmaybe" and r["status"] == "ok"),
                      key=lambda r: -r["cpu_s"])[:slowest_n]
        lines += ["", f"The {len(mine)} slowest JSONSchemaBench schemas (callmaybe, CPU s; phases in wall s):", "",
                  "| schema | CPU s | states | entries | grammar | token walk | table |", "|---|---|---|---|---|---|---|"]
        for r in mine:
            p = r["phases"]
            grammar = sum(p.get(k, 0.0) for k in ("automaton", "byte expansion", "join"))
            lines.append(f"| {r['id']} | {r['cpu_s']:.2f} | {r['states']:,} | {r['entries']:,} | {grammar:.2f} | "
                         f"{p.get('token walk', 0.0):.2f} | {p.get('table', 0.0):.2f} |")
    return lines


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="compile_bench.py --workload realistic")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--limit", type=int, default=None, help="only the first N JSONSchemaBench schemas")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per schema before a timeout")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--slowest", type=int, default=10,
                        help="list this many slowest JSONSchemaBench schemas of callmaybe with their phases")
    args = parser.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", RAYON_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    rows = []
    t = time.perf_counter()
    for engine in args.engines.split(","):
        rows += run_engine(engine, args.limit, args.timeout, env)
    print("\n".join(report(rows, args.slowest)))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; total {time.perf_counter() - t:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main(sys.argv[1:])
