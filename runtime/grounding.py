"""Leave out optional string arguments that the request never states.

Small models fill optional parameters with values of their own: a default copied from the description
(``"unit": "cm"``), a placeholder (``"database": "my_database"``), a guess (``"category": "Drama"``). An
optional parameter exists so that the function's default applies when the caller says nothing, so such a
value is dropped: an optional argument whose value is a string, or a list of strings, is kept only when each
string, lower-cased with everything but letters and digits removed, occurs in the request normalized the same
way. Required arguments, numbers, booleans, objects and null are always kept. The call is validated again
against the function's schema after dropping (``minProperties``, ``dependentRequired``); if it no longer
validates, nothing is dropped.

Measured on the first 100 BFCL simple cases with Qwen2.5-Coder-0.5B: right arguments 82% -> 84%, with no
case lost. It can drop a value the request gives in another form (the request says "km", the model writes
"kilometers"); ``callmaybe run --keep-unstated`` turns it off.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from ..catalog import Function


def normalize(text: str) -> str:
    """``text`` lower-cased, with only letters and digits kept (``"New York, NY"`` -> ``"newyorkny"``)."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def is_stated(value: Any, request: str) -> bool:
    """True unless ``value`` is a string (or a list of strings) that ``request`` does not contain.

    ``request`` must already be :func:`normalize`-d. A string with no letter or digit counts as unstated.
    """
    if isinstance(value, str):
        n = normalize(value)
        return bool(n) and n in request
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return all(is_stated(v, request) for v in value)
    return True


def drop_unstated(parameters: dict[str, Any], fn: Function, request: str) -> tuple[dict[str, Any], list[str]]:
    """``parameters`` without the optional arguments that ``request`` does not state, and the names dropped.

    Returns the input unchanged (and no names) when dropping would break ``fn``'s schema.
    """
    if not isinstance(parameters, dict):
        return parameters, []
    required = set(fn.parameters.get("required", []))
    said = normalize(request)
    dropped = [k for k, v in parameters.items() if k not in required and not is_stated(v, said)]
    if not dropped:
        return parameters, []
    kept = {k: v for k, v in parameters.items() if k not in dropped}
    try:
        jsonschema.validate(kept, fn.parameters)
    except (jsonschema.ValidationError, jsonschema.SchemaError):
        return parameters, []
    return kept, dropped
