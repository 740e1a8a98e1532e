"""Speculation on and off, side by side: ``callmaybe eval`` of each data set with ``--speculate`` and with
``--no-speculate``, each in its own process, the two alternating (round r starts with the one round r - 1 ended
with), one thread per core this process may use (``taskset -c 1`` gives one).

Per run: wall seconds (model load included), answering seconds, the answering's CPU seconds (this process's: less
moved than wall time by other jobs sharing the core), forward passes, draft tokens proposed and taken, right
answers; per data set: the answering-time ratio on / off, and whether every case's output (call, or
error) is the same with and without speculation, naming the cases that differ. Usage::

    taskset -c 1 python bench/speculate.py [--data public,bfcl100] [--rounds 1] [--dtype auto]

Prints ``uptime`` first: on a shared machine the load moves every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e import DATA, MODEL, cores  # noqa: E402


def child(data: str, speculate: bool, dtype: str, output: str, result: str) -> None:
    """One ``eval`` run; its figures go to ``result`` as JSON, its calls to ``output``."""
    import torch

    from callmaybe.compiler.build import runtime_compiler
    from callmaybe.runtime.answering.session import RunConfig, Runtime
    from callmaybe.runtime.evaluation.evaluate import case_answers, evaluate

    torch.set_num_threads(cores())
    t0 = time.perf_counter()
    path, limit = DATA[data]
    config = RunConfig(model=MODEL, dtype=dtype, threads=cores(), speculate=speculate)
    runtime = Runtime(config, runtime_compiler)
    cpu = time.process_time()
    totals = evaluate(config, path, limit, Path(output), runtime_compiler, None,
                      lambda cases: (case_answers(runtime, config, cases), runtime.profile))
    Path(result).write_text(json.dumps({
        "wall_s": time.perf_counter() - t0, "answer_s": totals["answer_seconds"],
        "answer_cpu_s": time.process_time() - cpu, "passes": totals["forward_passes"],
        "drafted": totals["drafted"], "accepted": totals["accepted"], "right": totals["right_arguments"],
        "cases": totals["cases"], "tokens": totals["tokens"]}))


def run(data: str, speculate: bool, dtype: str, folder: Path) -> tuple[dict, list]:
    """Run :func:`child` in a process of its own; returns (its figures, its output rows)."""
    output, result = folder / f"{data}-{speculate}.json", folder / f"{data}-{speculate}.result.json"
    subprocess.run([sys.executable, __file__, "--child", data, str(int(speculate)), dtype, str(output), str(result)],
                   check=True)
    return json.loads(result.read_text()), json.loads(output.read_text())


def outputs(rows) -> dict:
    """Each case's output as ``eval --output`` writes it: id -> (name, parameters, calls, error, the arguments
    before grounding)."""
    return {r["id"]: (r.get("name"), r.get("parameters"), r.get("calls"), r.get("error"), r.get("without_grounding"))
            for r in rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="public,bfcl100", help=f"comma-separated, of {', '.join(DATA)}")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        data, speculate, dtype, output, result = args.child
        return child(data, speculate == "1", dtype, output, result)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), f"; {cores()} core(s)",
          flush=True)
    head = f"{'data':<9}{'round':>6}{'speculate':>10}{'wall s':>8}{'answer s':>10}{'cpu s':>8}{'passes':>8}" \
           f"{'drafted':>9}{'taken':>7}{'right':>9}"
    lines = [head]
    order = [False, True]
    with tempfile.TemporaryDirectory() as tmp:
        for data in args.data.split(","):
            answer = {False: [], True: []}
            cpu = {False: [], True: []}
            same = None
            for r in range(args.rounds):
                for speculate in order:
                    figures, rows = run(data, speculate, args.dtype, Path(tmp))
                    answer[speculate].append(figures["answer_s"])
                    cpu[speculate].append(figures["answer_cpu_s"])
                    lines.append(f"{data:<9}{r + 1:>6}{'on' if speculate else 'off':>10}{figures['wall_s']:>8.1f}"
                                 f"{figures['answer_s']:>10.1f}{figures['answer_cpu_s']:>8.1f}{figures['passes']:>8}{figures['drafted']:>9}"
                                 f"{figures['accepted']:>7}{str(figures['right']) + '/' + str(figures['cases']):>9}")
                    print(lines[-1], flush=True)
                    got = outputs(rows)
                    if speculate:
                        on = got
                    else:
                        off = got
                order.reverse()
                differ = sorted(k for k in off if off[k] != on.get(k))
                same = differ if same is None else sorted(set(same) | set(differ))
            ratio = sum(answer[True]) / sum(answer[False])
            cpu_ratio = sum(cpu[True]) / sum(cpu[False])
            lines.append(f"{data}: answering time on / off {ratio:.2f}x (CPU time {cpu_ratio:.2f}x); outputs "
                         + ("identical" if not same else f"differ in {len(same)} cases: {same}"))
            print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
