"""Server benchmark: ``callmaybe serve`` under 1, 4, 8 and 16 concurrent clients (threads, each with the official
``openai`` client), against a sequential answering of the same prompts timed in the same run.

The cases are the public set (``../shared/data/public``: its catalog as OpenAI tools) or BFCL simple cases
(each with its own tools), asked as the exercise asks them: ``tool_choice: "required"``,
``parallel_tool_calls: false`` (one call, as the sequential run makes). The server is started as a subprocess
(``callmaybe serve``), warmed with one request per distinct tool list (compiles are not timed), then each
client count sends every case once, cycled to at least ``--per-client`` (4) requests per client so that every
level is full (16 clients: 64 requests). Printed per client count: requests, wall seconds, requests per second
and its ratio to one client's (issue 33's target: 16 clients >= 3x),
p50 / p99 latency (ms), completion tokens per second, calls invalid for their tool's schema (jsonschema; a
name not among the tools counts), 5xx answers, other errors, right answers (public or BFCL rules), and the
ratio of these requests per second to the sequential answering's (above 1: faster than sequential). The sequential
baseline is ``callmaybe run``'s path (``run_file``, one request at a time) on the public set, ``callmaybe
eval``'s on BFCL (each case has its own catalog), in a child process after the server has stopped, its model
loading excluded. Usage::

    CALLMAYBE_SHARED=../shared python bench/serve_bench.py [--data public|bfcl100|bfcl64] [--limit N]
        [--clients 1,4,8,16] [--per-client 4] [--model M] [--dtype D] [--max-batch 16] [--threads N] [--call-format auto|plain|tools]
        [--no-sequential] [--new-lists N] [--prefill-chunk N]
        [--prefill-share F]

``--new-lists N`` adds the "new tool lists under load" table: the known-list requests are sent again (with
the first client count) while another client sends N requests, each with a new six-function tool list
(``bench/catalogs/six_everyday.json``, renamed), one after another; printed: the known-list p50 / p99 idle and
loaded and their ratio (issue 31's target: within 1.5x), and each new list's first answer and how much of it
was the compile (the target: within 2 s plus its decode).

Not a timed test: the figures go in issue notes and the README.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CALLMAYBE_SHARED", REPO.parent / "shared"))
DATA = {"public": (SHARED / "data" / "public", None),
        "bfcl100": (SHARED / "data" / "bfcl_simple" / "cases.jsonl", 100),
        "bfcl64": (SHARED / "data" / "bfcl_simple" / "cases.jsonl", 64)}


def cases(data: str, limit: int | None) -> list[dict]:
    """The cases: ``{"id", "prompt", "functions", "expected", "rules"}`` (see ``evaluation_cases``)."""
    from callmaybe.runtime.evaluation.evaluate import evaluation_cases

    path, default = DATA[data]
    found = evaluation_cases(path, default)
    return found[:limit] if limit else found


def tools_of(functions) -> list[dict]:
    """A catalog's functions as OpenAI function tools."""
    return [{"type": "function", "function": {"name": fn.name, "description": fn.description,
                                              "parameters": fn.parameters}} for fn in functions]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, port: int) -> subprocess.Popen:
    """``callmaybe serve`` in a child process, once ``/health`` answers. Raises SystemExit when it stops."""
    import httpx

    cmd = [sys.executable, "-m", "callmaybe.cli", "serve", "--model", args.model, "--dtype", args.dtype,
           "--port", str(port), "--max-batch", str(args.max_batch), "--max-queue", "1024",
           "--max-new-tool-lists-per-minute", "100000", "--index-cache-size", "512", "--call-format", args.call_format]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.prefill_chunk is not None:
        cmd += ["--prefill-chunk", str(args.prefill_chunk)]
    if args.prefill_share is not None:
        cmd += ["--prefill-share", str(args.prefill_share)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + args.start_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server stopped (status {proc.returncode}): {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("the server did not answer /health in time")


def ask(client, model: str, case: dict, max_tokens: int) -> dict:
    """One request: its latency (s), calls, completion tokens, and status (None, or the error's)."""
    import openai

    t = time.perf_counter()
    try:
        r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": case["prompt"]}],
                                           tools=case["tools"], tool_choice="required", parallel_tool_calls=False,
                                           max_tokens=max_tokens)
    except openai.APIStatusError as exc:
        return {"seconds": time.perf_counter() - t, "status": exc.status_code, "calls": [], "tokens": 0}
    except openai.APIError as exc:
        return {"seconds": time.perf_counter() - t, "status": type(exc).__name__, "calls": [], "tokens": 0}
    calls = [{"name": c.function.name, "arguments": c.function.arguments}
             for c in r.choices[0].message.tool_calls or []]
    return {"seconds": time.perf_counter() - t, "status": None, "calls": calls,
            "tokens": r.usage.completion_tokens if r.usage else 0}


def invalid_calls(result: dict, case: dict) -> int:
    """How many of a result's calls name no tool, do not parse, or break their tool's schema."""
    import jsonschema

    schemas = {fn.name: fn.parameters for fn in case["functions"]}
    bad = 0
    for call in result["calls"]:
        try:
            jsonschema.validate(json.loads(call["arguments"]), schemas[call["name"]],
                                format_checker=jsonschema.FormatChecker())
        except (KeyError, ValueError, jsonschema.ValidationError):
            bad += 1
    return bad


def right(result: dict, case: dict) -> bool:
    from callmaybe.runtime.decoding.calls import type_numbers
    from callmaybe.runtime.evaluation.scoring import bfcl_match, public_match

    if not result["calls"] or case["rules"] not in ("public", "bfcl"):
        return False
    call = result["calls"][0]
    schemas = {fn.name: fn.parameters for fn in case["functions"]}
    try:
        params = type_numbers(json.loads(call["arguments"]), schemas[call["name"]])
    except (KeyError, ValueError):
        return False
    match = public_match if case["rules"] == "public" else bfcl_match
    return bool(match({"name": call["name"], "parameters": params}, case["expected"])[1])


def run_clients(url: str, model: str, todo: list[dict], clients: int, max_tokens: int, keep: bool = False) -> dict:
    """Every case once, from ``clients`` threads; the totals (``keep``: with every latency, seconds)."""
    import openai

    local = threading.local()

    def one(case: dict) -> dict:
        if not hasattr(local, "client"):
            local.client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0, timeout=3600)
        return ask(local.client, model, case, max_tokens)

    t = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, todo))
    wall = time.perf_counter() - t
    latencies = sorted(r["seconds"] for r in results)
    ok = [r for r in results if r["status"] is None]
    return {"clients": clients, "requests": len(results), "wall": wall,
            "p50": statistics.median(latencies) * 1000,
            "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
            "tokens": sum(r["tokens"] for r in ok),
            "invalid": sum(invalid_calls(r, c) for r, c in zip(results, todo)),
            "5xx": sum(1 for r in results if isinstance(r["status"], int) and r["status"] >= 500),
            "errors": sum(1 for r in results if r["status"] is not None
                          and not (isinstance(r["status"], int) and r["status"] >= 500)),
            "right": sum(right(r, c) for r, c in zip(results, todo)),
            **({"latencies": latencies} if keep else {})}


def sequential_child(args) -> dict:
    """In a child process: the same prompts answered one at a time; the answering seconds (loading excluded)."""
    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.runtime.answering.session import RunConfig

    config = RunConfig(model=args.model, dtype=args.dtype, threads=args.threads, max_batch=1,
                       call_format=args.call_format)
    path, default = DATA[args.data]
    if args.data == "public":  # `callmaybe run`'s own path: one catalog, a requests file
        from callmaybe.runtime.answering.session import run_file

        requests = json.loads((path / "function_calling_tests.json").read_text())[: args.limit or None]
        with tempfile.TemporaryDirectory() as tmp:
            inp, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
            inp.write_text(json.dumps(requests))
            outcome = run_file(config, path / "functions_definition.json", inp, out, runtime_compiler)
        return {"seconds": outcome.answer_seconds, "requests": len(requests)}
    from callmaybe.runtime.evaluation.evaluate import evaluate  # each case with its own catalog: `callmaybe eval`'s path

    totals = evaluate(config, path, args.limit or default, None, runtime_compiler)
    return {"seconds": totals["answer_seconds"], "requests": totals["cases"]}


def sequential(args) -> dict | None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "seq.json"
        argv = [sys.executable, __file__, "--child", str(out), "--data", args.data, "--model", args.model,
                "--dtype", args.dtype, "--limit", str(args.limit or 0), "--call-format", args.call_format]
        if args.threads:
            argv += ["--threads", str(args.threads)]
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if not out.exists():
            print(f"sequential run failed: {proc.stderr[-1500:]}", file=sys.stderr)
            return None
        return json.loads(out.read_text())


SIX = REPO / "bench" / "catalogs" / "six_everyday.json"


def new_six(n: int) -> list[dict]:
    """The six-function catalog (``bench/catalogs/six_everyday.json``) as a tool list no request sent before:
    its function names suffixed with ``n``."""
    tools = json.loads(SIX.read_text())
    for t in tools:
        t["function"] = dict(t["function"], name=f"{t['function']['name']}_{n}")
    return tools


def redescribed(tools: list[dict]) -> list[dict]:
    """``tools`` with the same names and parameter schemas (so the same catalog fingerprint: the index compiled
    for them serves) and every description begun anew, so that their catalog prompt is not in the server's
    prefix cache (it shares only the tokens before the first description)."""
    return [dict(t, function=dict(t["function"], description="Again. " + t["function"].get("description", "")))
            for t in tools]


def under_new_lists(url: str, model: str, todo: list[dict], clients: int, max_tokens: int, lists: int) -> dict:
    """Latency of requests with known tool lists, idle and while new six-function lists compile.

    First ``todo`` is sent by ``clients`` threads with no compile under way (idle); then again while one more
    thread sends ``lists`` requests each with a new six-function list, one after another. Returns the idle and
    loaded p50 / p99 (ms) of the known-list requests, their ratios, and for the new lists the seconds each first
    answer took, and how much of it was waiting for the compile: the first answer less the same request's
    answer with the list compiled and its descriptions begun anew (:func:`redescribed`), which computes its
    catalog prompt as the first did (before, the same request again, whose catalog prompt the prefix cache
    held, so that the "wait" counted the prompt too)."""
    import openai

    idle = run_clients(url, model, todo, clients, max_tokens)
    client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0, timeout=3600)
    first, waits = [], []
    stop = threading.Event()

    def compile_new():
        for n in range(lists):
            if stop.is_set():
                return
            case = {"prompt": "Send an email to ana@example.com saying the report is ready, subject Report.",
                    "tools": new_six(int(time.time() * 1000) * 1000 + n)}
            a = ask(client, model, case, max_tokens)
            b = ask(client, model, dict(case, tools=redescribed(case["tools"])), max_tokens)  # compiled: prompt
            # and decode alone
            first.append(a["seconds"])
            waits.append(a["seconds"] - b["seconds"])

    worker = threading.Thread(target=compile_new)
    worker.start()
    time.sleep(0.5)  # the first new list is compiling
    passes = []
    while worker.is_alive() or not passes:  # known lists asked again and again until every new list is in
        passes.append(run_clients(url, model, todo, clients, max_tokens, keep=True))
    stop.set()
    worker.join()
    latencies = sorted(x for p in passes for x in p["latencies"])
    loaded = {"p50": statistics.median(latencies) * 1000,
              "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000}
    errors = idle["errors"] + idle["5xx"] + sum(p["errors"] + p["5xx"] for p in passes)
    return {"clients": clients, "idle_p50": idle["p50"], "idle_p99": idle["p99"], "loaded_p50": loaded["p50"],
            "loaded_p99": loaded["p99"], "x_p50": loaded["p50"] / idle["p50"], "x_p99": loaded["p99"] / idle["p99"],
            "new_lists": len(first), "first_s": sorted(first), "wait_s": sorted(waits), "errors": errors,
            "loaded_requests": len(latencies)}


def load_table(r: dict) -> list[str]:
    """The "new tool lists under load" table."""
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    return ["", "New tool lists under load (known-list requests while new six-function lists compile):", "",
            "| clients | idle p50 ms | idle p99 ms | loaded requests | loaded p50 ms | loaded p99 ms | x p50 | x p99 | "
            "new lists | new list first answer s (p50 / max) | of which compile wait s (p50 / max) | errors |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {r['clients']} | {r['idle_p50']:.0f} | {r['idle_p99']:.0f} | {r['loaded_requests']} | {r['loaded_p50']:.0f} | "
            f"{r['loaded_p99']:.0f} | {r['x_p50']:.2f} | {r['x_p99']:.2f} | {r['new_lists']} | "
            f"{med(r['first_s']):.2f} / {max(r['first_s'], default=float('nan')):.2f} | "
            f"{med(r['wait_s']):.2f} / {max(r['wait_s'], default=float('nan')):.2f} | {r['errors']} |"]


def table(rows: list[dict], seq: dict | None) -> list[str]:
    lines = ["| clients | requests | wall s | req/s | x 1 client | p50 ms | p99 ms | tokens/s | invalid | 5xx | errors "
             "| right | x sequential |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    one = next((r["requests"] / r["wall"] for r in rows if r["clients"] == 1), None)
    for r in rows:
        x_one = f"{r['requests'] / r['wall'] / one:.2f}" if one else "-"
        ratio = f"{r['requests'] / r['wall'] / (seq['requests'] / seq['seconds']):.2f}" if seq else "-"
        lines.append(f"| {r['clients']} | {r['requests']} | {r['wall']:.1f} | {r['requests'] / r['wall']:.3f} "
                     f"| {x_one} | {r['p50']:.0f} | {r['p99']:.0f} | {r['tokens'] / r['wall']:.1f} | {r['invalid']} "
                     f"| {r['5xx']} | {r['errors']} | {r['right']}/{r['requests']} | {ratio} |")
    if seq:
        lines.append(f"sequential (one at a time, loading excluded): {seq['requests']} requests in "
                     f"{seq['seconds']:.1f} s ({seq['requests'] / seq['seconds']:.3f} req/s)")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=sorted(DATA), default="public")
    parser.add_argument("--limit", type=int, default=None, help="only the first N cases")
    parser.add_argument("--clients", default="1,4,8,16", help="comma-separated client counts")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--per-client", type=int, default=4,
                        help="each client count sends at least this many requests per client (the cases cycled), "
                             "so that every level stays full")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--call-format", choices=["auto", "plain", "tools"], default="auto",
                        help="for the server and the sequential baseline alike (auto: the model's own tools format)")
    parser.add_argument("--start-timeout", type=float, default=900.0, help="seconds to wait for the server")
    parser.add_argument("--no-sequential", action="store_true", help="skip the sequential baseline")
    parser.add_argument("--prefill-chunk", type=int, default=None,
                        help="the server's --prefill-chunk (default: the server's default)")
    parser.add_argument("--prefill-share", type=float, default=None,
                        help="the server's --prefill-share (default: the server's default)")
    parser.add_argument("--new-lists", type=int, default=0,
                        help="also measure known-list latency while N new six-function tool lists compile "
                             "(with the first client count)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.limit = args.limit or None
        Path(args.child).write_text(json.dumps(sequential_child(args)))
        return
    if not (SHARED / "data").is_dir():
        raise SystemExit(f"shared data not found: {SHARED / 'data'} (set CALLMAYBE_SHARED or clone beside ../shared)")
    todo = cases(args.data, args.limit)
    for case in todo:
        case["tools"] = tools_of(case["functions"])
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    print(f"starting callmaybe serve --model {args.model} --max-batch {args.max_batch} ...", file=sys.stderr)
    proc = start_server(args, port)
    rows = []
    try:
        import openai

        warm = openai.OpenAI(base_url=url, api_key="bench", max_retries=0, timeout=3600)
        seen = set()
        t = time.perf_counter()
        for case in todo:  # one request per distinct tool list: compiles are not timed
            key = json.dumps(case["tools"], sort_keys=True)
            if key not in seen:
                seen.add(key)
                ask(warm, args.model, case, args.max_tokens)
        print(f"warmed {len(seen)} tool lists in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        for clients in [int(c) for c in args.clients.split(",") if c]:
            print(f"  {clients} clients ...", file=sys.stderr)
            level = [todo[i % len(todo)] for i in range(max(len(todo), args.per_client * clients))]
            rows.append(run_clients(url, args.model, level, clients, args.max_tokens))
        if args.new_lists:
            clients = int(args.clients.split(",")[0])
            print(f"  {clients} clients while {args.new_lists} new tool lists compile ...", file=sys.stderr)
            loaded = under_new_lists(url, args.model, todo, clients, args.max_tokens, args.new_lists)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    seq = None
    if not args.no_sequential:
        print("sequential baseline ...", file=sys.stderr)
        seq = sequential(args)
    print("\n".join(table(rows, seq)))
    if args.new_lists:
        print("\n".join(load_table(loaded)))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
