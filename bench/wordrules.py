"""What the word rules of grounding lose on right calls, per language, without a model (issue 29, item 4).

The optional-argument rules (``runtime/policy/evidence.py``: a value the request states, reformats or names is kept;
a placeholder, a copy from the catalog or a value the request gives no ground for is restated or left out)
read the request's words. This bench takes the expected call of every case that needs one (the first value
BFCL's answer key accepts for each argument; an argument the key lets be left out is left out) as if the
model had written it, and asks the rules for their verdict on each optional argument. A right value they
would restate or leave out is a loss the rule can cause, whatever the model writes; the bench counts them per
language (a case's ``lang``, else English when its prompt's letters are ASCII) and per kind of evidence, and
prints the cases. What the rules win (a model's guess left out) needs the model's own calls: ``callmaybe eval``
prints it as "without grounding".

    python bench/wordrules.py ../shared/data/bfcl_live/simple.jsonl ../shared/data/bfcl_live/multiple.jsonl \\
        bench/catalogs/everyday_cases.jsonl bench/catalogs/optional_args_cases.jsonl [--cases]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

from callmaybe.runtime.evaluation.evaluate import evaluation_cases, language
from callmaybe.runtime.policy.evidence import verdicts
from callmaybe.runtime.answering.turns import request_text


def right_call(expected: dict) -> dict:
    """The arguments of an expected BFCL call as a model would write them: each argument's first accepted
    value; an argument whose accepted values include ``""`` (may be left out) is left out."""
    out = {}
    for key, accepted in (expected.get("parameters") or {}).items():
        if not isinstance(accepted, list) or not accepted or "" in accepted:
            continue
        out[key] = accepted[0]
    return out


def kind(evidence: str) -> str:
    """The rule that judged a value, from its evidence line (numbers and quoted values taken out)."""
    return re.sub(r"\s+", " ", re.sub(r"'[^']*'|\"[^\"]*\"|\([^)]*\)|-?\d[\d.,]*", "", evidence)).strip(" :;,")


def losses(paths: list[Path]) -> tuple[dict, list[tuple]]:
    """Per language: [optional values judged, values the rules would not keep]; and the lost values."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    lost: list[tuple] = []
    for path in paths:
        for case in evaluation_cases(path, None):
            if case.get("error") or case["rules"] != "bfcl" or not isinstance(case.get("expected"), dict):
                continue
            by_name = {fn.name: fn for fn in case["functions"]}
            fn = by_name.get(case["expected"].get("name"))
            if fn is None:
                continue
            arguments = right_call(case["expected"])
            messages = case.get("messages") or [{"role": "user", "content": case["prompt"]}]
            request = request_text(messages)
            required = set(fn.parameters.get("required", []))
            lang = language(case)
            for key, verdict in verdicts(arguments, fn, request).items():
                if key in required:
                    continue
                totals[lang][0] += 1
                if not verdict.keep:
                    totals[lang][1] += 1
                    lost.append((path.stem, case["id"], lang, key, arguments[key], verdict.evidence, request))
    return totals, lost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="+", type=Path)
    ap.add_argument("--cases", action="store_true", help="print every lost value")
    args = ap.parse_args()
    totals, lost = losses(args.data)
    english = [sum(v[i] for k, v in totals.items() if k == "en") for i in (0, 1)]
    other = [sum(v[i] for k, v in totals.items() if k != "en") for i in (0, 1)]
    print("| language | optional right values | the rules would not keep | share |")
    print("|---|---|---|---|")
    for name, (n, bad) in [*sorted(totals.items()), ("all English", english), ("all others", other)]:
        print(f"| {name} | {n} | {bad} | {100 * bad / n if n else 0:.1f}% |")
    print()
    print("| evidence (English / others) | lost |")
    print("|---|---|")
    by_kind = Counter((kind(e), "en" if lang == "en" else "other") for _, _, lang, _, _, e, _ in lost)
    for k in sorted({k for k, _ in by_kind}):
        print(f"| {k} | {by_kind[(k, 'en')]} / {by_kind[(k, 'other')]} |")
    if args.cases:
        print()
        for stem, cid, lang, key, value, evidence, request in lost:
            print(f"{stem} {cid} [{lang}] {key}={value!r}: {evidence} | {request[:140]!r}")


if __name__ == "__main__":
    main()
