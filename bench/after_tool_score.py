"""Score text answers after a tool result: does each answer state what the result says? Usage::

    python bench/after_tool_score.py CATALOG.jsonl OUTPUT.json [OUTPUT2.json ...]

``CATALOG.jsonl``: cases of ``callmaybe eval`` whose last message is a tool result (``bench/catalogs/
after_tool_cases.jsonl``, ``after_tool_more.jsonl``), each with ``uses``: the text (a string) or texts (a list,
any one) a right answer contains, compared without case. A case that expects a call (``expected.calls`` not
empty) is right when eval scored its arguments right. ``OUTPUT.json``: ``callmaybe eval --output`` of that
catalog. Prints, per output, one line per case (language, right or not, the answer's start, the end of the
decision) and the count right, in all and per language, so that runs with and without a change compare side by
side.
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def uses(answer: str, wanted: str | list[str]) -> bool:
    """Whether ``answer`` contains ``wanted`` (any of them, for a list), compared without case."""
    wanted = [wanted] if isinstance(wanted, str) else wanted
    return any(w.lower() in answer.lower() for w in wanted)


def score(cases: dict[str, dict], entries: list[dict]) -> tuple[int, Counter, Counter]:
    """(right answers, right per language, cases per language) of eval's ``entries`` against ``cases`` (by id),
    printing a line per entry."""
    right, by_lang, per_lang = 0, Counter(), Counter()
    for e in entries:
        case = cases[str(e["id"])]
        text = e.get("content") or ""
        ok = bool(e.get("right_arguments")) if case["expected"].get("calls") else uses(text, case["uses"])
        right += ok
        by_lang[case["lang"]] += ok
        per_lang[case["lang"]] += 1
        shown = text if text else f"CALL {e.get('name')} {json.dumps(e.get('parameters'), ensure_ascii=False)}"
        print(f"{str(e['id'])[:24]:24s} {case['lang']} {'right' if ok else '-----'} {shown[:90]!r} | "
              f"{(e.get('decision') or '')[-80:]}")
    return right, by_lang, per_lang


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    with open(argv[0], encoding="utf-8") as f:
        cases = {str(c["id"]): c for c in map(json.loads, filter(str.strip, f))}
    for path in argv[1:]:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
        print(f"== {path}")
        right, by_lang, per_lang = score(cases, entries)
        langs = ", ".join(f"{lang} {by_lang[lang]}/{n}" for lang, n in sorted(per_lang.items()))
        print(f"right: {right} of {len(entries)} ({langs})")


if __name__ == "__main__":
    main(sys.argv[1:])
