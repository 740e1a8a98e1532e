"""``callmaybe eval``: run a data set with expected answers and score every call (rules in :mod:`.scoring`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..core.catalog import catalog_fingerprint, load_catalog, parse_catalog
from ..core.errors import InputError
from ..core.jsonio import check_output_path, read_json, read_requests, read_text, write_json
from ..core.messages import progress
from .runner import Answerer, answer_all
from .scoring import bfcl_match, public_match
from .session import Compile, RunConfig, Runtime


def evaluation_cases(data: Path, limit: int | None) -> list[dict]:
    """The cases of a data set with expected answers: a folder like ``../shared/data/public`` (catalog,
    tests, ``expected.json``) or a BFCL ``cases.jsonl`` (each case with its own catalog).

    Each case: ``{"id", "prompt", "functions", "expected", "rules"}`` with rules "public" or "bfcl".
    Raises InputError for a data set it cannot read.
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
                case = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{data}:{n}: malformed JSON: {exc}") from None
            expected = case.get("expected") if isinstance(case, dict) else None
            if not (isinstance(expected, dict) and isinstance(expected.get("name"), str)
                    and isinstance(expected.get("parameters"), dict)):
                raise InputError(f"{data}:{n}: a case needs \"prompt\", \"tools\" or \"functions\", and "
                                 "\"expected\": {\"name\", \"parameters\"}")
            catalog = case.get("tools") or case.get("functions")
            cases.append({"id": case.get("id", n), "prompt": case.get("prompt"),
                          "functions": parse_catalog(catalog, f"{data}:{n}"), "expected": case["expected"],
                          "rules": "bfcl"})
    elif not data.exists():
        raise InputError(f"{data}: not found")
    else:
        raise InputError(f"{data}: expected a folder with expected.json or a cases .jsonl file")
    return cases[:limit] if limit else cases


def evaluate(config: RunConfig, data: Path, limit: int | None, output: Path | None, compile: Compile) -> dict:
    """Run a data set with expected answers and return the summary: counts of ``cases``, ``parsed``,
    ``schema_valid``, ``right_function``, ``right_arguments``, and totals of ``seconds``, ``forward_passes``
    and ``tokens``. ``output`` gets every case's call ``{"id", "prompt", "name", "parameters"}`` or error.

    The public set's catalog uses a shipped or cached index; each BFCL case's catalog is compiled in memory
    (never cached on disk). ``totals["profile"]`` is the :class:`~.profile.Profile` of the answers and
    ``totals["answer_seconds"]`` their wall time. Raises InputError for a data set it cannot read.
    """
    cases = evaluation_cases(data, limit)
    if output is not None:
        check_output_path(output)
    runtime = Runtime(config, compile)
    t_start = time.perf_counter()
    answerers: dict[str, Answerer] = {}

    def answerer_for(case: dict) -> Answerer:
        key = catalog_fingerprint(case["functions"])
        if key not in answerers:
            if len(answerers) > 8:
                answerers.clear()  # rows still decoding keep their own answerer
            answerers[key] = runtime.answerer(case["functions"], store=case["rules"] == "public")
        return answerers[key]

    items = ((answerer_for(case), {"prompt": case["prompt"]}) for case in cases)
    answers = answer_all(items, config.max_batch)
    rows: list[dict | None] = [None] * len(cases)
    totals = {"cases": 0, "parsed": 0, "schema_valid": 0, "right_function": 0, "right_arguments": 0,
              "seconds": 0.0, "forward_passes": 0, "tokens": 0}
    with progress(total=len(cases), desc="eval", unit="case") as bar:
        for position, entry, gen in answers:
            bar.update(1)
            case = cases[position]
            totals["cases"] += 1
            rows[position] = {"id": case["id"], **entry}
            if gen is not None:
                totals["seconds"] += gen.seconds
                totals["forward_passes"] += gen.forward_passes
                totals["tokens"] += len(gen.tokens)
            if "error" in entry:
                if "not JSON" not in entry["error"]:
                    totals["parsed"] += 1 if gen is not None else 0
                continue
            totals["parsed"] += 1
            totals["schema_valid"] += 1
            match = public_match if case["rules"] == "public" else bfcl_match
            fn_ok, args_ok = match(entry, case["expected"])
            totals["right_function"] += fn_ok
            totals["right_arguments"] += args_ok
    if output is not None:
        write_json(output, rows)
    totals["answer_seconds"] = time.perf_counter() - t_start
    totals["profile"] = runtime.profile
    return totals
