"""The int8 products of runtime/model/gemv.c against torch's, side by side in one run: for each row count, the
milliseconds to multiply that many int8 rows by every weight matrix of a model's layers (random int8 weights of
the model's shapes; Qwen2.5-1.5B's by default: 28 layers of q, k, v, o, gate, up and down, 196 matrices, 1,310
MB), best and median of ``--repeat`` rounds, for the AMX tile kernel (``Kernel.gemm``, from 4 rows where Linux
grants AMX), the AVX-512 VNNI kernel (``Kernel.gemv``, any number of rows: from 9 the rows of x in its lanes) and ``torch._int_mm``; then the ratio of
the kernel Int8Linear uses at that row count to ``torch._int_mm``. Usage::

    python bench/int8_kernels.py [--rows 1,2,4,8,14,16,32,64,128,256] [--threads 2] [--repeat 5]
        [--hidden 1536 --intermediate 8960 --kv 256 --layers 28]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,2,4,8,14,16,32,64,128,256")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=1536)
    parser.add_argument("--intermediate", type=int, default=8960)
    parser.add_argument("--kv", type=int, default=256, help="rows of the k and v projections")
    parser.add_argument("--layers", type=int, default=28)
    args = parser.parse_args(argv)

    from callmaybe.runtime.model import native

    torch.set_num_threads(args.threads)
    kernel = native.kernel()
    h, i = args.hidden, args.intermediate
    shapes = [(h, h), (args.kv, h), (args.kv, h), (h, h), (i, h), (i, h), (h, i)] * args.layers  # (n, k)
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randint(-128, 128, s, dtype=torch.int8, generator=gen) for s in shapes]
    sums = [kernel.row_sums(w) for w in weights] if kernel is not None else []
    total = sum(w.numel() for w in weights)
    print(f"{len(weights)} matrices, {total / 1e6:,.0f} MB of int8 weights, {args.threads} thread(s); kernel: "
          f"{'none' if kernel is None else ('AMX + VNNI' if kernel.amx else 'VNNI only')}")
    print("| rows | AMX gemm ms (best / median) | VNNI gemv ms | torch._int_mm ms | used / torch._int_mm |")
    print("|---|---|---|---|---|")
    for m in [int(r) for r in args.rows.split(",") if r]:
        xs = {k: torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen) for k in {s[1] for s in shapes}}
        systems = {}
        if kernel is not None and kernel.takes_gemm(m, h, h):
            systems["gemm"] = lambda w, s: kernel.gemm(xs[w.shape[1]], w)
        if kernel is not None and m <= kernel.max_rows:
            systems["gemv"] = lambda w, s: kernel.gemv(xs[w.shape[1]], w, s)
        # torch._int_mm wants more than 16 rows on some builds: fewer are padded to 17 (as a caller would)
        padded = {k: torch.nn.functional.pad(x, (0, 0, 0, max(0, 17 - m))) for k, x in xs.items()}
        systems["int_mm"] = lambda w, s: torch._int_mm(padded[w.shape[1]], w.t())
        times: dict[str, list[float]] = {name: [] for name in systems}
        for _ in range(args.repeat):
            for name, run in systems.items():
                t = time.perf_counter()
                for w, s in zip(weights, sums or [None] * len(weights)):
                    run(w, s)
                times[name].append((time.perf_counter() - t) * 1000)

        def cell(name: str) -> str:
            v = times.get(name)
            return f"{min(v):.0f} / {statistics.median(v):.0f}" if v else "-"

        used = next(name for name in ("gemm", "gemv", "int_mm") if name in times)  # Int8Linear's order
        print(f"| {m} | {cell('gemm')} | {cell('gemv')} | {cell('int_mm')} | "
              f"{min(times[used]) / min(times['int_mm']):.2f} ({used}) |", flush=True)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
