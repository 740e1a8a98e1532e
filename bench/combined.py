"""Fit and replay the combined rule of ``tool_choice="auto"`` (``COMBINED_LOG_ODDS_MIN`` in
``runtime/policy/decision.py``) on ``callmaybe eval --tool-choice auto --output`` files.

A first call that passed the first token's, the verdict's and the confirmation's thresholds carries their three
log-odds in its ``decision``; the rule declines it when they sum below a threshold. Replayed on the output
files, a case the rule declines counts as a text answer (right on an irrelevance case, a call due declined
otherwise): the rule only adds declines, so no other case changes. The threshold is fitted on the
even-numbered cases: the highest one, on a grid of 0.25 nats, that declines at most ``--max-lost`` percent
of the right calls there (1%: half of the 2 points ``auto`` may lose against ``required``, the rest left to
cases it was not fitted on); the figures are printed for the even and the odd cases apart.

    python bench/combined.py --eval /tmp/live_simple_even.json /tmp/live_irrelevance_even.json ... \\
        [--max-lost 1] [--threshold 2.5]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from callmaybe.runtime.evaluation.evaluate import id_number

LOG_ODDS = re.compile(r"log-odds ([+-]\d+\.\d+)")


def total(case: dict) -> float | None:
    """The sum of a called case's three log-odds (None: not called, or not all three asked)."""
    decision = case.get("decision") or ""
    if not decision.startswith("called"):
        return None
    found = [float(x) for x in LOG_ODDS.findall(decision)]
    return sum(found) if len(found) == 3 else None


def load(paths: list[Path]) -> list[dict]:
    """Each case of the files: id, whether a call was due, whether it was declined, right arguments, sum."""
    rows = []
    for path in paths:
        for case in json.loads(path.read_text()):
            due = "irrelevance" not in case["id"]
            rows.append({"set": path.stem, "id": case["id"], "due": due, "declined": case.get("name") is None
                         and not case.get("calls"), "right": bool(case.get("right_arguments")),
                         "sum": total(case)})
    return rows


def replay(rows: list[dict], threshold: float) -> dict[str, tuple[int, int]]:
    """Per group: (cases counted, cases) where counted is declined for irrelevance and right arguments
    for calls due, with the rule at ``threshold``."""
    out: dict[str, list[int]] = {}
    for r in rows:
        declined = r["declined"] or (r["sum"] is not None and r["sum"] < threshold)
        good = declined if not r["due"] else (r["right"] and not declined)
        half = "even" if id_number(r["id"], 0) % 2 == 0 else "odd"
        for key in (f"{r['set']}", f"{'due' if r['due'] else 'irrelevance'} {half}"):
            c = out.setdefault(key, [0, 0, 0])
            c[0] += good
            c[1] += 1
            c[2] += declined
    return {k: tuple(v) for k, v in out.items()}


def fit(rows: list[dict], max_lost: float) -> float:
    """The highest threshold (grid of 0.25) that declines at most ``max_lost`` percent of the even cases that
    need a call and got right arguments (a right call the rule declines is a right call lost)."""
    right = [r for r in rows if r["due"] and r["right"] and id_number(r["id"], 0) % 2 == 0]
    best = -50.0
    for t in [x / 4 for x in range(-20, 41)]:
        lost = sum(r["sum"] is not None and r["sum"] < t for r in right)
        if right and 100.0 * lost / len(right) <= max_lost:
            best = t
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval", nargs="+", type=Path, required=True, help="eval --output files (tool_choice auto)")
    ap.add_argument("--max-lost", type=float, default=1.0,
                    help="percent of the even cases' right calls the fitted threshold may decline")
    ap.add_argument("--threshold", type=float, help="replay this threshold instead of fitting one")
    args = ap.parse_args(argv)
    rows = load(args.eval)
    threshold = args.threshold if args.threshold is not None else fit(rows, args.max_lost)
    print(f"threshold {threshold:+.2f}" + (" (given)" if args.threshold is not None else
                                           f" (fitted: at most {args.max_lost}% of the even right calls declined)"))
    before, after = replay(rows, -1e9), replay(rows, threshold)
    print(f"{'group':40} {'cases':>5} {'good before':>12} {'good after':>11} {'declined before':>16} "
          f"{'declined after':>15}")
    for key in sorted(after):
        (g0, n, d0), (g1, _, d1) = before[key], after[key]
        print(f"{key:40} {n:5} {g0:12} {g1:11} {d0:16} {d1:15}")
    sums = sorted((r["sum"], r["due"], r["right"], r["id"]) for r in rows if r["sum"] is not None)
    print("lowest sums (sum, call due, right arguments, id):")
    for s in sums[:16]:
        print(f"  {s[0]:+6.2f} {s[1]!s:5} {s[2]!s:5} {s[3]}")


if __name__ == "__main__":
    main()
