"""JSON schema -> regular expression in the canonical layout (one space after ``:`` and ``,``, nothing else).

The regex dialect is the subset interegular parses: ``(?:...)``, ``[...]``, ``{m,n}``, ``\\xNN``.
Scalars follow RFC 8259 exactly:

* strings: any code point except ``"``, ``\\`` and U+0000-U+001F, or the escapes ``\\" \\\\ \\/ \\b \\f \\n \\r
  \\t \\uXXXX`` (:data:`STRING`);
* numbers: no leading zeros, optional fraction and exponent; the integer and fraction parts are capped at 15
  digits and the exponent at 2, so every number is a finite double and a model cannot run away
  (:data:`NUMBER`); integers have no fraction or exponent (:data:`INTEGER`).

Literal keys and enum/const values are JSON-encoded (``json.dumps``, non-ASCII kept as UTF-8), then
regex-escaped (:func:`escape`). Objects emit their declared properties in declaration order; optional ones
may be left out (every subset, see :func:`object_regex`).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import SchemaError

STRING_CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'
STRING = '"' + STRING_CHAR + '*"'
INTEGER = r"-?(?:0|[1-9][0-9]{0,14})"
NUMBER = INTEGER + r"(?:\.[0-9]{1,15})?(?:[eE][+\-]?[0-9]{1,2})?"
BOOLEAN = "(?:true|false)"
NULL = "null"

#: Keywords that are read and never enforced.
ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "$schema", "$id"})

_META = set("\\.^$|?*+()[]{}-/")


def escape(text: str) -> str:
    """Escape ``text`` so that interegular matches it literally.

    Regex metacharacters get a backslash; control characters become ``\\xNN``; anything else (including
    non-ASCII) stays as it is.
    """
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def literal(value: Any) -> str:
    """The regex of one JSON value written canonically (``json.dumps`` with ``", "`` and ``": "``)."""
    return escape(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


def alternation(parts: list[str]) -> str:
    """``(?:a|b|...)`` of distinct parts in first-seen order; a single part is returned as it is."""
    unique = list(dict.fromkeys(parts))
    if len(unique) == 1:
        return unique[0]
    return "(?:" + "|".join(unique) + ")"


def object_regex(members: list[tuple[str, str, bool]]) -> str:
    """The regex of an object whose members are ``(key, value regex, required)`` in emission order.

    Every subset of the optional members that keeps all required ones is allowed, in the given order, with
    ``", "`` between members. The first emitted member can only be one at or before the first required one;
    after it, each later member is either mandatory (``, K``) or optional (``(?:, K)?``). Size is
    O(n * first_required) in the number of members.
    """
    if not members:
        return r"\{\}"
    texts = [f"{escape(json.dumps(k, ensure_ascii=False))}: {v}" for k, v, _ in members]
    required = [r for _, _, r in members]

    def rest(i: int) -> str:
        parts = []
        for j in range(i, len(members)):
            parts.append(f", {texts[j]}" if required[j] else f"(?:, {texts[j]})?")
        return "".join(parts)

    first_required = required.index(True) if any(required) else len(members) - 1
    options = [texts[i] + rest(i + 1) for i in range(first_required + 1)]
    body = alternation(options) if len(options) > 1 else options[0]
    if not any(required):
        body = f"(?:{body})?"
    return r"\{" + body + r"\}"


class SchemaCompiler:
    """Compile the JSON schemas of one function into regexes.

    ``function`` names the function in error messages. Raises SchemaError naming the function, the
    parameter path and the keyword for anything it cannot compile.
    """

    SUPPORTED = ANNOTATIONS | {
        "type", "enum", "const", "properties", "required", "additionalProperties", "items",
        "minItems", "maxItems", "anyOf", "oneOf",
    }

    def __init__(self, function: str):
        self.function = function

    def error(self, path: list[str], message: str) -> SchemaError:
        where = f"function '{self.function}'"
        if path:
            where += f", parameter '{'.'.join(path)}'"
        return SchemaError(f"{where}: {message}")

    def parameters(self, schema: dict[str, Any]) -> str:
        """The regex of a function's whole ``parameters`` object schema."""
        return self.object(schema, [])

    def value(self, schema: Any, path: list[str]) -> str:
        """The regex of any value that ``schema`` accepts."""
        if schema is True or schema == {}:
            raise self.error(path, "a schema without 'type' (any JSON value) is not supported")
        if schema is False:
            raise self.error(path, "schema 'false' accepts nothing")
        if not isinstance(schema, dict):
            raise self.error(path, f"schema must be a JSON object, got {type(schema).__name__}")
        for key in schema:
            if key not in self.SUPPORTED:
                raise self.error(path, f"unsupported keyword '{key}'")
        if "const" in schema:
            return literal(schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise self.error(path, "'enum' must be a non-empty list")
            return alternation([literal(v) for v in values])
        if "anyOf" in schema or "oneOf" in schema:
            key = "anyOf" if "anyOf" in schema else "oneOf"
            branches = schema[key]
            if not isinstance(branches, list) or not branches:
                raise self.error(path, f"'{key}' must be a non-empty list")
            return alternation([self.value(b, path) for b in branches])
        types = schema.get("type")
        if types is None:
            if "properties" in schema:
                types = "object"
            elif "items" in schema:
                types = "array"
            else:
                raise self.error(path, "missing 'type'")
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types:
            raise self.error(path, "'type' must be a string or a non-empty list")
        return alternation([self.typed(t, schema, path) for t in types])

    def typed(self, type_: Any, schema: dict[str, Any], path: list[str]) -> str:
        """The regex of ``schema`` restricted to one JSON type."""
        if type_ == "string":
            return STRING
        if type_ == "number":
            return NUMBER
        if type_ == "integer":
            return INTEGER
        if type_ == "boolean":
            return BOOLEAN
        if type_ == "null":
            return NULL
        if type_ == "array":
            return self.array(schema, path)
        if type_ == "object":
            return self.object(schema, path)
        raise self.error(path, f"unknown type {json.dumps(type_)}")

    def array(self, schema: dict[str, Any], path: list[str]) -> str:
        items = schema.get("items")
        if items is None:
            raise self.error(path, "an array needs 'items'")
        item = self.value(items, path + ["[]"])
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        if not isinstance(lo, int) or lo < 0 or (hi is not None and (not isinstance(hi, int) or hi < lo)):
            raise self.error(path, f"unsatisfiable or malformed minItems/maxItems ({lo}, {hi})")
        if hi == 0:
            return r"\[\]"
        more_lo = max(lo - 1, 0)
        more = f"{{{more_lo},{hi - 1}}}" if hi is not None else (f"{{{more_lo},}}" if more_lo else "*")
        body = f"{item}(?:, {item}){more}"
        if lo == 0:
            body = f"(?:{body})?"
        return r"\[" + body + r"\]"

    def object(self, schema: dict[str, Any], path: list[str]) -> str:
        for key in schema:
            if key not in self.SUPPORTED:
                raise self.error(path, f"unsupported keyword '{key}'")
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise self.error(path, "'properties' must be a JSON object")
        extra = schema.get("additionalProperties", True)
        if not props and extra not in (False,):
            raise self.error(path, "an object without 'properties' (a free-form map) is not supported")
        required = schema.get("required", [])
        members = [
            (name, self.value(sub, path + [name]), name in required) for name, sub in props.items()
        ]
        return object_regex(members)


def call_regex(functions: list[tuple[str, str]], parameters_key: str = "parameters") -> str:
    """The regex of one whole call ``{"name": "<fn>", "parameters": {...}}``.

    ``functions`` holds ``(name, parameters regex)`` pairs; the name selects that function's parameters.
    """
    key = literal(parameters_key)
    branches = [f"{literal(name)}, {key}: {regex}" for name, regex in functions]
    return r'\{"name": ' + alternation(branches) + r"\}"
