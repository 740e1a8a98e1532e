"""Why an optional argument is kept, or restated or left out: the evidence, argument by argument.

Small models fill optional parameters with values of their own: a default or an example copied from the
catalog (``"unit": "cm"``, ``"category": "Drama"``), a placeholder (``"database": "your_database_name"``),
a guess (``"location": "New York"``). They also rightly turn what the request says into the format a
parameter asks for (``"date": "2021-03-03"`` for "March 3, 2021") or into a label the description lists
(``"extras": ["Early Entry Pass"]`` for "early entry"). :func:`weigh` tells them apart by evidence. A
string value is kept when

* it is stated in the request (:func:`~.grounding.is_stated`), unless it has the shape of a placeholder
  (``your_...``, "example", "string", "default": :func:`placeholder`) and is not written in the request as
  such;
* it writes what the request states in another format: a date, time, number, unit or code
  (:func:`~.reformat.reformat`);
* it is a label the catalog offers (written in the parameter's description, ``enum``, ``default`` or
  ``examples``) and at least half of its words of 3 letters or more are words of the request
  ("Early Entry Pass" for "early entry");
* it is one of the parameter's ``enum`` labels other than its default (:func:`chosen_label`: the model's
  choice among the only values the grammar allows, in any language);
* it is such a label inside a list whose other items the request grounds (``["vegan", "dairy-free"]`` for
  "plant-based and dairy-free": the request asks for labels of that list; which one names "plant-based"
  takes knowledge the rule does not have, and the model's).

Otherwise it is restated or left out (:mod:`~..answering.runner`), and the evidence says what it looks like: a
placeholder, the parameter's default or a value its description gives (copied from the catalog), or a value
the request gives no ground for (a guess or filler). A list of strings is kept when each item is.
A number is kept when the request states it (in digits or words, with a scale or a sign), converts
one it states between units ("2 hours" as 120 minutes) or says it in a word ("quarterly": 4)
(:func:`number_grounds`); otherwise it is left out: a filler (``"year": 2020``), a default copied from the
catalog, or a constant the model recalls, which the function's own default stands for; a number it states
once is left out too when a required argument of another name in the turn holds it (:func:`claimed`).
Required arguments are always kept; so are booleans, lists of numbers, objects and null, which these rules
do not judge. Measured with Qwen2.5-Coder-1.5B: on BFCL simple's first 100 the number rule leaves out 14
values (``"gravity": 9.81``, ``"round_to": 2``) and changes no verdict; on BFCL parallel's first 100 it
turns parallel_94 right (``"permitivity": 8854187`` for "conducted in a vacuum"), and :func:`claimed`
parallel_95 (82 right, none lost).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Collection

from ...core.catalog import Function
from .grounding import close, fold, is_stated, normalize, words
from .reformat import SCALES, number_mentions, reformat, request_numbers, written_numbers

#: Words that make a value a placeholder: what API docs and templates write where a real value goes.
PLACEHOLDER_WORDS = {"example", "placeholder", "sample", "dummy", "lorem", "ipsum", "foo", "xxx"}
#: Whole values that name no value: a type's name, or a word standing for a value not given.
FILLERS = {"string", "str", "text", "number", "integer", "int", "float", "boolean", "bool", "array", "list",
           "object", "dict", "null", "none", "value", "n/a", "unknown", "default"}
_PLACEHOLDER_PREFIX = re.compile(r"^(?:your|my)[_\-\s]", re.I)
_DEFAULT = re.compile(r"default(?:s| value)?\s*(?:is|to|of|:|=)?\s*(?:set to\s*)?['\"]?([^'\".,;)]+)", re.I)
_AS_DEFAULT = re.compile(r"['\"]([^'\"]+)['\"]\s+(?:as|is)\s+(?:the\s+)?default", re.I)


@dataclass(frozen=True)
class Verdict:
    """``keep``: the value stays as the model wrote it; otherwise it is restated or left out. ``evidence``:
    why, in words, for ``--trace`` (``"a reformat of what the request states: 2021, 3, 3"``)."""

    keep: bool
    evidence: str


def placeholder(value: str) -> bool:
    """True for a value shaped like a placeholder: ``your_...``/``my_...``/"your ...", a word of
    :data:`PLACEHOLDER_WORDS`, or a whole value of :data:`FILLERS` ("string", "default")."""
    folded = fold(value).strip()
    return bool(_PLACEHOLDER_PREFIX.match(folded)) or folded in FILLERS or \
        any(w in PLACEHOLDER_WORDS for w in words(value))


def defaults(schema: dict) -> list[str]:
    """The parameter's defaults as text: its ``default`` keyword and what its description names as the
    default ("Default is 'cm'", "defaults to square meters", "with 'air' as default"), folded and stripped."""
    found = [schema["default"]] if isinstance(schema.get("default"), str) else []
    description = schema.get("description") if isinstance(schema.get("description"), str) else ""
    found += [m.group(1) for pattern in (_DEFAULT, _AS_DEFAULT) for m in pattern.finditer(description)]
    return [fold(d).strip() for d in found if d.strip()]


def offered(value: str, schema: dict) -> bool:
    """True when the catalog offers ``value`` for this parameter: it is one of its ``enum``, ``examples`` or
    ``default`` values, or written in its description (letters and digits, folded, at word edges)."""
    texts = [v for v in (schema.get("enum") or []) + (schema.get("examples") or []) if isinstance(v, str)]
    if isinstance(schema.get("default"), str):
        texts.append(schema["default"])
    if any(fold(t) == fold(value) for t in texts):
        return True
    description = schema.get("description")
    if not isinstance(description, str) or not normalize(value):
        return False
    pattern = r"(?<![^\W_])" + r"[\W_]*".join(re.escape(w) for w in words(value)) + r"(?![^\W_])"
    return re.search(pattern, fold(description)) is not None


def exemplified(value: str, schema: dict) -> bool:
    """True when ``value`` is one of the parameter's ``examples`` or written in its description (as
    :func:`offered` reads it), not one of its ``enum`` labels or its ``default``: an example of what the
    parameter takes ("One cuisine, e.g. Thai."), not a choice the catalog makes."""
    plain = {k: schema[k] for k in ("examples", "description") if k in schema}
    return offered(value, plain)


def partly_stated(value: str, request: str) -> list[str]:
    """The words of ``value`` (3 letters or more) that are words of ``request`` up to an ending, when they
    are at least half of them; else []."""
    own = [w for w in words(value) if len(w) >= 3]
    said = set(words(request))
    hits = [w for w in own if any(close(w, r) for r in said)]
    return hits if own and 2 * len(hits) >= len(own) else []


def grounds(value: str, request: str, schema: dict) -> str | None:
    """The evidence that ``request`` grounds the string ``value`` (module docstring, first three rules),
    or None."""
    if placeholder(value) and normalize(value) not in normalize(request):
        return None
    if is_stated(value, request):
        return "stated in the request"
    why = reformat(value, request)
    if why is not None:
        return f"a reformat of what the request states: {why}"
    hits = partly_stated(value, request)
    if hits and offered(value, schema):
        return f"a label the catalog offers; the request states {', '.join(hits)}"
    if chosen_label(value, schema):
        return "a label of the parameter's enum other than its default: the model's choice"
    return None


def chosen_label(value: str, schema: dict) -> bool:
    """True when ``value`` is one of the parameter's ``enum`` labels and not its default. Which label a
    request means takes knowledge no word rule has ("Comic" is ``Comedy``, "in Chinese" is ``zh-CN``, 北京's
    weather in ``celsius``, "suspenseful" is ``Thriller``), and the grammar lets the model write no other
    value, so its choice is kept. Measured with ``bench/wordrules.py`` on the expected calls of BFCL live's
    development part (simple, multiple, messages): the word rule left out 29 right optional values, every one
    such a label (27 in English requests, 2 in others); with this rule, none."""
    labels = schema.get("enum")
    return isinstance(labels, list) and value in labels and fold(value).strip() not in defaults(schema)


def doubt(value: str, schema: dict) -> str:
    """What an ungrounded string ``value`` looks like: a placeholder, copied from the catalog, or a guess."""
    if placeholder(value):
        return f"a placeholder ({_quote(value)})"
    if fold(value).strip() in defaults(schema):
        return f"the parameter's default ({_quote(value)}), copied from the catalog"
    if offered(value, schema):
        return f"a value the catalog offers ({_quote(value)}), which the request does not name"
    return f"not in the request, nor a reformat or label of what it states ({_quote(value)})"


def weigh(value: Any, request: str, schema: dict) -> Verdict:
    """The :class:`Verdict` on an optional argument's ``value`` (rules in the module docstring)."""
    if isinstance(value, str):
        why = grounds(value, request, schema)
        return Verdict(True, why) if why is not None else Verdict(False, doubt(value, schema))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        item_schema = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        item_schema = {**item_schema, "description": f"{schema.get('description', '')} "
                                                     f"{item_schema.get('description', '')}"}
        found = [grounds(v, request, item_schema) for v in value]
        if all(found):
            return Verdict(True, "; ".join(f"{_quote(v)}: {w}" for v, w in zip(value, found)))
        grounded = [v for v, w in zip(value, found) if w]
        rest = [v for v, w in zip(value, found) if not w]
        if grounded and all(offered(v, item_schema) for v in rest):
            labels = "a label the catalog offers" if len(rest) == 1 else "labels the catalog offers"
            return Verdict(True, f"{', '.join(map(_quote, rest))}: {labels}, chosen beside "
                                 f"{', '.join(map(_quote, grounded))}, which the request states")
        return Verdict(False, "; ".join(doubt(v, item_schema) for v in rest))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        why = number_grounds(value, request)
        if why is not None:
            return Verdict(True, why)
        if schema.get("default") == value and not isinstance(schema.get("default"), bool):
            return Verdict(False, f"the parameter's default ({value}), copied from the catalog")
        return Verdict(False, f"not a number the request states, nor a unit conversion of one ({value})")
    return Verdict(True, "not text or a number (booleans, lists of numbers, objects and null are kept)")


#: Factors between units of one quantity (seconds, minutes and hours; days, weeks, months and years;
#: percent, centi and kilo; KiB), by which a number the request states may be converted.
CONVERSIONS = (60, 3600, 24, 7, 12, 52, 365, 100, 1000, 1024)

#: Numbers that words say: how many times a year ("quarterly": 4), or how many times over ("twice").
RATES = {"daily": 365, "weekly": 52, "biweekly": 26, "monthly": 12, "quarterly": 4, "annually": 1, "yearly": 1,
         "twice": 2, "thrice": 3, "double": 2, "triple": 3, "half": 0.5}


def number_grounds(value: float, request: str) -> str | None:
    """The evidence that ``request`` grounds the number ``value``, or None: a number it states (in digits or
    words, with a scale, and with its sign: 5 is not stated by "-5 degrees"; :func:`another_call`'s reading),
    one it writes in digits converted between units by a factor of :data:`CONVERSIONS` (120 for "2 hours" in
    minutes, 0.5 for "50 cm" in meters; not 100 for "the first"), or a number a word of :data:`RATES` says
    (4 for "compounded quarterly")."""
    v = float(value)
    scaled = _scaled_mentions(request)
    if v in number_mentions(request) + scaled or _negated(value, request):
        return "stated in the request"
    for n in sorted(set(written_numbers(request, signed=True)) | set(scaled)):
        for f in CONVERSIONS:
            if n and (math.isclose(v, n * f) or math.isclose(v, n / f)):
                return f"{_number(n)} converted between units ({'x' if math.isclose(v, n * f) else '/'}{f})"
    for w in words(request):
        if RATES.get(w) == v:
            return f'what "{w}" says'
    return None


def _number(n: float) -> str:
    return str(int(n)) if n.is_integer() else str(n)


def verdicts(parameters: dict[str, Any], fn: Function, request: str) -> dict[str, Verdict]:
    """A :class:`Verdict` for each argument of ``parameters`` (required ones: kept, "required")."""
    required = set(fn.parameters.get("required", []))
    properties = fn.parameters.get("properties", {})
    out = {}
    for key, value in parameters.items():
        if key in required:
            out[key] = Verdict(True, "required")
        else:
            schema = properties.get(key) if isinstance(properties.get(key), dict) else {}
            out[key] = weigh(value, request, schema)
    return out


def claimed(calls: list[tuple[dict[str, Any], Collection[str]]], request: str) -> list[dict[str, Verdict]]:
    """The optional numbers of a turn's calls that take the one mention a required argument already takes.

    ``calls``: each call's arguments with the names of its function's required parameters. A number the
    request states once is one quantity: when a required argument of the turn (any call) holds it, an
    optional argument of another name holding it too took a mention that is not its own (BFCL parallel_95:
    ``"permeability": 1`` beside ``"radius": 1.0`` of "a radius of 1 meter", in both calls; BFCL
    simple_python_99: ``"phase_shift": 0`` beside ``"start_range": 0`` of "from 0 to 2 pi"). Mentions are
    counted in every form, so that the rule errs towards keeping: digits, words ("two adults and 2
    children" states 2 twice), a scale ("5%"), a sign word ("minus 3"). A number stated twice or more is not
    judged (one mention may fill two arguments: "a square of side 5, to 5 decimals"), nor one an argument of
    the same name holds as required in another call (the same quantity given to two functions: "the
    forecast and the air quality in Paris for 3 days"), nor one the request does not state as written (a
    unit conversion, a rate word). Returns, per call, the optional arguments (top-level numbers) to leave
    out, each with a :class:`Verdict` whose ``keep`` is False."""
    told = number_mentions(request, every_form=True) + _scaled_mentions(request)
    owners: dict[float, set[str]] = {}  # each number -> the required arguments that hold it
    for arguments, required in calls:
        for key, value in arguments.items():
            v = _finite(value)
            if key in required and v is not None:
                owners.setdefault(v, set()).add(key)
    out: list[dict[str, Verdict]] = []
    for arguments, required in calls:
        taken = {}
        for key, value in arguments.items():
            v = _finite(value)
            if v is None or key in required:
                continue
            holders = sorted(owners.get(v, set()) - {key})
            if holders and told[v] + _sign_words(v, request) == 1:
                taken[key] = Verdict(False, f"{_number(v)} is stated once in the request, and the required "
                                            f"{', '.join(holders)} take{'s' if len(holders) == 1 else ''} it")
        out.append(taken)
    return out


def _finite(value: Any) -> float | None:
    """A number leaf (not a bool) as a finite float; None for anything else (an integer past float range)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def _sign_words(v: float, request: str) -> int:
    """How many times ``request`` writes the magnitude of a negative ``v`` after a word that makes it
    negative ("minus 3", "a loss of $50"; not "-3", which :func:`number_mentions` counts)."""
    if v >= 0:
        return 0
    return len(re.findall(f"(?:{_SIGN_WORDS}){_TO_NUMBER}{_numeral(-v)}" + r"(?!\d|\.\d)", request.lower()))


def _quote(value: str) -> str:
    return '"' + value.replace('"', '\\"') + '"'


def _walk(value: Any, at: str = ""):
    """Every scalar of a JSON value with its path (``/location``, ``/stops/0``), depth first."""
    if isinstance(value, dict):
        for k, item in value.items():
            yield from _walk(item, f"{at}/{k}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{at}/{i}")
    elif isinstance(value, (str, int, float)) or value is None:
        yield at, value


def _leaf_paths(value: Any) -> dict[str, Any]:
    """The strings and numbers in a JSON value (booleans and null left out) by their paths, as written."""
    return {path: leaf for path, leaf in _walk(value) if not isinstance(leaf, bool) and leaf is not None}


def _leaves(value: Any) -> list[Any]:
    """The strings and numbers in a JSON value (booleans and null left out), depth first."""
    return list(_leaf_paths(value).values())


def _same(value: Any, request: str = "") -> Any:
    """A leaf as compared across calls: numbers by value (exact), strings folded to letters and digits,
    except that a string keeps its case where ``request`` spells it in two cases or more and this one among
    them (the genotypes "AA", "Aa" and "aa" of BFCL parallel_116 are three values; "new york" is "New
    York")."""
    if isinstance(value, (int, float)):
        return value  # 2 and 2.0 are equal and hash alike; integers stay exact at any size
    return ("s", normalize(value), value if _case_matters(value, request) else None)


def _case_matters(value: str, request: str) -> bool:
    """Whether ``request`` states ``value`` as it is spelled (at word edges) and also in another case. A
    sentence's first letter says nothing of case: "Paris weather. I fly to paris" spells paris one way."""
    if not request or not value.strip():
        return False
    spellings = set()
    for m in re.finditer(r"(?<!\w)" + re.escape(value) + r"(?!\w)", request, re.I):
        text = m.group(0)
        if re.search(r"(?:^|[.!?:]\s+|\n)$", request[:m.start()]):  # a sentence starts here
            text = text[:1].lower() + text[1:]
        spellings.add(text)
    mine = value if value in spellings else value[:1].lower() + value[1:]
    return mine in spellings and len(spellings) > 1


def _stated(leaf: Any, request: str, numbers: Collection[float]) -> bool:
    """Whether the request states the leaf ``leaf`` (:func:`_leaves`): a string as :func:`grounds` reads it
    (stated, or reformatted), a number among ``numbers`` (the request's numbers: signed, as
    :func:`~.reformat.number_mentions` reads them, in :func:`another_call`; magnitudes elsewhere)."""
    if isinstance(leaf, str):
        return is_stated(leaf, request) or reformat(leaf, request) is not None
    return _finite(leaf) in numbers


def another_call(arguments: dict[str, Any], earlier: list[dict[str, Any]], request: str, name: str | None = None,
                 earlier_names: list[str] | None = None, parameters: dict | None = None) -> Verdict:
    """Whether a call after the first of one turn (``parallel``) is one the request asks for: each of its
    values (strings and numbers, at any depth) is one an earlier call of the turn used or one the request
    states (as :func:`grounds` reads strings: stated, reformatted; a number among those the request writes in
    digits or words, scaled as it says, "3 million" or "5%", or its negative where a sign or a word gives it:
    "a loss of $1000" is -1000, "5x^2 - 7x" has b = -7) or, given the function's ``parameters`` schema, a
    label the catalog offers for its argument (:func:`offered`: "country" where the description says
    "city/state/country"; such a label is no new value either), it repeats no earlier call, and it calls a
    function no earlier call did (``name`` against ``earlier_names``, when given), or at least one stated value is
    fresh: the request states it more times than the earlier calls used it ("from New York City to Los
    Angeles, then to Miami, and back to New York City from Miami" states New York City twice, so a call from
    Miami to New York City is asked for; "a = 1, b = -3, c = 2 ... a = 1, b = 2, c = 1" states 1 three times
    and 2 twice), or it gives a value stated more often than the arguments earlier calls gave it to another
    argument, unless that argument is a constant of the turn (every earlier call gave it one value: "the
    same point charge"), or, when the earlier calls of its function run through a grid (:func:`_grid`: "the
    Lakers and the Bulls in 2018 and 2020"), it gives the same arguments a new combination of the values earlier
    calls gave each. A call that repeats an earlier one, that recombines earlier values outside a grid
    (``{"location": "New York", "size": 4000}`` after New York/3000 and Los Angeles/4000, each stated once), or
    that brings a value from nowhere (``{"a": 13, "b": 5}`` for "3 and 4, 5 and 12") is the model running on:
    the turn ends before it. Measured on BFCL parallel's first 100 (Qwen2.5-Coder-1.5B): the grid rule turns
    parallel_22 and parallel_46 right, where recombining whenever two calls share a value also kept the extra
    calls of parallel_21 and parallel_33; counting mentions (before: a value used once was never new) turns
    parallel_64, _89 and _92 right, and in the grid rule with constant arguments kept, parallel_98; offered
    labels, parallel_8. A call of a new function none of whose values is new (stated and unused) that takes a
    value only from the catalog's examples or descriptions (:func:`exemplified`) is no call asked for either:
    ``find_restaurants(city="Paris", cuisine="Thai")`` after the weather calls of "What's the weather in Paris and
    Rome?", "Thai" being the catalog's "e.g. Thai" (bench/catalogs/parallel_langs_cases.jsonl, in every
    language)."""
    told = number_mentions(request) + _scaled_mentions(request)  # signed: "b = -3" states -3 (see _mentions)
    numbers = set(told)
    used: Counter = Counter()  # how many times earlier calls used each value
    places: dict[Any, set[str]] = {}  # the arguments (paths) earlier calls gave each value
    said: dict[Any, int] = {}  # how many times the request states each value earlier calls used
    given: dict[str, set] = {}  # the values earlier calls gave each argument (path)
    for e in earlier:
        for path, value in _paths(e, request).items():
            used[value] += 1
            places.setdefault(value, set()).add(path)
            given.setdefault(path, set()).add(value)
        for leaf in _leaves(e):
            said[_same(leaf, request)] = _mentions(leaf, request, told)
    new: list[str] = []  # stated, and no earlier call used it
    fresh: list[str] = []  # stated more times than earlier calls used it (see the docstring)
    copied: list[str] = []  # the catalog's own examples, not stated (see the docstring)
    for path, leaf in _leaf_paths(arguments).items():
        value = _same(leaf, request)
        stated = _stated(leaf, request, numbers) or _negated(leaf, request)
        kind = _kind(leaf, path, value, stated, used, places, given, request, told, parameters)
        if kind == "guess":
            return Verdict(False, f"{json.dumps(leaf, ensure_ascii=False)} is neither in the request nor in "
                                  "an earlier call (a guess)")
        {"new": new, "fresh": fresh, "copied": copied}.get(kind, []).append(json.dumps(leaf, ensure_ascii=False))
    names = earlier_names if earlier_names is not None else [None] * len(earlier)
    if name is not None and earlier_names is not None and name not in earlier_names:
        if copied and not new:
            return Verdict(False, f"it calls {name} with values of earlier calls and the catalog's example "
                                  f"{', '.join(copied)}, which the request does not state")
        return Verdict(True, f"it calls {name}, which no earlier call did")
    mine = _paths(arguments, request)
    calls = [_paths(e, request) for e, n in zip(earlier, names) if n == name]
    if mine in calls:
        return Verdict(False, "it repeats an earlier call")
    if new:
        return Verdict(True, f"the request states {', '.join(dict.fromkeys(new))}, which no earlier call used")
    if fresh:
        return Verdict(True, f"the request states {', '.join(dict.fromkeys(fresh))} more often than earlier "
                             "calls used it")
    if calls and _grid(calls, said) and mine.keys() == calls[0].keys() \
            and all(any(c[path] == value for c in calls) for path, value in mine.items()):
        return Verdict(True, "a new combination of the values earlier calls gave each argument, which run "
                             "through a grid")
    return Verdict(False, "it uses no value the earlier calls did not (a repeat)")


def _kind(leaf: Any, path: str, value: Any, stated: bool, used: Counter, places: dict, given: dict, request: str,
          told: Counter, parameters: dict | None) -> str:
    """What a value of a later call is to :func:`another_call`: ``"offered"`` (a label the catalog offers and the
    request does not state: no guess, no new value; "country" of "city/state/country"), ``"copied"`` (such a
    label that is one of the catalog's examples, :func:`exemplified`), ``"guess"`` (neither stated nor used by an
    earlier call), ``"new"`` (stated, unused), ``"fresh"`` (stated more often than earlier calls used it, see
    :func:`another_call`) or ``"used"``."""
    if not stated and value not in used and isinstance(leaf, str):
        schema = _schema_at(parameters, path)
        if offered(leaf, schema):
            return "copied" if exemplified(leaf, schema) else "offered"
    if not stated and value not in used:
        return "guess"
    if value not in used:
        return "new"
    if stated:
        times = _mentions(leaf, request, told)
        moved = path not in places[value] and len(given.get(path, ())) != 1  # not into a constant argument
        if len(places[value]) < times and (moved or used[value] < times):
            return "fresh"
    return "used"


def _schema_at(parameters: dict | None, path: str) -> dict:
    """The schema of the argument at ``path`` (:func:`_walk`) in a function's ``parameters`` schema, through
    ``properties`` and array ``items``; {} where it is not declared."""
    schema = parameters if isinstance(parameters, dict) else {}
    for key in path.split("/")[1:]:
        if schema.get("type") == "array" or "items" in schema:
            schema = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        else:
            props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
            schema = props.get(key) if isinstance(props.get(key), dict) else {}
    return schema


def _mentions(leaf: Any, request: str, numbers: Counter[float]) -> int:
    """How many times ``request`` states ``leaf``, a value it states (:func:`_stated` or :func:`_negated`): a
    number as ``numbers`` (:func:`number_mentions`, signed) counts it, a string by the occurrences of its
    words, in order and at word edges, in the folded request (at least once: a reformat or a match by close
    words is one)."""
    if isinstance(leaf, str):
        if not words(leaf):
            return 1
        pattern = r"(?<![^\W_])" + r"[\W_]*".join(re.escape(w) for w in words(leaf)) + r"(?![^\W_])"
        return max(1, len(re.findall(pattern, fold(request))))
    return max(1, numbers[_finite(leaf)])


_SCALE = {"%": 0.01, "percent": 0.01, "trillion": 10**12, **{w: SCALES[w] for w in ("thousand", "million", "billion")}}
_SCALED = re.compile(r"(\d+(?:,\d{3})*(?:\.\d+)?)\s*(%|(?:" + "|".join(w for w in _SCALE if w != "%") + r")\b)")


_SCIENTIFIC = re.compile(r"(\d+(?:\.\d+)?)(?:\s*(?:x|\*|\u00d7)\s*10\s*\^\s*|e)([-+\u2212]?\d+)\b")


def _scaled_mentions(request: str) -> Counter[float]:
    """The numbers ``request`` writes with a scale, counted: "3 million" -> 3000000, "1.5 billion", "5%" ->
    0.05, and in scientific notation: "8.854 x 10^-12" (also ``×``, ``*``) and "8.854e-12" -> 8.854e-12."""
    found: Counter[float] = Counter()
    said = request.lower()
    for m in _SCALED.finditer(said):
        found[float(f"{float(m.group(1).replace(',', '')) * _SCALE[m.group(2)]:.12g}")] += 1
    for m in _SCIENTIFIC.finditer(said):
        found[float(f"{m.group(1)}e{m.group(2).replace(chr(0x2212), '-')}")] += 1
    return found


#: Words that make the number after them negative ("a loss of $1000", "withdraw 50").
_SIGN_WORDS = r"minus|negative|loss|lost|los[et]s?|decreas\w*|deficit|debt|below|withdr\w*|dropp?\w*|fell|fall\w*"
_SIGN = r"(?:-|\u2212|" + _SIGN_WORDS + ")"
#: What may stand between a sign and its number: a few words, a dollar sign.
_TO_NUMBER = r"\W*(?:\w+\W+){0,2}?\$?\s*"


def _negated(leaf: Any, request: str) -> bool:
    """Whether ``leaf`` is a negative number whose magnitude the request writes after a sign or a word that
    makes it negative ("- 7x", "a loss of $1000", "withdraw 50")."""
    if isinstance(leaf, (str, bool)) or _finite(leaf) is None or leaf >= 0:
        return False
    pattern = _SIGN + _TO_NUMBER + _numeral(-float(leaf)) + r"(?!\d|\.\d)"
    return re.search(pattern, request.lower()) is not None


def _numeral(size: float) -> str:
    """A regex for ``size`` (>= 0) as a request may write it: thousands separated or not (``1,500``, ``1500``),
    a fraction with trailing zeros (``74.0060`` for 74.006); a number Python writes with an exponent, as
    written."""
    text = f"{int(size)}" if size.is_integer() else repr(size)
    if "e" in text:
        return re.escape(text)
    whole, _, fraction = text.partition(".")
    groups = [whole[max(0, i - 3):i] for i in range(len(whole), 0, -3)][::-1]
    return ",?".join(groups) + (r"\." + fraction + "0*" if fraction else "")


def _paths(value: Any, request: str = "") -> dict[str, Any]:
    """Every scalar of a call's arguments by its path: strings and numbers as :func:`_same` compares them
    (against ``request``), booleans and null as they are (tagged, so that ``True`` is not ``1``)."""
    return {p: ("b", v) if isinstance(v, bool) or v is None else _same(v, request) for p, v in _walk(value)}


def _grid(calls: list[dict[str, Any]], times: dict[Any, int]) -> bool:
    """Whether ``calls`` (:func:`_paths` of each) run through a grid: they give the same arguments, some vary,
    and every argument that varies gives one value to more calls than the request states it (``times``, by
    :func:`_same` value; once where it has none): the Lakers twice and 2018 twice in Lakers/2018, Bulls/2018,
    Lakers/2020, each stated once; not New York/3000, Los Angeles/4000, whose values all differ, nor
    1980/president, 2016/president, 1975/vice president, whose years all do, nor (BFCL parallel_98) the
    distances 0.5, 1, 2, 1 of "0.5 meters ... 1 meter and 2 meters ... 1 meter ... in air", whose 1 is
    stated twice."""
    if len(calls) < 2 or any(c.keys() != calls[0].keys() for c in calls):
        return False
    varies = False
    for p in calls[0]:
        given = Counter(c[p] for c in calls)
        if len(given) == 1:
            continue
        if not any(k > times.get(v, 1) for v, k in given.items()):  # varies, and no value beyond its mentions
            return False
        varies = True
    return varies


def first_call(arguments: dict[str, Any], request: str) -> Verdict:
    """Whether a call the model chose to make under ``tool_choice="auto"`` is grounded in the request: at
    least one of its values (strings and numbers, at any depth, read as :func:`another_call` reads them) is
    stated there, or it has none. A call built only of values from nowhere (``determine_body_mass_index(
    weight=70, height=1.75)`` for "the area of a triangle of base 10 and height 5") answers a request the
    user did not make: the turn declines instead.

    Measured on the 240 ``bfcl_irrelevance`` answers of Qwen2.5-Coder-1.5B under auto (234 calls): it turns
    95 of them into declines; on BFCL simple's first 100 (one required call each) it would have declined none
    of the 94 right calls."""
    numbers = request_numbers(request)
    leaves = _leaves(arguments)
    for leaf in leaves:
        if _stated(leaf, request, numbers):
            return Verdict(True, f"the request states {json.dumps(leaf, ensure_ascii=False)}")
    if not leaves:
        return Verdict(True, "it takes no value")
    return Verdict(False, "none of its values is in the request")


def joined(arguments: dict[str, Any], later: list[dict[str, Any]], request: str) -> Verdict:
    """Whether the first call of a parallel turn joined into one value what later calls of the turn give
    apart: at some argument, a value is written out of the values two later calls or more give that
    argument: ``{"number": 510}`` for "the factorial of 5,10 and 15" (read as one number) beside later calls
    of 5, 10 and 15; ``{"location": "Paris, London, Rome"}`` beside Paris, London and Rome; ``{"genre": "rock
    and jazz"}`` beside rock and jazz. ``keep`` is False for such a call: the later calls say it apart. A
    number the request states as written is never a join (a 510 it writes is 510)."""
    numbers = request_numbers(request) | set(_scaled_mentions(request))
    for path, leaf in _leaf_paths(arguments).items():
        if not isinstance(leaf, str) and (_stated(leaf, request, numbers) or _negated(leaf, request)):
            continue
        parts = {_text(c[path]) for c in map(_leaf_paths, later) if path in c and _same(c[path]) != _same(leaf)}
        parts.discard("")
        if len(parts) >= 2 and _spelled(_text(leaf), parts, isinstance(leaf, str)):
            return Verdict(False, f"{json.dumps(leaf, ensure_ascii=False)} joins what later calls give apart "
                                  f"({', '.join(sorted(p for p in parts if p in _text(leaf)))})")
    return Verdict(True, "no value joins later ones")


def _text(leaf: Any) -> str:
    """A leaf as :func:`joined` reads it: a string's letters and digits; a whole number's digits; else ""."""
    if isinstance(leaf, str):
        return normalize(leaf)
    if isinstance(leaf, int):
        return str(leaf) if leaf >= 0 else ""
    return str(int(leaf)) if math.isfinite(leaf) and leaf.is_integer() and leaf >= 0 else ""


def _spelled(text: str, parts: set[str], loose: bool) -> bool:
    """Whether ``text`` is written out of two ``parts`` or more: exactly, part after part (numbers), or
    (``loose``, strings) with other characters between them ("San Francisco, CA; Chicago, IL")."""
    if loose:
        return sum(part in text for part in parts) >= 2
    ways = {0: 0}  # position reached -> the most parts that reach it
    for i in range(len(text)):
        if i in ways:
            for part in parts:
                if text.startswith(part, i):
                    ways[i + len(part)] = max(ways.get(i + len(part), 0), ways[i] + 1)
    return ways.get(len(text), 0) >= 2
