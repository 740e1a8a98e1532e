"""From generated text to a call: parse, validate against the chosen function, type numbers per schema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from ...core.catalog import Function
from ...core.errors import CallmaybeError
from ...core.validation import Checker, UncheckablePattern, UnknownProperty, check_schema


class InvalidCall(CallmaybeError):
    """Generated text that does not parse or does not match its function's schema."""


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return set(t)
    return set()


def type_numbers(value: Any, schema: Any) -> Any:
    """Write ``number`` values as floats (2 -> 2.0) and leave ``integer`` values as ints, recursively; an int
    with no exact double (2**53 + 1, 10**400) stays an int rather than change its value."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        types = _types(schema)
        if "number" in types and "integer" not in types and abs(value) <= 2**53:
            return float(value)
        return value
    if isinstance(value, list) and isinstance(schema, dict):
        items = schema.get("items", {})
        return [type_numbers(v, items) for v in value]
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties", {})
        return {k: type_numbers(v, props.get(k, {})) for k, v in value.items()}
    return value


def to_call(text: str, functions: dict[str, Function], parameters_key: str = "parameters") -> dict[str, Any]:
    """Parse ``text`` into ``{"name", "parameters"}``; raises InvalidCall when it does not parse (an integer past
    Python's 4,300-digit limit included) or validate, or jsonschema cannot check it (its float division of a
    huge integer overflows)."""
    try:
        obj = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4,300-digit limit
        raise InvalidCall(f"output is not JSON ({exc}): {text[:200]!r}") from None
    name = obj.get("name") if isinstance(obj, dict) else None
    if name not in functions:
        raise InvalidCall(f"output names no known function: {text[:200]!r}")
    fn = functions[name]
    params = obj.get(parameters_key)
    try:
        error = schema_error(params, fn.parameters)
    except jsonschema.SchemaError as exc:
        raise InvalidCall(f"{name}'s schema is not valid JSON Schema: {exc.message}") from None
    except (UnknownProperty, UncheckablePattern) as exc:
        raise InvalidCall(f"{name}'s schema cannot be checked: {exc}") from None
    except OverflowError as exc:  # jsonschema divides an integer of hundreds of digits by a float multipleOf
        raise InvalidCall(f"arguments cannot be checked against {name}'s schema: {exc}") from None
    if error is not None:
        raise InvalidCall(f"arguments do not match {name}'s schema: {error}")
    return {"name": name, "parameters": type_numbers(params, fn.parameters)}


def schema_error(value: Any, schema: Any) -> str | None:
    """The message of the most relevant error of ``value`` against ``schema`` (its draft's validator, default
    2020-12, *with* the draft's format checker, so that a ``format`` the grammar does not enforce is still
    checked: ``'300.1.2.3' is not a 'ipv4'``), or None when it is valid. A format whose check needs an
    optional package that is not installed (the test extra lists them) passes unchecked; patterns' ``\\p{...}``
    classes are read as ECMA-262 reads them (:mod:`~callmaybe.core.validation`). Raises
    jsonschema.SchemaError when ``schema`` is not valid JSON Schema."""
    check_schema(schema)
    return Checker(schema).message(value)
