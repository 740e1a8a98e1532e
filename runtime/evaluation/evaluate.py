"""``callmaybe eval``: run a data set with expected answers and score every call (rules in :mod:`.scoring`)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from ...core.catalog import catalog_fingerprint, load_catalog, parse_catalog
from ...core.errors import CatalogError, InputError
from ...core.jsonio import check_output_path, loads, read_json, read_requests, read_text, write_json
from ...core.messages import progress
from ..answering.runner import Answerer, answer_all
from .scoring import bfcl_calls_match, bfcl_match, bfcl_parallel_match, public_match
from ..decoding.profile import Profile
from ..answering.session import Compile, RunConfig, Runtime
from ..decoding.turn import TurnResult

_TRAILING_NUMBER = re.compile(r"(\d+)$")


def id_number(case_id: object, position: int) -> int:
    """The number a case's id ends with (``"simple_python_17"`` -> 17, ``4`` -> 4), else its ``position``."""
    m = _TRAILING_NUMBER.search(str(case_id))
    return int(m.group(1)) if m else position


#: A text answer (a declined request) is stopped after this many tokens: only "no call" is graded.
DECLINE_TOKENS = 16


def select_ids(cases: list[dict], ids: str | None) -> list[dict]:
    """The cases whose :func:`id_number` is even (``ids="even"``) or odd (``"odd"``); all for None. Splitting a
    data set this way gives two halves: tune a rule on one, report the other. Raises InputError for another
    value."""
    if ids is None:
        return cases
    if ids not in ("even", "odd"):
        raise InputError(f"ids must be even or odd, got {ids!r}")
    parity = 0 if ids == "even" else 1
    return [c for i, c in enumerate(cases) if id_number(c["id"], i) % 2 == parity]


def evaluation_cases(data: Path, limit: int | None, ids: str | None = None) -> list[dict]:
    """The cases of a data set with expected answers: a folder like ``../shared/data/public`` (catalog,
    tests, ``expected.json``) or a BFCL ``cases.jsonl`` (each case with its own catalog); with ``ids``, only
    the even or odd ones (:func:`select_ids`), then the first ``limit``.

    Each case: ``{"id", "prompt", "functions", "expected", "rules"}`` with rules "public", "bfcl" or
    "bfcl_parallel" (``expected`` holds ``{"calls": [...]}``: BFCL parallel); a BFCL case whose own catalog
    is malformed also holds its ``error`` (the case is not answered). Raises InputError for a data set it
    cannot read.
    """
    cases = []
    if data.is_dir():
        functions = load_catalog(data / "functions_definition.json")
        tests = read_requests(data / "function_calling_tests.json")
        expected = read_json(data / "expected.json")
        if not isinstance(expected, list) or len(expected) != len(tests):
            raise InputError(f"{data / 'expected.json'}: expected one answer per test ({len(tests)})")
        for i, (t, e) in enumerate(zip(tests, expected)):
            cases.append({"id": t.get("id", i), "prompt": t.get("prompt"), "functions": functions,
                          "expected": e, "rules": "public"})
    elif data.suffix == ".jsonl":
        lines = read_text(data).split("\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                case = loads(line)
            except ValueError as exc:  # json.JSONDecodeError, NaN, 1e400
                raise InputError(f"{data}:{n}: malformed JSON: {exc}") from None
            expected = case.get("expected") if isinstance(case, dict) else None
            rules = "bfcl_parallel" if isinstance(expected, dict) and "calls" in expected else "bfcl"
            calls = expected.get("calls") if rules == "bfcl_parallel" else [expected]
            if calls == []:
                rules = "irrelevance"  # no function fits: the right answer is no call
            elif not (isinstance(calls, list) and calls and all(
                    isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("parameters"), dict)
                    for c in calls)):
                raise InputError(f"{data}:{n}: a case needs \"prompt\", \"tools\" or \"functions\", and "
                                 "\"expected\": {\"name\", \"parameters\"} or {\"calls\": [{\"name\", "
                                 "\"parameters\"}, ...]}")
            catalog = case.get("tools") or case.get("functions")
            entry = {"id": case.get("id", n), "prompt": case.get("prompt"), "functions": [],
                     "expected": case["expected"], "rules": rules, "messages": _messages(case, data, n),
                     "lang": case.get("lang")}
            try:
                entry["functions"] = parse_catalog(catalog, f"{data}:{n}")
            except CatalogError as exc:  # this case's catalog only: an error entry, the others are answered
                entry["error"] = str(exc)
            cases.append(entry)
    elif not data.exists():
        raise InputError(f"{data}: not found")
    else:
        raise InputError(f"{data}: expected a folder with expected.json or a cases .jsonl file")
    cases = select_ids(cases, ids)
    return cases[:limit] if limit else cases


def _messages(case: dict, data: Path, line: int) -> list[dict] | None:
    """A case's ``messages`` (a system message, earlier turns, tool results) when it has them, else None (its
    ``prompt`` is the one user message). Raises InputError when they are not a list of message objects."""
    messages = case.get("messages")
    if messages is None:
        return None
    if not (isinstance(messages, list) and messages and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                             for m in messages)):
        raise InputError(f"{data}:{line}: \"messages\" must be a list of {{\"role\", \"content\"}} objects")
    return messages


def _request(case: dict) -> dict:
    """The request entry of a case: its prompt, and its messages when it has them."""
    return {"prompt": case["prompt"], **({"messages": case["messages"]} if case.get("messages") else {})}


def language(case: dict) -> str:
    """A case's language for the decline counts: its ``lang`` field, else "en" when every letter of its prompt
    is ASCII and "other" when one is not (a rough split, for reports only: nothing decides by it)."""
    if isinstance(case.get("lang"), str):
        return case["lang"]
    return "en" if all(ord(c) < 128 for c in str(case.get("prompt") or "") if c.isalpha()) else "other"


def count_declines(totals: dict, case: dict, entry: dict) -> None:
    """Count a scored entry in ``totals["declines"]``: per language (:func:`language`) and kind of case
    ("call": one is due; "irrelevance": none is), ``[declined, cases]``."""
    declined = not (entry.get("calls") if isinstance(entry.get("calls"), list) else entry.get("name"))
    kind = "irrelevance" if case["rules"] == "irrelevance" else "call"
    cell = totals.setdefault("declines", {}).setdefault(language(case), {}).setdefault(kind, [0, 0])
    cell[0] += declined
    cell[1] += 1


def score(case: dict, call: dict) -> dict[str, bool]:
    """``right_function`` and ``right_arguments`` of a result entry ``call`` under the case's rules
    (:mod:`.scoring`), and for a BFCL parallel case ``one_right_call``: a call passes one of the expected calls.

    An entry with a ``calls`` list (``--parallel-calls``) is graded whole: against a BFCL parallel case by
    :func:`~.scoring.bfcl_calls_match` (one call per expected call, order-free), against any other case as
    its only call when it made exactly one. A declined entry (no call) is right only for an irrelevance case,
    where ``declined`` counts it and any call is wrong."""
    calls = call["calls"] if isinstance(call.get("calls"), list) else (
        [] if call.get("name") is None else [call])
    if case["rules"] == "irrelevance":
        return {"right_function": not calls, "right_arguments": not calls, "declined": not calls}
    if not calls:
        out = {"right_function": False, "right_arguments": False}
        return {**out, "one_right_call": False} if case["rules"] == "bfcl_parallel" else out
    if case["rules"] == "bfcl_parallel" and "calls" in call:
        wanted = case["expected"]["calls"]
        return {"right_function": all(any(c.get("name") == w["name"] for w in wanted) for c in calls),
                "right_arguments": bfcl_calls_match(calls, wanted),
                "one_right_call": any(bfcl_match(c, w)[1] for c in calls for w in wanted)}
    if len(calls) != 1:
        return {"right_function": False, "right_arguments": False}
    call = calls[0]
    if case["rules"] == "bfcl_parallel":
        fn_ok, args_ok, one_ok = bfcl_parallel_match(call, case["expected"])
        return {"right_function": fn_ok, "right_arguments": args_ok, "one_right_call": one_ok}
    match = public_match if case["rules"] == "public" else bfcl_match
    fn_ok, args_ok = match(call, case["expected"])
    return {"right_function": fn_ok, "right_arguments": args_ok}


def compare_grounding(case: dict, call: dict, model_parameters: dict, scores: dict[str, bool],
                      totals: dict) -> dict:
    """Score the same generation without grounding (``model_parameters``: the arguments as decoded, what
    ``--keep-unstated`` answers) and count in ``totals`` for each score: ``without_grounding`` (right
    without), ``grounding_won`` (right with grounding only) and ``grounding_lost`` (right without only).
    Returns the row's ``{"parameters", <score>: bool, ...}``."""
    return {"parameters": model_parameters,
            **compare_entries(case, {**call, "parameters": model_parameters}, scores, totals)}


def compare_entries(case: dict, without: dict, scores: dict[str, bool], totals: dict) -> dict[str, bool]:
    """Score ``without`` (a result entry as it would be without grounding) and count, for each score, in
    ``totals``: ``without_grounding``, ``grounding_won`` and ``grounding_lost`` (see :func:`compare_grounding`).
    Returns its scores."""
    before = score(case, without)
    for key, ok in before.items():
        for name, add in (("without_grounding", ok), ("grounding_won", scores[key] and not ok),
                          ("grounding_lost", ok and not scores[key])):
            totals.setdefault(name, {}).setdefault(key, 0)
            totals[name][key] += add
    return before


def case_answers(runtime: Runtime, config: RunConfig, cases: list[dict], engine=None,
                 ) -> Iterator[tuple[int, dict, Any]]:
    """Answer evaluation cases (:func:`evaluation_cases`' entries; only ``functions``, ``prompt``,
    ``messages`` and ``rules`` are read) with ``runtime``: yields (position in ``cases``, result entry, Generation, TurnResult
    or None) as each is answered. Each catalog's answerer is made once (at most 9 kept); the public set's
    index is found or cached on disk, a BFCL case's compiled in memory. Under ``config.turns`` the cases are
    turns decoded by ``engine`` (an :class:`~..answering.engine.Engine` of ``runtime``; None: one made for them), a
    text answer cut to ``config.text_tokens`` (default :data:`DECLINE_TOKENS`); so are cases with ``messages``."""
    answerers: dict[str, Answerer] = {}

    def answerer_for(case: dict) -> Answerer:
        key = catalog_fingerprint(case["functions"])
        if key not in answerers:
            if len(answerers) > 8:
                answerers.clear()  # rows still decoding keep their own answerer
            answerers[key] = runtime.answerer(case["functions"], store=case["rules"] == "public")
        return answerers[key]

    refused: dict[int, str] = {}  # case position -> why its catalog has no index
    answered: list[int] = []  # the position in ``cases`` of each answered item, in order

    def answerable():
        """(case, answerer) of each case whose catalog compiles; the others go to ``refused``."""
        for i, case in enumerate(cases):
            try:
                if "error" in case:
                    raise CatalogError(case["error"])
                answerer = answerer_for(case)
            except CatalogError as exc:  # SchemaError, CompileLimitError: this case only
                refused[i] = str(exc)
                continue
            answered.append(i)
            yield case, answerer

    def mapped(answers):
        """The answers at their cases' positions, then an error entry for each case whose catalog was
        refused (naming the function and the parameter)."""
        for k, entry, gen in answers:
            yield answered[k], entry, gen
        for i, error in refused.items():
            yield i, {"prompt": cases[i]["prompt"], "error": error}, None

    if config.turns or any(c.get("messages") for c in cases):  # each case a turn (:mod:`..answering.choices`): a text
        # answer or several calls allowed, or several messages
        from ..answering.choices import answer_turns
        from ..answering.engine import Engine

        engine = engine if engine is not None else Engine(runtime, config.max_batch, max_queue=max(1, len(cases)))
        return mapped(answer_turns(engine, ((c["functions"], a.index, _request(c)) for c, a in answerable()),
                                   config, text_tokens=config.text_tokens or DECLINE_TOKENS))
    return mapped(answer_all(((a, {"prompt": c["prompt"]}) for c, a in answerable()), config.max_batch))


#: Answers evaluation cases somewhere (a Ray cluster: :func:`callmaybe.scale.batch.ray_case_answers`): given the
#: cases, returns the iterator of :func:`case_answers` and the Profile its answers' time is added to.
CaseAnswering = Callable[[list[dict]], tuple[Iterator[tuple[int, dict, Any]], Profile]]


def evaluate(config: RunConfig, data: Path, limit: int | None, output: Path | None, compile: Compile,
             ids: str | None = None, answering: CaseAnswering | None = None) -> dict:
    """Run a data set with expected answers and return the summary: counts of ``cases``, ``parsed``,
    ``schema_valid``, ``right_function``, ``right_arguments`` (and ``one_right_call`` when there are BFCL
    parallel cases: :func:`score`), and totals of ``seconds``, ``forward_passes``, ``tokens`` and draft tokens
    (``drafted``, ``accepted``: speculation's). ``output``
    gets every case's call ``{"id", "prompt", "name", "parameters"}`` or error, with its scores
    (:func:`score`) and, when grounding ran, what it did to each argument and why (``"grounding"``) and the
    same generation without it (``"without_grounding"``, :func:`compare_grounding`; totals of the same
    names).
    ``ids`` keeps the even or odd cases (:func:`select_ids`). ``answering``: where the cases are answered
    (default: this process, :func:`case_answers`).

    The public set's catalog uses a shipped or cached index; each BFCL case's catalog is compiled in memory
    (never cached on disk). A case whose catalog cannot be read or compiled (a parameter no value satisfies,
    a compile limit) gets an error entry naming the function and the parameter, and the others are answered.
    ``totals["failed"]`` counts the cases with an error entry (those, and the answers that failed).
    ``totals["profile"]`` is the :class:`~..decoding.profile.Profile` of the answers and ``totals["answer_seconds"]``
    their wall time. Raises InputError for a data set it cannot read.
    """
    cases = evaluation_cases(data, limit, ids)
    if output is not None:
        check_output_path(output)
    if answering is None:
        runtime = Runtime(config, compile)
        answers, profile = case_answers(runtime, config, cases), runtime.profile
    else:
        answers, profile = answering(cases)
    t_start = time.perf_counter()
    rows: list[dict | None] = [None] * len(cases)
    totals = {"cases": 0, "parsed": 0, "schema_valid": 0, "right_function": 0, "right_arguments": 0,
              "failed": 0, "seconds": 0.0, "forward_passes": 0, "tokens": 0, "drafted": 0, "accepted": 0}
    with progress(total=len(cases), desc="eval", unit="case") as bar:
        for position, entry, gen in answers:
            bar.update(1)
            case = cases[position]
            totals["cases"] += 1
            row = rows[position] = {"id": case["id"], **entry}
            if isinstance(gen, TurnResult):
                totals["seconds"] += gen.seconds
                totals["tokens"] += gen.completion_tokens
                totals["forward_passes"] += gen.forward_passes
                totals["drafted"] += gen.drafted_tokens
                totals["accepted"] += gen.accepted_tokens
                if any(gen.grounding):
                    row["grounding"] = gen.grounding
                if gen.decision:
                    row["decision"] = gen.decision
            elif gen is not None:
                totals["seconds"] += gen.seconds
                totals["forward_passes"] += gen.forward_passes
                totals["drafted"] += gen.drafted_tokens
                totals["accepted"] += gen.accepted_tokens
                totals["tokens"] += len(gen.tokens)
                if gen.grounding:
                    row["grounding"] = gen.grounding
            if "error" in entry:
                totals["failed"] += 1
                if "not JSON" not in entry["error"]:
                    totals["parsed"] += 1 if gen is not None else 0
                continue
            totals["parsed"] += 1
            totals["schema_valid"] += 1
            count_declines(totals, case, entry)
            scores = score(case, entry)
            for key, ok in scores.items():
                row[key] = ok
                totals[key] = totals.get(key, 0) + ok
            if gen is not None and getattr(gen, "model_parameters", None) is not None:
                row["without_grounding"] = compare_grounding(case, entry, gen.model_parameters, scores, totals)
            elif gen is not None and any(c.model_arguments is not None for c in getattr(gen, "calls", [])):
                decoded = [{"name": c.name, "parameters": c.model_arguments if c.model_arguments is not None
                            else c.arguments} for c in gen.calls]
                without = {"calls": decoded} if "calls" in entry else {**entry, **decoded[0]}
                row["without_grounding"] = {**without, **compare_entries(case, without, scores, totals)}
    if output is not None:
        write_json(output, rows)
    totals["answer_seconds"] = time.perf_counter() - t_start
    totals["profile"] = profile
    return totals
