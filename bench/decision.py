"""Measure the call-or-answer decision (``runtime/policy/decision.py``) on data sets with expected answers.

For each case: one forward pass over the chat (the catalog in the call format's prompt, the case's messages)
up to the assistant's first token, and the model's probability of starting a call there. Writes one JSON line
per case (``--output``) and prints, for a range of thresholds on the log-odds, how many cases that need a
call and how many that need none would be declined, per data set, for the even- and odd-numbered ids and
for requests in English and in other languages.

    python bench/decision.py ../shared/data/bfcl_live/{simple,multiple,irrelevance,messages}.jsonl \\
        --output /tmp/decision.jsonl [--ids even] [--call-format tools] [--model M]
    python bench/decision.py --table /tmp/decision.jsonl        # the table again, no model
    python bench/decision.py DATA... --channel --output F && python bench/decision.py --table F --auc
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from callmaybe.runtime.policy.decision import CALL_LOG_ODDS_MIN, call_start_ids, decide
from callmaybe.runtime.evaluation.evaluate import evaluation_cases, id_number, language
from callmaybe.runtime.decoding.prompt import chat_ids, common_length

#: Content-free requests whose verdict measures a catalog's own bias toward "yes" (contextual calibration,
#: Zhao et al., "Calibrate Before Use", ICML 2021).
NULL_REQUESTS = {"empty": "", "na": "N/A"}
#: A stand-in request whose tokens, compared with the real request's, mark where the request sits in a prompt.
SENTINEL = "zqxj"
THRESHOLDS = [-8, -6, -5, -4, -3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 2, 3]


def request_span(tok, functions, request: str, call_format: str, tool_choice: str) -> tuple[list[int], int, int]:
    """The prompt's token ids for the one-message chat ``request`` and the span ``[start, end)`` of its request's
    tokens (where it differs from the same chat with :data:`SENTINEL` as the request)."""
    a = chat_ids(tok, functions, [{"role": "user", "content": request}], call_format, tool_choice=tool_choice)
    b = chat_ids(tok, functions, [{"role": "user", "content": SENTINEL}], call_format, tool_choice=tool_choice)
    start = common_length(a, b)
    tail = min(common_length(a[::-1], b[::-1]), min(len(a), len(b)) - start)
    return a, start, len(a) - tail


def channel(model, tok, functions, request: str, call_format: str) -> float:
    """The request's pointwise mutual information with the catalog (nats), the noisy-channel score of Min et
    al., "Noisy Channel Language Model Prompting for Few-Shot Text Classification" (ACL 2022): log p(request
    | the ``auto`` prompt with the catalog) - log p(request | the chat without tools). Two passes."""
    from callmaybe.runtime.policy.relevance import answer_logprob

    ids, start, end = request_span(tok, functions, request, call_format, "auto")
    bare, bare_start, bare_end = request_span(tok, [], request, call_format, "none")
    return (answer_logprob(model, ids[:start], ids[start:end])
            - answer_logprob(model, bare[:bare_start], bare[bare_start:bare_end]))


def measure(paths: list[Path], output: Path, model_name: str, call_format: str, ids: str | None,
            limit: int | None, system: str | None = None, threads: int = 1, verdict: bool = True,
            calibrate: bool = False, with_channel: bool = False) -> None:
    from callmaybe.runtime.model.load import load_model
    from callmaybe.runtime.answering.session import model_vocabulary
    from callmaybe.runtime.answering.turns import Vocab

    loaded = load_model(model_name, threads=threads)
    tok = loaded.tokenizer
    vocabulary = model_vocabulary(model_name, loaded)
    vocab = Vocab(vocabulary.token_bytes, vocabulary.eos_ids, loaded.vocab_size, tok, call_format)
    marker = vocab.marker if vocab.marker is not None else (
        tok.convert_tokens_to_ids("<tool_call>") if "<tool_call>" in tok.get_vocab() else None)
    starts = call_start_ids(vocabulary.token_bytes, marker)
    kinds = {"p_marker": torch.tensor([marker] if marker is not None else [], dtype=torch.long),
             "p_brace": call_start_ids([b if b is not None and b.lstrip(b" \t\r\n").startswith(b"{") else None
                                        for b in vocabulary.token_bytes], None),
             "p_fence": call_start_ids([b if b is not None and b.lstrip(b" \t\r\n").startswith(b"```") else None
                                        for b in vocabulary.token_bytes], None)}
    allowed = vocab.no_call.clone()
    if marker is not None:
        allowed[marker] = 0.0
    done = set()
    if output.exists():
        done = {(r["set"], r["id"]) for r in map(json.loads, output.read_text().splitlines())}
    with output.open("a") as out:
        for path in paths:
            cases = evaluation_cases(path, limit, ids)
            for case in cases:
                if (path.stem, case["id"]) in done:
                    continue
                messages = case.get("messages") or [{"role": "user", "content": case["prompt"]}]
                if system and messages[0].get("role") != "system":
                    messages = [{"role": "system", "content": system}, *messages]
                t0 = time.perf_counter()
                prompt = chat_ids(tok, case["functions"], messages, call_format, tool_choice="auto")
                with torch.inference_mode():
                    logits = loaded.model(input_ids=torch.tensor([prompt]), use_cache=False, logits_to_keep=1).logits[0, -1]
                d = decide(logits, starts, allowed=allowed)
                top = int(torch.argmax(logits + allowed))
                probs = torch.softmax(logits.float() + allowed, -1)
                parts = {name: float(probs[ids].sum()) for name, ids in kinds.items()}
                row = {"set": path.stem, "id": case["id"], "need_call": case["rules"] != "irrelevance",
                       "english": language(case) == "en", "lang": language(case), "functions": len(case["functions"]),
                       "p_call": d.p_call, "log_odds": d.log_odds, **parts, "top": tok.decode([top]),
                       "tokens": len(prompt), "seconds": round(time.perf_counter() - t0, 2)}
                if verdict:
                    from callmaybe.runtime.policy.relevance import relevance
                    from callmaybe.runtime.answering.turns import request_text

                    judged = relevance(loaded.model, tok, case["functions"], request_text(messages))
                    row["verdict"] = judged.log_odds
                    if calibrate:
                        from callmaybe.runtime.policy.relevance import question, yes_no_log_odds

                        for name, text in NULL_REQUESTS.items():
                            row[f"verdict_{name}"] = yes_no_log_odds(loaded.model, tok,
                                                                     question(case["functions"], text))
                    row["seconds"] = round(time.perf_counter() - t0, 2)
                if with_channel and case.get("prompt") and not case.get("messages"):
                    row["channel"] = channel(loaded.model, tok, case["functions"], case["prompt"], call_format)
                    row["seconds"] = round(time.perf_counter() - t0, 2)
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                print(f"{row['set']:12} {str(row['id'])[:28]:28} call={row['need_call']!s:5} "
                      f"lo={d.log_odds:+6.2f} v={row.get('verdict', 0):+6.2f} top={row['top']!r:14} "
                      f"{row['tokens']}t {row['seconds']}s",
                      file=sys.stderr)


def table(output: Path) -> None:
    rows = load_rows(output)
    groups: dict[str, list[dict]] = {}
    for r in rows:
        half = "even" if id_number(r["id"], 0) % 2 == 0 else "odd"
        groups.setdefault(f"{r['set']} {half}", []).append(r)
        groups.setdefault(f"{r['set']} all", []).append(r)
        lang = "en" if r["english"] else "other"
        groups.setdefault(f"{'call' if r['need_call'] else 'no call'} {lang}", []).append(r)
    print("declined (%) per threshold on the log-odds; a case that needs a call should not be declined")
    print(f"{'group':22} {'n':>4} " + " ".join(f"{t:>6}" for t in THRESHOLDS))
    for name in sorted(groups):
        g = groups[name]
        cells = [100.0 * sum(r["log_odds"] < t for r in g) / len(g) for t in THRESHOLDS]
        print(f"{name:22} {len(g):4} " + " ".join(f"{c:6.1f}" for c in cells))


def declined(r: dict, first: float, verdict: float | None) -> bool:
    """Whether the rule (first-token log-odds at least ``first``, then the verdict at least ``verdict``; None:
    no verdict) declines case row ``r``."""
    return r["log_odds"] < first or (verdict is not None and r.get("verdict", 50.0) < verdict)


def rates(group: list[dict], first: float, verdict: float | None) -> tuple[float, float, int, int]:
    """(percent declined of the rows needing a call, percent declined of those needing none, their counts)."""
    calls = [r for r in group if r["need_call"]]
    none = [r for r in group if not r["need_call"]]
    pct = lambda g: 100.0 * sum(declined(r, first, verdict) for r in g) / len(g) if g else 0.0  # noqa: E731
    return pct(calls), pct(none), len(calls), len(none)


def load_rows(output: Path) -> list[dict]:
    """The case rows of an ``--output`` file."""
    return [json.loads(line) for line in output.read_text().splitlines() if line.strip()]


def even_id(r: dict) -> bool:
    return id_number(r["id"], 0) % 2 == 0


def fit(output: Path, max_declined_calls: float = 3.0) -> tuple[float, float | None]:
    """The pair of thresholds that declines the most cases needing no call while declining at most
    ``max_declined_calls`` percent of those needing one, on the even-numbered cases; prints its figures on
    both halves and per language."""
    rows = load_rows(output)
    even = [r for r in rows if even_id(r)]
    firsts = [x / 4 for x in range(-16, 17)]
    verdicts = [None] + [x / 4 for x in range(-12, 13)] if any("verdict" in r for r in rows) else [None]
    scored = [((f, v), rates(even, f, v)) for f in firsts for v in verdicts]
    allowed = [(fv, (c, n)) for fv, (c, n, _, _) in scored if c <= max_declined_calls]
    best = max(allowed, key=lambda item: (item[1][1], -item[1][0], item[0][0]), default=((firsts[0], None),))[0]
    print(f"fitted on the even cases: first-token log-odds >= {best[0]}, verdict log-odds >= {best[1]}")
    report(rows, *best)
    return best


def report(rows: list[dict], first: float, verdict: float | None) -> None:
    """Print the declines of the rule with these thresholds: per half, language and data set."""
    print(f"thresholds: first-token log-odds >= {first}, verdict log-odds >= {verdict}")
    halves = {"even": [r for r in rows if even_id(r)], "odd": [r for r in rows if not even_id(r)], "all": rows}
    for lang in (True, False):
        halves["English" if lang else "other languages"] = [r for r in rows if r["english"] == lang]
    for s in sorted({r["set"] for r in rows}):
        halves[s] = [r for r in rows if r["set"] == s]
    for lang in sorted({r.get("lang", "") for r in rows} - {""}):
        halves[f"lang {lang}"] = [r for r in rows if r.get("lang") == lang]
    for name, group in halves.items():
        c, n, nc, nn = rates(group, first, verdict)
        print(f"  {name:18} declined: {c:5.1f}% of {nc} needing a call, {n:5.1f}% of {nn} needing none")


def auc(rows: list[dict], key: str) -> float:
    """The probability that a case needing a call scores above one needing none (ties count half)."""
    calls = [r[key] for r in rows if r["need_call"] and key in r]
    none = [r[key] for r in rows if not r["need_call"] and key in r]
    if not calls or not none:
        return float("nan")
    return sum((c > n) + 0.5 * (c == n) for c in calls for n in none) / (len(calls) * len(none))


def auc_table(rows: list[dict]) -> None:
    """AUC of each recorded score (first-token log-odds, verdict, channel) on the even and odd cases."""
    halves = {"even": [r for r in rows if even_id(r)], "odd": [r for r in rows if not even_id(r)]}
    for key in ("log_odds", "verdict", "channel"):
        cells = [f"{name} {auc(group, key):.3f}" for name, group in halves.items()]
        print(f"AUC {key:10} " + "  ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="*", type=Path)
    ap.add_argument("--output", type=Path, default=Path("/tmp/decision.jsonl"))
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--call-format", default="tools", choices=["tools", "plain"])
    ap.add_argument("--ids", choices=["even", "odd"])
    ap.add_argument("--limit", type=int)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: best on a shared machine)")
    ap.add_argument("--fit", action="store_true", help="with --table: fit the thresholds on the even cases")
    ap.add_argument("--no-verdict", action="store_true", help="skip the relevance verdict's pass")
    ap.add_argument("--calibrate", action="store_true",
                    help="also the verdict of content-free requests (NULL_REQUESTS) for each case's catalog")
    ap.add_argument("--channel", action="store_true",
                    help="also the request's PMI with the catalog (channel(); one-message cases, two passes)")
    ap.add_argument("--auc", action="store_true", help="with --table: the AUC of each score per half")
    ap.add_argument("--system", help="a system message for cases that have none")
    ap.add_argument("--table", type=Path, help="print the table of an earlier --output and stop")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        if args.auc:
            auc_table(load_rows(args.table))
        if args.fit:
            fit(args.table)
        else:
            from callmaybe.runtime.policy.relevance import VERDICT_LOG_ODDS_MIN

            report(load_rows(args.table), CALL_LOG_ODDS_MIN, VERDICT_LOG_ODDS_MIN)
        return
    measure(args.data, args.output, args.model, args.call_format, args.ids, args.limit, args.system, args.threads,
            not args.no_verdict, args.calibrate, args.channel)
    table(args.output)
    fit(args.output)


if __name__ == "__main__":
    main()
