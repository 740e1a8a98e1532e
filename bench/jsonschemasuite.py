"""Grammar correctness against the official JSON Schema Test Suite (../shared/data/json_schema_test_suite,
folders draft2020-12/ and draft7/, required tests only).

Each file of the suite is a list of groups, one schema and its labelled tests. For every group: compile the
schema with :func:`callmaybe.compiler.grammar.schema_dfa` (time limit per group, default 20 s), then write
each test's data in the canonical layout and ask the byte DFA whether it accepts it. Each test gets one class:

* agree: a valid instance accepted, an invalid one rejected;
* invalid accepted, named by compile: every jsonschema error on it comes from a keyword the compiler
  reported as "not enforced" (checked after generation); not named: anything else;
* valid rejected, stated design: an object with keys out of declaration order, an object key the schema
  never declares (objects are closed) where the schema opens no object by ``patternProperties`` or an
  ``additionalProperties`` schema, a whole-number float for an integer; other: anything else;
* refused: the compiler refused the schema (SchemaError), or ran past the time limit; every test of the
  group counts. A group whose schema references a remote URL that the compiler refuses is refused as
  "remote reference". ``refRemote.json`` needs a server and is skipped;
* set aside (not run): the suite's label contradicts the oracle only because the oracle asserts ``format``,
  as the grammar and the check after generation do (jsonschema without the format checker agrees with the
  label: the 2020-12 tests "invalid ... string is only an annotation by default"); whatever the grammar
  says of these, they are counted apart.

The oracle is jsonschema with the validator the schema names, else the folder's draft (2020-12 or 7), and
that validator's format checker. Agreement = agree / tests run (refused tests included, set aside tests
not); the total line also gives it over every test. Prints one table per
draft (a row per keyword file and a total), the disagreements not excused and the refusal reasons. Usage::

    python bench/jsonschemasuite.py [--draft 2020-12|7|both] [--file NAME ...] [--timeout S] [--show N]
                                    [--json OUT]

``--json OUT`` writes every test's verdict (one JSON object a line inside one array) for diffing runs.
``CALLMAYBE_SHARED`` overrides where ../shared is.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

import jsonschema

from callmaybe.compiler.grammar import schema_dfa
from callmaybe.compiler.automata.lexical import canonical
from callmaybe.core.errors import CallmaybeError

from _schema_checks import (declared_order, integral_floats, keys_out_of_order,  # bench/ is on sys.path
                            opens_objects, undeclared_keys)

SHARED = Path(os.environ.get("CALLMAYBE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SUITE = SHARED / "data" / "json_schema_test_suite"
DRAFTS = {"2020-12": ("draft2020-12", jsonschema.Draft202012Validator),
          "7": ("draft7", jsonschema.Draft7Validator)}
REMOTE_FILES = {"refRemote.json"}
#: The ``$schema`` given to a group's schema that declares none (the folder says its draft).
DECLARE = {"7": "http://json-schema.org/draft-07/schema#"}

AGREE = "agree"
INVALID_NAMED = "invalid accepted: named"
INVALID_UNNAMED = "invalid accepted: not named"
VALID_DESIGN = "valid rejected: design"
VALID_OTHER = "valid rejected: other"
REFUSED = "refused"
SET_ASIDE = "set aside"
CLASSES = (AGREE, INVALID_NAMED, INVALID_UNNAMED, VALID_DESIGN, VALID_OTHER, REFUSED, SET_ASIDE)


@dataclass
class Verdict:
    """One test of the suite: ``accepted`` is None when the group was refused; ``cls`` is one of
    :data:`CLASSES`; ``reason`` says why (the refusal reason, the design rule, the jsonschema keywords)."""

    draft: str
    file: str
    group_index: int
    group: str
    test: str
    valid: bool
    accepted: bool | None
    cls: str
    reason: str = ""


class _Timeout(BaseException):
    """Past the group's time limit (a BaseException: the compiler catches Exception in places)."""


def _alarm(signum, frame):
    raise _Timeout()


def remote_refs(schema: Any) -> list[str]:
    """The ``$ref``/``$dynamicRef`` targets of ``schema`` (resolved against the ``$id``s above them) that
    are http(s) URLs no ``$id`` in the document names."""
    ids: set[str] = set()
    refs: list[str] = []

    def walk(node, base):
        if isinstance(node, dict):
            if isinstance(node.get("$id"), str):
                base = urljoin(base, node["$id"])
                ids.add(urldefrag(base).url)
            for key in ("$ref", "$dynamicRef"):
                if isinstance(node.get(key), str):
                    refs.append(urljoin(base, node[key]))
            for key, value in node.items():
                if key not in ("enum", "const", "examples", "default"):
                    walk(value, base)
        elif isinstance(node, list):
            for value in node:
                walk(value, base)

    walk(schema, "")
    return [r for r in refs if urldefrag(r).url.startswith("http") and urldefrag(r).url not in ids]


def refusal_reason(exc: BaseException, name: str) -> str:
    """The first line of a refusal message, less the ``schema 'name'[, parameter 'p' | at '#/...']: ``
    prefix (so that equal reasons group together)."""
    lines = str(exc).splitlines() or [""]
    line = re.sub(rf"^schema '{re.escape(name)}'(?:, parameter '.*?'| at '.*?')?: ", "", lines[0])
    return line or type(exc).__name__


def reason_kind(reason: str) -> str:
    """``reason`` with its quoted names (``'node'``) and parenthesized numbers (``(2.0, None)``) blanked
    out and cut to 120 characters, so that refusals of one kind count together."""
    return re.sub(r"\([^()]*\d[^()]*\)", "(…)", re.sub(r"'[^']*'", "'…'", reason))[:120]


def design_reason(data: Any, schema: Any) -> str:
    """The stated design rule a rejected valid instance breaks ("" for none): keys out of the schema's
    declaration order, an undeclared key in a schema that opens no object, a whole-number float."""
    order = declared_order(schema)
    if keys_out_of_order(data, order):
        return "keys out of declaration order"
    if undeclared_keys(data, order) and not opens_objects(schema):
        return "undeclared key (objects are closed)"
    if integral_floats(data):
        return "whole-number float for an integer"
    return ""


def _error_keywords(validator, data: Any) -> tuple[list[str], str]:
    """The keywords of jsonschema's errors on ``data`` (an empty list and a note when it cannot tell)."""
    try:
        return [str(e.validator) if e.validator is not None else "false schema"
                for e in validator.iter_errors(data)], ""
    except Exception as exc:  # an unresolvable reference, for one
        return [], f"jsonschema failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]


def _oracle(schema: Any, draft: str, formats: bool = True):
    """jsonschema's validator of ``schema`` (the one its ``$schema`` names, else ``draft``'s), with its format
    checker unless ``formats`` is False; None when jsonschema cannot build it."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=DRAFTS[draft][1])
        return cls(schema, format_checker=cls.FORMAT_CHECKER if formats else None)
    except Exception:
        return None


def _told(oracle, data: Any) -> bool | None:
    """The oracle's verdict on ``data``; None when it has none (no oracle, or an unresolvable reference)."""
    if oracle is None:
        return None
    try:
        return bool(oracle.is_valid(data))
    except Exception:
        return None


def evaluate_group(group: dict, draft: str = "2020-12", file: str = "", index: int = 0,
                   timeout: float = 20.0) -> list[Verdict]:
    """The verdicts of one suite group ``{"description", "schema", "tests"}`` read as ``draft`` ("2020-12"
    or "7"): compile the schema (within ``timeout`` seconds; 0 for none), check each test's canonical text
    on the DFA and classify it (see the module docstring)."""
    schema, tests = group["schema"], group["tests"]
    if draft in DECLARE and isinstance(schema, dict) and "$schema" not in schema:
        schema = {"$schema": DECLARE[draft], **schema}  # as a user of that draft declares it
    name = f"{Path(file).stem or 'group'}#{index}"

    def verdict(test, accepted, cls, reason=""):
        return Verdict(draft, file, index, group.get("description", ""), test.get("description", ""),
                       bool(test["valid"]), accepted, cls, reason)

    reason = None
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        dfa, notes = schema_dfa(schema, name=name, empty_ok=True)
        accepted = [dfa.accepts(canonical(t["data"]).encode("utf-8")) for t in tests]
    except _Timeout:
        reason = "timeout"
    except CallmaybeError as exc:
        reason = "remote reference" if remote_refs(schema) else refusal_reason(exc, name)
    except RecursionError:
        reason = "CRASH RecursionError"
    except Exception as exc:  # a crash: must never happen, shown among the refusal reasons
        reason = f"CRASH {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if reason is not None:
        return [verdict(t, None, REFUSED, reason) for t in tests]

    not_enforced = {n.keyword for n in notes if n.kind == "not enforced"}
    validator = None
    out = []
    oracle, annotating = _oracle(schema, draft), _oracle(schema, draft, formats=False)
    for test, acc in zip(tests, accepted):
        told = _told(oracle, test["data"])
        if told is not None and told != bool(test["valid"]) and _told(annotating, test["data"]) == test["valid"]:
            out.append(verdict(test, acc, SET_ASIDE, f"the oracle (formats asserted) says valid={told}"))
        elif acc == bool(test["valid"]):
            out.append(verdict(test, acc, AGREE))
        elif acc:  # an invalid instance accepted
            if validator is None:
                default = DRAFTS[draft][1]
                cls = jsonschema.validators.validator_for(schema, default=default)
                validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
            keywords, trouble = _error_keywords(validator, test["data"])
            named = bool(keywords) and all(k in not_enforced for k in keywords)
            why = trouble or ", ".join(sorted(set(keywords))) or "jsonschema finds no error"
            out.append(verdict(test, acc, INVALID_NAMED if named else INVALID_UNNAMED, why))
        else:  # a valid instance rejected
            why = design_reason(test["data"], schema)
            out.append(verdict(test, acc, VALID_DESIGN if why else VALID_OTHER, why))
    return out


def suite_files(draft: str, names: list[str] | None = None) -> list[Path]:
    """The files of ``draft``'s folder, sorted; only those ``names`` lists (with or without ``.json``)."""
    files = sorted((SUITE / DRAFTS[draft][0]).glob("*.json"))
    if names:
        wanted = {n if n.endswith(".json") else n + ".json" for n in names}
        files = [f for f in files if f.name in wanted]
    return files


def run_draft(draft: str, names: list[str] | None = None, timeout: float = 20.0,
              progress: bool = True) -> tuple[list[Verdict], collections.Counter]:
    """Every verdict of ``draft`` (files ``names``, or all), and the skipped counts ("groups", "tests")."""
    verdicts: list[Verdict] = []
    skipped = collections.Counter()
    for path in suite_files(draft, names):
        groups = json.loads(path.read_text(encoding="utf-8"))
        if path.name in REMOTE_FILES:
            skipped["groups"] += len(groups)
            skipped["tests"] += sum(len(g["tests"]) for g in groups)
            continue
        t = time.perf_counter()
        for i, group in enumerate(groups):
            verdicts.extend(evaluate_group(group, draft, path.name, i, timeout))
        if progress:
            print(f"  draft {draft}: {path.name} ({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)
    return verdicts, skipped


def _row(label: str, counts: collections.Counter) -> str:
    run = sum(n for cls, n in counts.items() if cls != SET_ASIDE)
    pct = 100.0 * counts[AGREE] / run if run else 0.0
    return (f"{label:32} {run:5d} {counts[AGREE]:6d} {pct:6.1f}% "
            f"{counts[INVALID_NAMED]:>8d} / {counts[INVALID_UNNAMED]:<5d} "
            f"{counts[VALID_DESIGN]:>8d} / {counts[VALID_OTHER]:<5d} {counts[REFUSED]:7d}")


def report(draft: str, verdicts: list[Verdict], skipped: collections.Counter, show: int) -> None:
    """Print ``draft``'s table (a row per file and a total), the disagreements not excused (up to
    ``show``) and the refusal reasons (groups and tests each)."""
    by_file: dict[str, collections.Counter] = {}
    for v in verdicts:
        by_file.setdefault(v.file, collections.Counter())[v.cls] += 1
    total = collections.Counter(v.cls for v in verdicts)
    print(f"\n== JSON Schema Test Suite, draft {draft} ({DRAFTS[draft][0]}/)")
    print(f"{'file':32} {'run':>5} {'agree':>6} {'agree%':>7} {'invalid accepted':>16} "
          f"{'valid rejected':>16} {'refused':>7}")
    print(f"{'':32} {'':5} {'':6} {'':7} {'named / not':>16} {'design / other':>16}")
    for name, counts in by_file.items():
        print(_row(name, counts))
    print(_row("TOTAL", total))
    every = sum(total.values())
    if total[SET_ASIDE]:
        files = sorted({v.file for v in verdicts if v.cls == SET_ASIDE})
        print(f"set aside: {total[SET_ASIDE]} tests whose label the oracle (formats asserted) contradicts "
              f"({', '.join(files)}); over all {every} tests, agreement is "
              f"{total[AGREE]} ({100.0 * total[AGREE] / every:.1f}%)")
    if skipped:
        print(f"skipped: remote references ({', '.join(sorted(REMOTE_FILES))}): "
              f"{skipped['groups']} groups, {skipped['tests']} tests")
    bad = [v for v in verdicts if v.cls in (INVALID_UNNAMED, VALID_OTHER)]
    print(f"\ndisagreements not excused: {len(bad)}" + (f" (first {show})" if len(bad) > show else ""))
    for v in bad[:show]:
        print(f"  {v.file}: {v.group} / {v.test}: expected valid={v.valid}, got accepted={v.accepted}"
              + (f"  [{v.reason}]" if v.reason else ""))
    groups = collections.Counter()
    tests = collections.Counter()
    example: dict[str, str] = {}
    seen = set()
    for v in verdicts:
        if v.cls == REFUSED:
            kind = reason_kind(v.reason)
            example.setdefault(kind, v.reason)
            tests[kind] += 1
            if (v.file, v.group_index) not in seen:
                seen.add((v.file, v.group_index))
                groups[kind] += 1
    print(f"\nrefusal reasons: {sum(groups.values())} groups, {sum(tests.values())} tests")
    for kind, n in groups.most_common():
        eg = f"  [e.g. {example[kind][:120]}]" if example[kind] != kind else ""
        print(f"  {n:4d} groups / {tests[kind]:4d} tests: {kind}{eg}")


def main(argv: list[str] | None = None) -> int:
    """Run the suite for the drafts asked, print the reports; 0 always (a report), 2 without the data."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draft", choices=["2020-12", "7", "both"], default="both")
    ap.add_argument("--file", action="extend", nargs="+", metavar="NAME",
                    help="keyword files to run (type or type.json; default all)")
    ap.add_argument("--timeout", type=float, default=20.0, help="time limit per group, seconds (0: none)")
    ap.add_argument("--show", type=int, default=40, help="disagreements to list per draft")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write every test's verdict here")
    args = ap.parse_args(argv)
    drafts = ["2020-12", "7"] if args.draft == "both" else [args.draft]
    for draft in drafts:
        folder = SUITE / DRAFTS[draft][0]
        if not folder.is_dir():
            print(f"JSON Schema Test Suite not found: {folder} (set CALLMAYBE_SHARED to the folder holding "
                  f"data/json_schema_test_suite)", file=sys.stderr)
            return 2
    sys.setrecursionlimit(10000)
    everything: list[Verdict] = []
    for draft in drafts:
        if args.file and not suite_files(draft, args.file):
            print(f"draft {draft}: none of {', '.join(args.file)} in {SUITE / DRAFTS[draft][0]}", file=sys.stderr)
            continue
        t = time.perf_counter()
        verdicts, skipped = run_draft(draft, args.file, args.timeout)
        report(draft, verdicts, skipped, args.show)
        print(f"({time.perf_counter() - t:.0f} s)")
        everything.extend(verdicts)
    if args.json:
        args.json.write_text("[\n" + ",\n".join(json.dumps(asdict(v), ensure_ascii=False) for v in everything)
                             + "\n]\n", encoding="utf-8")
        print(f"verdicts written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
