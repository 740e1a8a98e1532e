"""Scoring a call against expected answers: the public set's rules and BFCL's AST-checker rules.

Public set (``expected.json``: one ``{"name", "parameters"}`` per prompt): the name must match; numbers equal
by value, strings exactly, a person's name (a parameter called ``name``) case-insensitively, and a regex
argument counts when ``re.sub`` gives the same result on the call's source string.

BFCL (``expected``: ``{"name", "parameters": {param: [acceptable values]}}``), following the rules of
BFCL's ``ast_checker.py`` as summarised in ``../shared/data/bfcl_simple/README.md``: the name matches; every
emitted parameter is expected; a parameter whose list has no ``""`` must be present; strings compare after
removing spaces and ``,./-_*^``, lower-casing and turning ``'`` into ``"``; numbers by ``==`` (an int counts
for a float); lists as wholes, in order; dicts one level deep, each value a list of acceptable values.

BFCL parallel (``expected``: ``{"calls": [...]}``, each call as above), following
``../shared/data/bfcl_parallel/README.md``: as many calls as expected, each expected call matched by a
different produced call; the matching is a maximum bipartite one (the README's recommendation), so the
order of the calls never matters.
"""

from __future__ import annotations

import re
from typing import Any


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def public_match(call: dict, expected: dict) -> tuple[bool, bool]:
    """(right function, right arguments) of ``call`` against one public-set expectation."""
    if call.get("name") != expected["name"]:
        return False, False
    got, want = call.get("parameters", {}), expected["parameters"]
    if set(got) != set(want):
        return True, False
    for key, w in want.items():
        g = got[key]
        if _num(w) and _num(g):
            ok = float(g) == float(w)
        elif key == "name" and isinstance(g, str) and isinstance(w, str):
            ok = g.lower() == w.lower()
        elif key == "regex" and isinstance(g, str):
            ok = g == w or _same_substitution(g, w, got, want)
        else:
            ok = g == w
        if not ok:
            return True, False
    return True, True


def _same_substitution(regex: str, expected: str, got: dict, want: dict) -> bool:
    source = want.get("source_string", got.get("source_string"))
    replacement = want.get("replacement", got.get("replacement", ""))
    if not isinstance(source, str) or not isinstance(replacement, str):
        return False
    try:
        return re.sub(regex, replacement, source) == re.sub(expected, replacement, source)
    except (re.error, TypeError, IndexError):
        return False


def bfcl_normalize(s: str) -> str:
    """BFCL's string normalisation: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``."""
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def _bfcl_value(got: Any, acceptable: Any) -> bool:
    if isinstance(acceptable, str) and isinstance(got, str):
        return bfcl_normalize(got) == bfcl_normalize(acceptable)
    if _num(acceptable) and _num(got):
        return got == acceptable
    if isinstance(acceptable, list) and isinstance(got, list):
        return len(got) == len(acceptable) and all(_bfcl_value(g, a) for g, a in zip(got, acceptable))
    if isinstance(acceptable, dict) and isinstance(got, dict):
        for k, options in acceptable.items():
            opts = options if isinstance(options, list) else [options]
            if k not in got:
                if "" not in opts:
                    return False
                continue
            if not any(_bfcl_value(got[k], o) for o in opts if o != ""):
                return False
        return all(k in acceptable for k in got)
    return got == acceptable


def bfcl_match(call: dict, expected: dict) -> tuple[bool, bool]:
    """(right function, right arguments) of ``call`` against a BFCL possible answer."""
    if call.get("name") != expected["name"]:
        return False, False
    got, want = call.get("parameters", {}), expected["parameters"]
    for key in got:
        if key not in want:
            return True, False
    for key, options in want.items():
        if key not in got:
            if "" not in options:
                return True, False
            continue
        if not any(_bfcl_value(got[key], o) for o in options if o != ""):
            return True, False
    return True, True


def bfcl_calls_match(calls: list[dict], expected: list[dict]) -> bool:
    """True when ``calls`` answer a BFCL parallel case: one call per expected call, each expected call
    matched (:func:`bfcl_match`) by a different produced call, by maximum bipartite matching."""
    if len(calls) != len(expected):
        return False
    fits = [[j for j, call in enumerate(calls) if bfcl_match(call, want)[1]] for want in expected]
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(assign(i, set()) for i in range(len(expected)))


def bfcl_parallel_match(call: dict, expected: dict) -> tuple[bool, bool, bool]:
    """(right function, right arguments, one right call) of a single ``call`` against a BFCL parallel case
    ``{"calls": [...]}``: the function is right when an expected call names it; the arguments only when the
    case expects that one call (:func:`bfcl_calls_match`); one right call when it passes one expected call,
    a partial score for a tool that makes one call per request."""
    wanted = expected["calls"]
    fn_ok = any(call.get("name") == w["name"] for w in wanted)
    return fn_ok, bfcl_calls_match([call], wanted), any(bfcl_match(call, w)[1] for w in wanted)
