"""Grammar correctness against real schemas: JSONSchemaBench (../shared/data/jsonschemabench) and BFCL simple.

For every schema: compile it (time limit per schema, default 30 s; past it the schema counts as refused),
then check each labelled instance written in the canonical layout:

* a valid instance must be accepted. Instances the grammar rejects by design are counted apart: keys not in
  declaration order, keys the schema does not declare (objects are closed), numbers past the digit caps;
* an invalid instance must be rejected, unless every jsonschema error on it comes from a keyword the
  compiler reported as not enforced (those are checked after generation), counted apart; each schema
  with such instances is listed with the keywords it names (and why they are not enforced).

Agreement = (valid accepted + invalid rejected) / (instances not counted apart). Prints one table per
subset, the refusal reasons, and every disagreement. Usage::

    python bench/jsonschemabench.py [--limit N] [--timeout S] [--subset NAME ...]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import signal
import sys
import time
from pathlib import Path

import jsonschema

from callmaybe.core.catalog import parse_catalog
from callmaybe.compiler.grammar import compile_grammar, schema_dfa
from callmaybe.compiler.automata.lexical import canonical
from callmaybe.core.errors import CallmaybeError

from _schema_checks import declared_order, integral_floats  # bench/ is on sys.path when run as a script

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
SUBSETS = ["glaiveai2k", "github_easy", "github_medium", "kubernetes", "jsonschemastore"]


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def reorder(value, order, drop_undeclared=False):
    if isinstance(value, dict):
        keys = [k for k in value if not drop_undeclared or k in order]
        keys.sort(key=lambda k: order.get(k, len(order)))
        return {k: reorder(value[k], order, drop_undeclared) for k in keys}
    if isinstance(value, list):
        return [reorder(v, order, drop_undeclared) for v in value]
    return value


def past_caps(value) -> bool:
    """True when ``value`` holds a number the grammar cannot write: a float that is not finite (integers of
    any length and every finite double are written)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(past_caps(v) for v in value)
    if isinstance(value, dict):
        return any(past_caps(v) for v in value.values())
    return False


def explained(err, not_enforced: set[str]) -> bool:
    """True when jsonschema error ``err`` comes only from keywords the grammar does not enforce; for
    anyOf/oneOf, when some branch fails only on such keywords."""
    if any(part in not_enforced for part in err.schema_path if isinstance(part, str)):
        return True  # the error arises under a keyword the grammar does not enforce (if/then, patternProperties)
    if err.validator in ("anyOf", "oneOf") and err.context:
        branches = collections.defaultdict(list)
        for sub in err.context:
            branches[sub.relative_schema_path[0]].append(sub)
        return any(all(explained(e, not_enforced) for e in errs) for errs in branches.values())
    return err.validator in not_enforced


def run_subset(name: str, limit: int | None, timeout: float, verbose: bool):
    path = SHARED / "jsonschemabench" / f"{name}.jsonl"
    stats = collections.Counter()
    refusals = collections.Counter()
    disagreements = []
    apart: list[tuple[str, str]] = []  # (schema id, the not-enforced keywords an invalid instance passed by)
    compile_times = []
    with open(path) as f:
        records = [json.loads(line) for line in f]
    if limit:
        records = records[:limit]
    for rec in records:
        schema = rec["schema"]
        stats["schemas"] += 1
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        t = time.perf_counter()
        try:
            dfa, notes = schema_dfa(schema, name=rec["id"])
        except Timeout:
            stats["refused"] += 1
            refusals[f"compile time over {timeout:.0f} s"] += 1
            if verbose:
                print(f"   over {timeout:.0f} s: {rec['id']}")
            continue
        except CallmaybeError as exc:
            stats["refused"] += 1
            reason = str(exc).split(": ", 1)[-1] if ": " in str(exc) else str(exc)
            refusals[reason[:90]] += 1
            continue
        except RecursionError:
            stats["refused"] += 1
            refusals["recursion too deep"] += 1
            continue
        except Exception as exc:  # a crash: must never happen
            stats["crashed"] += 1
            refusals[f"CRASH {type(exc).__name__}: {exc}"[:120]] += 1
            continue
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        compile_times.append(time.perf_counter() - t)
        stats["compiled"] += 1
        not_enforced = {n.keyword for n in notes if n.kind == "not enforced"}
        if any(n.kind == "not enforced" for n in notes):
            stats["with not-enforced keywords"] += 1
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        order = declared_order(schema)
        check_valid(rec, dfa, order, stats, disagreements)
        check_invalid(rec, dfa, validator, notes, not_enforced, stats, disagreements, apart)
    return stats, refusals, disagreements, compile_times, apart


def check_valid(rec: dict, dfa, order, stats, disagreements) -> None:
    """Count how the automaton takes each valid instance of ``rec``: accepted, apart (number caps, key order,
    undeclared keys: what the grammar leaves out by design) or rejected (a disagreement)."""
    for inst in rec["valid"]:
        text = canonical(inst)
        if dfa.accepts(text.encode()):
            stats["valid accepted"] += 1
            continue
        if past_caps(inst) or integral_floats(inst):
            stats["valid apart: number caps / integral floats"] += 1
        elif dfa.accepts(canonical(reorder(inst, order)).encode()):
            stats["valid apart: keys not in declaration order"] += 1
        elif dfa.accepts(canonical(reorder(inst, order, True)).encode()) or _has_undeclared(inst, order):
            stats["valid apart: undeclared keys"] += 1
        else:
            stats["valid REJECTED"] += 1
            disagreements.append((rec["id"], "valid rejected", text[:300]))


def check_invalid(rec: dict, dfa, validator, notes, not_enforced: set, stats, disagreements, apart) -> None:
    """Count how the automaton takes each invalid instance of ``rec``: rejected, apart (only keywords noted
    as not enforced fail; or a format the installed checkers cannot judge) or accepted (a disagreement)."""
    for inst in rec["invalid"]:
        text = canonical(inst)
        if not dfa.accepts(text.encode()):
            stats["invalid rejected"] += 1
            continue
        errors = list(validator.iter_errors(inst))
        kws = {e.validator for e in errors}
        if not errors:
            stats["invalid apart: label needs format checkers not installed"] += 1
        elif all(explained(e, not_enforced) for e in errors):
            stats["invalid apart: only not-enforced keywords"] += 1
            named = sorted({f"{n.keyword} ({n.detail})" if n.detail else n.keyword for n in notes
                            if n.kind == "not enforced" and n.keyword in kws | _under(errors)})
            apart.append((rec["id"], ", ".join(named) or ", ".join(sorted(not_enforced))))
        else:
            stats["invalid ACCEPTED"] += 1
            disagreements.append((rec["id"], f"invalid accepted ({', '.join(sorted(kws))})", text[:300]))


def _under(errors) -> set[str]:
    """The keywords on the schema paths of jsonschema ``errors`` (where each error arose)."""
    return {part for e in errors for part in e.schema_path if isinstance(part, str)}


def _has_undeclared(value, order) -> bool:
    if isinstance(value, dict):
        return any(k not in order for k in value) or any(_has_undeclared(v, order) for v in value.values())
    if isinstance(value, list):
        return any(_has_undeclared(v, order) for v in value)
    return False


def run_bfcl(timeout: float):
    path = SHARED / "bfcl_simple" / "cases.jsonl"
    ok = refused = 0
    reasons = collections.Counter()
    t = time.perf_counter()
    for line in open(path):
        case = json.loads(line)
        for fmt in ("functions", "tools"):
            try:
                compile_grammar(parse_catalog(case[fmt], case["id"]))
                ok += 1
            except CallmaybeError as exc:
                refused += 1
                reasons[str(exc)[:100]] += 1
    return ok, refused, reasons, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="schemas per subset")
    ap.add_argument("--timeout", type=float, default=30.0, help="compile time limit per schema, seconds")
    ap.add_argument("--subset", action="append", choices=SUBSETS, help="subsets to run (default all)")
    ap.add_argument("--no-bfcl", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if not SHARED.exists():
        print(f"shared data not found: {SHARED}", file=sys.stderr)
        return 2
    sys.setrecursionlimit(10000)
    total_disagree = 0
    print(f"{'subset':16} {'schemas':>7} {'compiled':>9} {'refused':>8} {'crashed':>7} "
          f"{'valid ok/apart/bad':>20} {'invalid ok/apart/bad':>21} {'agreement':>9} {'median ms':>9}")
    details = []
    for name in args.subset or SUBSETS:
        stats, refusals, disagreements, times, apart = run_subset(name, args.limit, args.timeout, args.verbose)
        v_apart = sum(v for k, v in stats.items() if k.startswith("valid apart"))
        i_apart = sum(v for k, v in stats.items() if k.startswith("invalid apart"))
        agree = stats["valid accepted"] + stats["invalid rejected"]
        counted = agree + stats["valid REJECTED"] + stats["invalid ACCEPTED"]
        pct = 100.0 * agree / counted if counted else 100.0
        times.sort()
        med = 1000 * times[len(times) // 2] if times else 0.0
        print(f"{name:16} {stats['schemas']:7d} {stats['compiled']:9d} {stats['refused']:8d} {stats['crashed']:7d} "
              f"{stats['valid accepted']:>9d}/{v_apart}/{stats['valid REJECTED']:<4d}"
              f"{stats['invalid rejected']:>10d}/{i_apart}/{stats['invalid ACCEPTED']:<4d} {pct:8.2f}% {med:9.1f}")
        details.append((name, stats, refusals, disagreements, apart))
        total_disagree += len(disagreements)
    for name, stats, refusals, disagreements, apart in details:
        print(f"\n== {name}: compiled {100.0 * stats['compiled'] / max(stats['schemas'], 1):.1f}% "
              f"({stats['with not-enforced keywords']} with keywords not enforced by the grammar)")
        for k in sorted(stats):
            if "apart" in k:
                print(f"   {k}: {stats[k]}")
        for (rid, named), n in collections.Counter(apart).items():
            print(f"   invalid apart x{n}: {rid}: not enforced: {named}")
        for reason, n in refusals.most_common():
            print(f"   refused x{n}: {reason}")
        for rid, kind, text in disagreements:
            print(f"   DISAGREE {rid}: {kind}: {text}")
    if not args.no_bfcl:
        ok, refused, reasons, secs = run_bfcl(args.timeout)
        print(f"\nBFCL simple per-case catalogs (both formats): {ok} compiled, {refused} refused, {secs:.1f} s")
        for reason, n in reasons.most_common():
            print(f"   refused x{n}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
