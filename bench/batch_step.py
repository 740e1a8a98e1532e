"""Batched decode step: the seconds of one :class:`~callmaybe.runtime.decoding.batch.Batch` step at each row
count, through this project's own pass over the packed tokens (``rowpass.py``) and through transformers' padded
forward, side by side in one run (issue 33: one forward pass per step for all rows).

Each row holds the keys and values of a ``--context``-token prompt; a step feeds every row one token ("1
each"), or one row ``--long`` tokens and the others one (a new row's prompt, or forced text, folded into the
batch). With ``--base N``, the context's first N tokens are a catalog prefix that every row shares (the server's
case: the batch holds its keys and values once, ``Batch._share``); the "shared" column is that step. Printed per row count: the best of ``--repeat`` steps for each, in ms, and the load average. Usage::

    python bench/batch_step.py [--model smollm2-135m-instruct] [--dtype auto] [--rows 1,4,8,16] [--threads 1]
        [--context 300] [--base 0] [--long 12] [--repeat 3] [--profile]

``--profile`` adds torch.profiler's table of the operators of one step at the largest row count.
"""

from __future__ import annotations

import argparse
import os
import time


class _Fed:
    """A row that feeds ``width`` tokens at every step and never finishes."""

    def __init__(self, width: int):
        self.width, self.pending = width, [5] * width

    def take_forced(self) -> bool:
        return False

    def propose(self) -> list[int]:
        return []  # no draft: every step feeds ``width`` tokens

    def choose(self, logits) -> bool:
        self.pending = [7] * self.width
        return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--rows", default="1,4,8,16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--base", type=int, default=0, help="leading context tokens all rows share")
    parser.add_argument("--long", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--widths", default="", help="comma list: one more step whose rows feed these many tokens "
                        "each (e.g. a step of the serve bench at 16 clients)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from callmaybe.runtime.decoding.batch import Batch, Started
    from callmaybe.runtime.decoding.forward import forward
    from callmaybe.runtime.model.load import load_model

    model = load_model(args.model, threads=args.threads, dtype=args.dtype).model
    _, past = forward(model, list(range(100, 100 + args.context)), None)
    kv = [(layer.keys.clone(), layer.values.clone()) for layer in past.layers]
    base = tuple(range(100, 100 + args.base)) or None

    def step_ms(rows: int, widths: list[int], own: bool, profile: bool = False, shared: bool = False) -> float:
        batch = Batch(model)
        batch.own_pass = own
        for w in widths:
            batch.join(Started(_Fed(w), kv, base=base if shared else None))
        try:
            batch.step()
        except TypeError:  # this project's int8/int4 model class has no transformers-style forward
            return float("nan")
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            batch.step()
            times.append(time.perf_counter() - t)
        if profile:
            with torch.profiler.profile() as prof:
                batch.step()
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
        return min(times) * 1000

    print(f"{args.model} {args.dtype}, {args.threads} thread(s), {args.context}-token context per row")
    shared = f"shared {args.base} ms | " if base else ""
    print(f"| rows | 1 token each: own pass ms | {shared}transformers ms | one row {args.long} tokens: own pass ms "
          f"| {shared}transformers ms |")
    print("|---|---|---|---|---|" + ("---|---|" if base else ""))
    counts = [int(r) for r in args.rows.split(",") if r]
    for rows in counts:
        cells = []
        for widths in ([1] * rows, [args.long] + [1] * (rows - 1)):
            cells.append(f"{step_ms(rows, widths, True):.0f}")
            if base:
                cells.append(f"{step_ms(rows, widths, True, shared=True):.0f}")
            cells.append(f"{step_ms(rows, widths, False):.0f}")
        print(f"| {rows} | {' | '.join(cells)} |", flush=True)
    if args.widths:
        widths = [int(w) for w in args.widths.split(",")]
        cells = [f"{step_ms(len(widths), widths, True, shared=shared):.0f}" for shared in ([False, True] if base else [False])]
        print(f"mixed step, {len(widths)} rows feeding {sum(widths)} tokens ({args.widths}): own pass "
              f"{' ms, shared ' .join(cells)} ms", flush=True)
    if args.profile:
        widths = [int(w) for w in args.widths.split(",")] if args.widths else [1] * counts[-1]
        step_ms(len(widths), widths, True, profile=True, shared=bool(base))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
