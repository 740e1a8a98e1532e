"""The model's own evidence for an optional argument: its value's pointwise mutual information with the request.

Issue 29 asks that each word rule of grounding (``runtime/policy/evidence.py``, ``reformat.py``: placeholder
words, number words, English month names, derivations) be measured on data it was not built on and replaced by
a test of the model's own probabilities where it does not win there. This bench measures both on the calls a
``callmaybe eval --output`` run made (the arguments as decoded, before grounding: the row's
``without_grounding`` parameters when grounding changed them), one optional argument at a time:

* **label**: the value is right (one BFCL's answer key accepts), or should be left out (the key lets the
  argument be left out, or does not list it), or neither (the case is wrong either way; not counted);
* **stated**: its letters and digits, NFKC-folded, occur in the request's (the language-free part of
  ``grounding.is_stated``);
* **word rules**: the verdict of ``evidence.verdicts`` (kept or not, and its evidence);
* **PMI**: ``log p(value | chat) - log p(value | the chat with its user messages emptied)`` (nats), the value's
  tokens summed, the call teacher-forced as the decoder writes it (``json.dumps`` separators) after the
  ``required`` prompt of the ``plain`` call format: two forward passes per call (the arguments of one call share
  them).

Usage::

    python bench/value_pmi.py --data ../shared/data/bfcl_live/simple.jsonl --eval OUT.json --output rows.jsonl
    python bench/value_pmi.py --table rows.jsonl [--ids even|odd]     # the table again, no model

The tables (``--table``): per language and label, how many values the word rules keep and how many a PMI
threshold keeps (thresholds on ``--grid``), stated values apart; what each rule decides; the word rules against
the word rules plus PMI keeps, per language.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

MODEL = "qwen2.5-coder-1.5b-instruct"


def value_spans(name: str, params: dict) -> tuple[str, dict[str, tuple[int, int]]]:
    """The call's text as the decoder writes it (``{"name": ..., "parameters": {...}}``, ``", "`` and ``": "``
    separators, non-ASCII as written) and each argument's value's character span in it."""
    text = '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "parameters": {'
    spans = {}
    for i, (key, value) in enumerate(params.items()):
        text += (", " if i else "") + json.dumps(key, ensure_ascii=False) + ": "
        start = len(text)
        text += json.dumps(value, ensure_ascii=False)
        spans[key] = (start, len(text))
    return text + "}}", spans


def label(key: str, value, expected: dict) -> str:
    """"keep" (the answer key accepts the value and not its absence), "drop" (it accepts the absence, or does
    not list the argument, and not the value), "either" (it accepts both: keeping or leaving it out decides
    nothing) or "neither" (the case is wrong either way)."""
    from callmaybe.runtime.evaluation.scoring import _bfcl_value

    want = expected.get("parameters") or {}
    options = (want[key] if isinstance(want[key], list) else [want[key]]) if key in want else [""]
    accepted = any(_bfcl_value(value, o) for o in options if o != "")
    if accepted:
        return "either" if "" in options else "keep"
    return "drop" if "" in options else "neither"


def rule(evidence: str) -> str:
    """The rule behind a verdict's evidence line: its words before any quoted value or parenthesis, numbers
    written N (``"a reformat of what the request states: 2023, 4, 5"`` -> ``"a reformat of what the request
    states: N, N, N"``)."""
    head = re.sub(r"\(.*", "", evidence).strip()
    return re.sub(r"\d[\d.,]*", "N", head).strip(" :;,")[:70]


def stated(value, request: str) -> bool:
    """The value's letters and digits (NFKC, case-folded) occur in the request's; a number as written."""
    from callmaybe.runtime.policy.grounding import normalize

    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        text = str(int(value)) if float(value).is_integer() else str(value)
    elif isinstance(value, str):
        text = value
    elif isinstance(value, list) and value and all(isinstance(v, (str, int, float)) for v in value):
        return all(stated(v, request) for v in value)
    else:
        return False
    folded = normalize(text)
    return bool(folded) and folded in normalize(request)


def measure(data: Path, eval_path: Path, output: Path, threads: int) -> None:
    import torch

    from callmaybe.runtime.answering.turns import request_text
    from callmaybe.runtime.decoding.prompt import chat_ids
    from callmaybe.runtime.evaluation.evaluate import evaluation_cases, language
    from callmaybe.runtime.model.load import load_model
    from callmaybe.runtime.policy.evidence import verdicts

    loaded = load_model(MODEL, threads=threads)
    tok, model = loaded.tokenizer, loaded.model
    cases = {c["id"]: c for c in evaluation_cases(data, None)}
    rows = json.loads(eval_path.read_text())
    done = set()
    if output.exists():
        done = {json.loads(line)["id"] for line in output.read_text().splitlines() if line.strip()}
    with output.open("a") as out:
        for row in rows:
            case = cases.get(row.get("id"))
            if case is None or row["id"] in done or not row.get("name") or case.get("rules") != "bfcl":
                continue
            params = (row.get("without_grounding") or {}).get("parameters") or row.get("parameters") or {}
            fn = next((f for f in case["functions"] if f.name == row["name"]), None)
            if fn is None or not isinstance(case.get("expected"), dict):
                continue
            required = set(fn.parameters.get("required", []))
            optional = [k for k in params if k not in required]
            messages = case.get("messages") or [{"role": "user", "content": case["prompt"]}]
            request = request_text(messages)
            record = {"id": row["id"], "lang": language(case), "values": []}
            if optional:
                text, spans = value_spans(row["name"], params)
                enc = tok.backend_tokenizer.encode(text, add_special_tokens=False)
                call_ids, offsets = list(enc.ids), list(enc.offsets)
                emptied = [{**m, "content": ""} if m.get("role") == "user" else m for m in messages]
                sums = []
                for msgs in (messages, emptied):
                    prompt = chat_ids(tok, case["functions"], msgs, "plain", opening=True)
                    with torch.inference_mode():
                        logits = model(input_ids=torch.tensor([prompt + call_ids]), use_cache=False).logits[0]
                    logp = torch.log_softmax(logits[len(prompt) - 1:-1].float(), -1)
                    sums.append(logp[torch.arange(len(call_ids)), torch.tensor(call_ids)].tolist())
                judged = verdicts(params, fn, request)
                for key in optional:
                    a, b = spans[key]
                    toks = [i for i, (s, e) in enumerate(offsets) if e > a and s < b]
                    with_request = sum(sums[0][i] for i in toks)
                    without = sum(sums[1][i] for i in toks)
                    record["values"].append({
                        "key": key, "value": params[key], "label": label(key, params[key], case["expected"]),
                        "stated": stated(params[key], request), "rules_keep": judged[key].keep,
                        "evidence": judged[key].evidence, "pmi": round(with_request - without, 3),
                        "logp": round(with_request, 3)})
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()


def load_records(paths: list[Path], ids: str | None) -> list[dict]:
    """The records of ``paths`` (one JSON object per line), only the even or odd ids with ``ids``."""
    from callmaybe.runtime.evaluation.evaluate import select_ids

    records = [json.loads(line) for path in paths for line in path.read_text().splitlines() if line.strip()]
    return select_ids(records, ids)


def tally(records: list[dict], grid: list[float]) -> tuple[dict, dict, dict, list]:
    """Counts over the values labelled "keep" or "drop": per (language, label) the values, the stated ones and
    the unstated ones the word rules and PMI >= t keep; per (rule, verdict) [should go, should stay]; per
    (language, rule set) [should go, should stay] left out; and the unstated values as (language, value)."""
    counts: dict = defaultdict(lambda: defaultdict(int))
    by_rule: dict = defaultdict(lambda: [0, 0])
    left_out: dict = defaultdict(lambda: [0, 0])
    unstated = []
    for r in records:
        lang = "en" if r["lang"] == "en" else "other"
        for v in r["values"]:
            if v["label"] not in ("keep", "drop"):
                continue
            stay = v["label"] == "keep"
            by_rule[(rule(v["evidence"]), "keep" if v["rules_keep"] else "leave out")][stay] += 1
            keeps = {"word rules": v["rules_keep"],
                     **{f"word rules, and PMI >= {t:g} keeps": v["rules_keep"] or v["pmi"] >= t for t in grid}}
            for name, keep in keeps.items():
                if not keep:
                    left_out[(lang, name)][stay] += 1
            cell = counts[(lang, v["label"])]
            cell["n"] += 1
            if v["stated"]:
                cell["stated"] += 1
                continue
            unstated.append((lang, v))
            cell["rules"] += v["rules_keep"]
            for t in grid:
                cell[t] += v["pmi"] >= t
    return counts, by_rule, left_out, unstated


def table(paths: list[Path], ids: str | None, grid: list[float]) -> None:
    """Print, for the records of ``paths`` (the even or odd ids with ``ids``): the optional values per language
    and label with how many unstated ones the word rules and PMI >= t keep; the values each rule decides (should
    go / should stay, "either" and "neither" left out); the word rules against the word rules plus PMI >= t
    keeps (values that should go left out, values that should stay left out, net); and every unstated value."""
    records = load_records(paths, ids)
    counts, by_rule, left_out, unstated = tally(records, grid)
    print(f"calls {len(records)}; optional values by language and label (keep: the answer key accepts the "
          "value only; drop: only its absence); unstated values kept by the word rules and by PMI >= t")
    print("| language | label | values | stated | unstated: word rules keep | "
          + " | ".join(f"PMI >= {t:g}" for t in grid) + " |")
    print("|---" * (5 + len(grid)) + "|")
    for (lang, lab), c in sorted(counts.items()):
        print(f"| {lang} | {lab} | {c['n']} | {c['stated']} | {c['rules']} | "
              + " | ".join(str(c[t]) for t in grid) + " |")
    print("\n| rule | its verdict | values that should go | values that should stay |\n|---|---|---|---|")
    for (name, verdict), (go, stay) in sorted(by_rule.items(), key=lambda x: (x[0][1], x[0][0])):
        print(f"| {name} | {verdict} | {go} | {stay} |")
    print("\n| language | rule | should go, left out | should stay, left out | net |\n|---|---|---|---|---|")
    for (lang, name), (go, stay) in sorted(left_out.items()):
        print(f"| {lang} | {name} | {go} | {stay} | {go - stay:+d} |")
    print()
    for lang, v in sorted(unstated, key=lambda x: x[1]["pmi"]):
        print(f"  {lang} {v['label']:<4} pmi {v['pmi']:+7.2f} rules {'keep' if v['rules_keep'] else 'drop'}  "
              f"{v['key']}={json.dumps(v['value'], ensure_ascii=False)[:60]}  ({v['evidence'][:70]})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path)
    ap.add_argument("--eval", type=Path)
    ap.add_argument("--output", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--table", type=Path, nargs="*")
    ap.add_argument("--ids", choices=["even", "odd"])
    ap.add_argument("--grid", default="-2,-1,0,1,2,3,4")
    args = ap.parse_args(argv)
    if args.table:
        table(args.table, args.ids, [float(x) for x in args.grid.split(",")])
        return
    if not (args.data and args.eval and args.output):
        sys.exit("--data, --eval and --output are needed (or --table)")
    measure(args.data, args.eval, args.output, args.threads)


if __name__ == "__main__":
    main()
