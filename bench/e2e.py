"""End-to-end benchmark: the same prompts answered by callmaybe and by each peer that is installed, greedy, one
request at a time, each system in its own subprocess (its peak RSS from ``os.wait4``), systems alternating.

Systems:

* ``callmaybe`` (``--dtype auto``), ``callmaybe-bf16`` (``--dtype bfloat16``), ``callmaybe-int8``
  (``--dtype int8``), ``callmaybe-int4`` (``--dtype int4``) and ``callmaybe-fp32`` (``--dtype float32``, the path
  before issue 11),
  one request at a time; ``callmaybe-batch`` (``--dtype auto --max-batch N``, N from ``--max-batch``, default 8):
  many requests decoding together, for throughput;
* ``outlines``: transformers + outlines on the same converted weights (float32, as the issue's table), the call
  constrained by one JSON schema (``anyOf`` over the catalog's functions), the same chat prompt as callmaybe's;
* ``llama.cpp``: llama-cpp-python on the same GGUF (all layers on the CPU, one thread per core the process may use (``taskset``), its own
  chat template from the GGUF) with the same messages, greedy (temperature 0), the call constrained by its
  JSON-schema grammar (``response_format``) of the same schema as outlines'; reported as skipped with the
  install command when it is not installed (it builds from source).

Printed per system: wall time with and without model loading (s), seconds per request, requests per second,
forward passes (callmaybe only: the peers decode every token), tokens per second, peak RSS (MB), right answers
(public rules, or BFCL's), load (s: wall time before the first request, interpreter start left out; callmaybe's
is everything its ``eval`` spends outside answering: model, indexes, the shared prefix), and the ratio of wall
time, answering time, RSS and load to the baseline's (``--baseline``, default callmaybe). Usage::

    python bench/e2e.py [--data public|bfcl100|bfcl64] [--systems callmaybe,callmaybe-fp32,...] [--max-batch 8]
                        [--baseline callmaybe]
    callmaybe bench --e2e [same flags]

No timed unit tests: the figures go in issue notes and the README.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CALLMAYBE_SHARED", REPO.parent / "shared"))
MODEL = "qwen2.5-coder-1.5b-instruct"
SYSTEMS = ("callmaybe", "callmaybe-bf16", "callmaybe-int8", "callmaybe-int4", "callmaybe-fp32", "callmaybe-batch",
           "outlines", "llama.cpp")
DTYPE = {"callmaybe": "auto", "callmaybe-bf16": "bfloat16", "callmaybe-int8": "int8", "callmaybe-int4": "int4",
         "callmaybe-fp32": "float32", "callmaybe-batch": "auto"}
INSTALL = {"outlines": "pip install outlines",
           "llama.cpp": "pip install llama-cpp-python  (compiles llama.cpp from source: several minutes)"}
MODULE = {"outlines": "outlines", "llama.cpp": "llama_cpp"}


#: each benchmark data set: (the path ``callmaybe eval`` reads, how many cases)
DATA = {"public": (SHARED / "data" / "public", None),
        "bfcl100": (SHARED / "data" / "bfcl_simple" / "cases.jsonl", 100),
        "bfcl64": (SHARED / "data" / "bfcl_simple" / "cases.jsonl", 64)}


def cores() -> int:
    """The CPUs this process may run on (``taskset`` narrows them; ``os.cpu_count`` counts the machine's): each
    system gets one thread per core it may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cases(data: str) -> list[dict]:
    """The benchmark's cases: ``{"prompt", "functions", "expected", "rules"}``."""
    from callmaybe.runtime.evaluation.evaluate import evaluation_cases

    return evaluation_cases(*DATA[data])


def score(call: dict | None, case: dict) -> bool:
    from callmaybe.runtime.evaluation.scoring import bfcl_match, public_match

    if not call or "name" not in call:
        return False
    match = public_match if case["rules"] == "public" else bfcl_match
    return bool(match(call, case["expected"])[1])


# ------------------------------------------------------------------------------------------------------------
# Children: one system each, in its own process
# ------------------------------------------------------------------------------------------------------------


def child_callmaybe(data: str, dtype: str, max_batch: int = 1) -> dict:
    """callmaybe's own ``eval`` on the benchmark's cases (the same scoring and answerer cache as the command)."""
    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.runtime.evaluation.evaluate import evaluate
    from callmaybe.runtime.answering.session import RunConfig
    from callmaybe.core.malloc import fix_mmap_threshold, wants_fixed_threshold

    if wants_fixed_threshold(max_batch, "required"):  # as `callmaybe eval` does (cli.py): a steady peak RSS
        fix_mmap_threshold()
    t0 = time.perf_counter()
    path, limit = DATA[data]
    totals = evaluate(RunConfig(model=MODEL, dtype=dtype, max_batch=max_batch), path, limit, None, runtime_compiler)
    total = time.perf_counter() - t0
    return {"load_s": total - totals["answer_seconds"], "answer_s": totals["answer_seconds"],
            "right": totals["right_arguments"], "cases": totals["cases"], "passes": totals["forward_passes"],
            "tokens": totals["tokens"]}


def call_schema(functions) -> dict:
    """One JSON schema for a whole call ``{"name", "parameters"}`` of any function of the catalog."""
    return {"anyOf": [{"type": "object", "properties": {"name": {"const": fn.name}, "parameters": fn.parameters},
                       "required": ["name", "parameters"], "additionalProperties": False} for fn in functions]}


def chat_messages(case: dict) -> list[dict]:
    """The peers' chat: callmaybe's own system message listing the catalog, then the request."""
    from callmaybe.runtime.decoding.prompt import system_message

    return [{"role": "system", "content": system_message(case["functions"])},
            {"role": "user", "content": case["prompt"]}]


def peer_call(text: str, fns) -> dict | None:
    """A peer's output text as a call with numbers typed as callmaybe types them, or None when it is not one."""
    from callmaybe.runtime.decoding.calls import type_numbers

    try:
        call = json.loads(text)
        by_name = {fn.name: fn for fn in fns}
        call["parameters"] = type_numbers(call.get("parameters"), by_name[call["name"]].parameters)
    except (ValueError, KeyError, TypeError):
        return None
    return call


def child_outlines(data: str) -> dict:
    import outlines
    import torch
    from outlines.types import JsonSchema
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from callmaybe.runtime.model.load import resolve_model_dir

    t0 = time.perf_counter()
    path = resolve_model_dir(MODEL, torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path)
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model = outlines.from_transformers(hf, tokenizer)
    all_cases = cases(data)
    loaded = time.perf_counter()
    right = tokens = 0
    generators = {}
    for case in all_cases:
        fns = case["functions"]
        key = tuple(fn.name for fn in fns)
        if key not in generators:
            generators = {key: outlines.Generator(model, JsonSchema(call_schema(fns)))}
        messages = chat_messages(case)
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        text = generators[key](prompt, max_new_tokens=256)
        tokens += len(tokenizer.encode(text, add_special_tokens=False))
        right += score(peer_call(text, fns), case)
    end = time.perf_counter()
    return {"load_s": loaded - t0, "answer_s": end - loaded, "right": right, "cases": len(all_cases),
            "passes": None, "tokens": tokens}


def child_llama_cpp(data: str) -> dict:
    from llama_cpp import Llama

    from callmaybe.core.registry import gguf_path

    t0 = time.perf_counter()
    llm = Llama(model_path=str(gguf_path(MODEL)), n_ctx=4096, n_threads=cores(), n_gpu_layers=0,
                verbose=False)
    all_cases = cases(data)
    loaded = time.perf_counter()
    right = tokens = 0
    for case in all_cases:
        fns = case["functions"]
        messages = chat_messages(case)
        out = llm.create_chat_completion(messages, temperature=0.0, max_tokens=256,
                                         response_format={"type": "json_object", "schema": call_schema(fns)})
        text = out["choices"][0]["message"]["content"] or ""
        tokens += out["usage"]["completion_tokens"]
        right += score(peer_call(text, fns), case)
    end = time.perf_counter()
    return {"load_s": loaded - t0, "answer_s": end - loaded, "right": right, "cases": len(all_cases),
            "passes": None, "tokens": tokens}


def child(system: str, data: str, max_batch: int) -> dict:
    import torch

    torch.set_num_threads(cores())
    if system in DTYPE:
        return child_callmaybe(data, DTYPE[system], max_batch if system == "callmaybe-batch" else 1)
    if system == "outlines":
        return child_outlines(data)
    if system == "llama.cpp":
        return child_llama_cpp(data)
    raise SystemExit(f"no child for {system}")


# ------------------------------------------------------------------------------------------------------------
# Parent
# ------------------------------------------------------------------------------------------------------------


def measure(system: str, data: str, max_batch: int) -> dict:
    """Run one system's child; returns its figures with ``wall_s`` and ``rss_mb`` (peak), or its status."""
    module = MODULE.get(system)
    if module is not None and importlib.util.find_spec(module) is None:
        return {"status": f"skipped (not installed: {INSTALL[system]})"}
    with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False) as out:
        target = out.name
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", system, "--data", data, "--out", target,
                             "--max-batch", str(max_batch)])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    try:
        if os.waitstatus_to_exitcode(status) != 0:
            return {"status": f"failed (exit {os.waitstatus_to_exitcode(status)})"}
        result = json.loads(Path(target).read_text())
    finally:
        Path(target).unlink(missing_ok=True)
    return {**result, "status": "ok", "wall_s": wall, "rss_mb": usage.ru_maxrss / 1024}


def table(rows: dict[str, dict], baseline: str = "callmaybe") -> list[str]:
    base = rows.get(baseline, {})
    head = (f"{'system':<16}{'wall s':>8}{'answer s':>10}{'s/req':>7}{'req/s':>7}{'passes':>8}{'tok/s':>7}"
            f"{'RSS MB':>8}{'right':>8}{'load s':>8}{'x wall':>8}{'x answer':>10}{'x RSS':>7}{'x load':>8}")
    out = [head]
    for system, r in rows.items():
        if r.get("status") != "ok":
            out.append(f"{system:<16}{r.get('status')}")
            continue
        ratio = lambda k: f"{r[k] / base[k]:.2f}" if base.get("status") == "ok" and base.get(k) else "-"
        out.append(f"{system:<16}{r['wall_s']:>8.1f}{r['answer_s']:>10.1f}{r['answer_s'] / r['cases']:>7.2f}"
                   f"{r['cases'] / r['answer_s']:>7.3f}"
                   f"{r['passes'] if r['passes'] is not None else '-':>8}{r['tokens'] / r['answer_s']:>7.1f}"
                   f"{r['rss_mb']:>8.0f}{str(r['right']) + '/' + str(r['cases']):>8}{r['load_s']:>8.1f}"
                   f"{ratio('wall_s'):>8}"
                   f"{ratio('answer_s'):>10}{ratio('rss_mb'):>7}{ratio('load_s'):>8}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=list(DATA), default="public")
    parser.add_argument("--max-batch", type=int, default=8, help="rows of callmaybe-batch (default 8)")
    parser.add_argument("--baseline", default="callmaybe", help="the system the ratios divide by")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated, run in this order (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        Path(args.out).write_text(json.dumps(child(args.child, args.data, args.max_batch)))
        return
    if not (SHARED / "data").is_dir():
        raise SystemExit(f"shared data not found: {SHARED / 'data'} (clone the project beside ../shared)")
    systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown systems {unknown} (known: {', '.join(SYSTEMS)})")
    rows = {}
    for system in systems:
        print(f"  {system:<16}{args.data} ...", end="", flush=True, file=sys.stderr)
        rows[system] = measure(system, args.data, args.max_batch)
        print(f" {rows[system]['status']}", file=sys.stderr)
    print("\n".join(table(rows, args.baseline)))


if __name__ == "__main__":
    main()
