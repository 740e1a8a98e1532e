"""Batched decode step: the seconds of one :class:`~callmaybe.runtime.decoding.batch.Batch` step at each row
count, through this project's own pass over the packed tokens (``rowpass.py``) and through transformers' padded
forward, side by side in one run (issue 33: one forward pass per step for all rows).

Each row holds the keys and values of a ``--context``-token prompt; a step feeds every row one token ("1
each"), or one row ``--long`` tokens and the others one (a new row's prompt, or forced text, folded into the
batch). Printed per row count: the best of ``--repeat`` steps for each, in ms, and the load average. Usage::

    python bench/batch_step.py [--model smollm2-135m-instruct] [--dtype auto] [--rows 1,4,8,16] [--threads 1]
        [--context 300] [--long 12] [--repeat 3] [--profile]

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
    parser.add_argument("--long", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from callmaybe.runtime.decoding.batch import Batch, Started
    from callmaybe.runtime.decoding.forward import forward
    from callmaybe.runtime.model.load import load_model

    model = load_model(args.model, threads=args.threads, dtype=args.dtype).model
    _, past = forward(model, list(range(100, 100 + args.context)), None)
    kv = [(layer.keys.clone(), layer.values.clone()) for layer in past.layers]

    def step_ms(rows: int, widths: list[int], own: bool, profile: bool = False) -> float:
        batch = Batch(model)
        batch.own_pass = own
        for w in widths:
            batch.join(Started(_Fed(w), kv))
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
    print("| rows | 1 token each: own pass ms | transformers ms | one row {0} tokens: own pass ms | transformers ms |"
          .format(args.long))
    print("|---|---|---|---|---|")
    counts = [int(r) for r in args.rows.split(",") if r]
    for rows in counts:
        ones, mixed = [1] * rows, [args.long] + [1] * (rows - 1)
        print(f"| {rows} | {step_ms(rows, ones, True):.0f} | {step_ms(rows, ones, False):.0f} "
              f"| {step_ms(rows, mixed, True):.0f} | {step_ms(rows, mixed, False):.0f} |", flush=True)
    if args.profile:
        step_ms(counts[-1], [1] * counts[-1], True, profile=True)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
