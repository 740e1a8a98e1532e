"""JSON schema -> regular expression in the canonical layout (one space after ``:`` and ``,``, nothing else).

Coverage: ``type`` (also lists), ``enum``/``const`` of any JSON value (each value checked against the rest of
the schema with jsonschema, so enums are exact), ``properties``/``required`` (optional properties: every
subset, in declaration order), ``additionalProperties`` (objects are always closed to their declared
properties; an object without properties is a map of string keys), nested objects, ``items``,
``prefixItems`` (and draft-4 tuple ``items``/``additionalItems``), ``minItems``/``maxItems``, ``anyOf``,
``oneOf`` (compiled as anyOf: exclusivity is not enforced), ``allOf`` (merged), ``$ref`` to any local JSON
pointer (``$defs``/``definitions``; recursion unrolled to a configurable depth), string
``minLength``/``maxLength`` (in decoded code points), ``pattern`` (see :mod:`.pattern`), ``format``
(see :mod:`.formats`), integer ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` (exact digit
ranges, see :mod:`.ranges`). Annotations (``description``, ``title``, ``default``, ``examples`` ...) are read
and not enforced.

What the grammar cannot enforce (number bounds on fractions, ``multipleOf``, ``uniqueItems``, ``not``,
``dependencies`` ...) is recorded as a :class:`Note` of kind ``"not enforced"``; outputs are checked against
the full schema with jsonschema after generation. A sub-schema that admits no value compiles to ``None``
and is dropped where it is optional; where it is required the whole schema is unsatisfiable (SchemaError).

Size: literal sets (names, enum values) become alternations of literals, which interegular determinizes
into a literal trie, and each function is determinized on its own and joined after its name
(:mod:`.grammar`), so a 1,000-value enum or a 30-function catalog does not explode.
"""

from __future__ import annotations

import json
import math
from urllib.parse import unquote
from dataclasses import dataclass
from typing import Any

import jsonschema

from ..core.errors import SchemaError
from .formats import FORMATS
from .lexical import (
    BOOLEAN, COUNTED_CHAR, INTEGER, NONNEGATIVE_NUMBER, NULL, NUMBER, STRING, STRING_CHAR, alternation,
    canonical, escape, literal, string_of,
)
from .compose import Alt, ArrayNode, Leaf, Literals, MapNode, Node, ObjectNode
from .pattern import PatternError, pattern_regex
from .ranges import integer_range

__all__ = [
    "BOOLEAN", "INTEGER", "NULL", "NUMBER", "STRING", "Note", "SchemaCompiler", "call_regex", "escape",
    "literal", "object_regex",
]

#: Keywords read and never enforced.
ANNOTATIONS = frozenset({
    "description", "title", "default", "examples", "$comment", "$schema", "$id", "id", "readOnly",
    "writeOnly", "deprecated", "contentMediaType", "contentEncoding", "$anchor", "$dynamicAnchor",
    "nullable", "$defs", "definitions", "discriminator", "example", "xml", "externalDocs",
})
#: Keywords that restrict values in ways the grammar does not follow (checked after generation).
NOT_ENFORCEABLE = frozenset({
    "multipleOf", "uniqueItems", "contains", "minContains", "maxContains", "minProperties", "maxProperties",
    "dependencies", "dependentRequired", "dependentSchemas", "not", "if", "then", "else", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems",
})
#: Keywords the grammar handles.
STRUCTURAL = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum",
})
TYPES = ("null", "boolean", "object", "array", "number", "string")
STRING_KEYWORDS = {"minLength", "maxLength", "pattern", "format"}
NUMBER_KEYWORDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
ARRAY_KEYWORDS = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"}
OBJECT_KEYWORDS = {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                   "maxProperties", "dependencies", "dependentRequired", "propertyNames"}
#: Counted repetitions above this many units are not enforced (they would blow up the automaton).
MAX_COUNT = 64


@dataclass(frozen=True)
class Note:
    """Something the compiler did not enforce or changed: ``kind`` is "not enforced", "ignored" (unknown
    keyword) or "unrolled" (recursion cut); ``where`` names the function and parameter path."""

    kind: str
    where: str
    keyword: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.keyword}" + (f" ({self.detail})" if self.detail else "")


def object_regex(members: list[tuple[str, str, bool]]) -> str:
    """The regex of an object whose members are ``(key, value regex, required)`` in emission order."""
    return object_regex_texts([(json.dumps(k, ensure_ascii=False), v, r) for k, v, r in members])


def object_regex_texts(members: list[tuple[str, str, bool]]) -> str:
    """The regex of an object whose members are ``(JSON-encoded key, value regex, required)``.

    Every subset of the optional members that keeps all required ones is allowed, in the given order, with
    ``", "`` between members. The first emitted member can only be one at or before the first required one;
    after it, each later member is either mandatory (``, K``) or optional (``(?:, K)?``). Size is
    O(n * first_required) in the number of members.
    """
    if not members:
        return r"\{\}"
    texts = [f"{escape(k)}: {v}" for k, v, _ in members]
    required = [r for _, _, r in members]

    def rest(i: int) -> str:
        return "".join(f", {texts[j]}" if required[j] else f"(?:, {texts[j]})?" for j in range(i, len(members)))

    first_required = required.index(True) if any(required) else len(members) - 1
    options = [texts[i] + rest(i + 1) for i in range(first_required + 1)]
    body = alternation(options)
    if not any(required):
        body = f"(?:{body})?"
    return r"\{" + body + r"\}"


def _repeat(unit: str, lo: int, hi: int | None) -> str:
    if hi is None:
        return f"(?:{unit})" + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}")
    if lo == hi:
        return f"(?:{unit}){{{lo}}}"
    return f"(?:{unit}){{{lo},{hi}}}"


def array_regex(prefix: list[str], rest: str | None, lo: int, hi: int | None) -> str:
    """The regex of an array of ``prefix`` items by position then ``rest`` items, ``lo``..``hi`` in all."""
    cap = hi
    if rest is None:
        cap = len(prefix) if cap is None else min(cap, len(prefix))
    if not prefix and rest is not None:  # homogeneous: R(?:, R){lo-1,cap-1}
        if cap == 0:
            return r"\[\]"
        body = rest + _repeat(f", {rest}", max(lo - 1, 0), None if cap is None else cap - 1)
        return r"\[" + (body if lo > 0 else f"(?:{body})?") + r"\]"
    count = cap if cap is not None else max(len(prefix), lo)
    body = f"(?:, {rest})*" if cap is None else ""
    for i in range(count - 1, -1, -1):
        element = prefix[i] if i < len(prefix) else rest
        piece = ("" if i == 0 else ", ") + element + body
        body = piece if i < lo else f"(?:{piece})?"
    return r"\[" + body + r"\]"


def _unescape_pointer(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


class SchemaCompiler:
    """Compile the JSON schemas of one function into regexes.

    ``function`` names the function in messages; ``root`` is the schema ``$ref`` pointers resolve against;
    ``max_recursion`` is how many times one ``$ref`` may be entered on a path (3 by default).
    ``notes`` collects what was not enforced, ignored or unrolled. Raises SchemaError naming the function,
    the parameter path and the keyword for anything it cannot compile.
    """

    def __init__(self, function: str, root: Any = None, max_recursion: int = 3, any_depth: int = 2,
                 label: str = "function"):
        self.function = function
        self.label = label
        self.root = root if root is not None else {}
        self.max_recursion = max_recursion
        self.any_depth = any_depth
        self.notes: list[Note] = []

    # -- messages ----------------------------------------------------------------------------------------

    def where(self, path: list[str]) -> str:
        where = f"{self.label} '{self.function}'"
        if path:
            where += f", parameter '{'.'.join(path)}'"
        return where

    def error(self, path: list[str], message: str) -> SchemaError:
        return SchemaError(f"{self.where(path)}: {message}")

    def note(self, kind: str, path: list[str], keyword: str, detail: str = "") -> None:
        n = Note(kind, self.where(path), keyword, detail)
        if n not in self.notes:
            self.notes.append(n)

    # -- entry points ------------------------------------------------------------------------------------

    def parameters(self, schema: dict[str, Any]) -> Node:
        """The node of a function's whole ``parameters`` object schema; raises SchemaError if unsatisfiable."""
        self.root = schema
        node = self.value(schema, [], ())
        if node is None:
            raise self.error([], "the parameters schema admits no value (unsatisfiable)")
        return node

    def value(self, schema: Any, path: list[str], refs: tuple[str, ...] = ()) -> Node | None:
        """The node of any value ``schema`` accepts (``.regex`` is its regex), or None when it accepts none."""
        if schema is True or schema == {}:
            self.note("limited", path, "any value", f"nested at most {self.any_depth} deep")
            return self.any_value(self.any_depth)
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise self.error(path, f"schema must be a JSON object, got {type(schema).__name__}")
        schema, refs = self.expand(schema, path, refs)
        if schema is None:
            return None
        for key in schema:
            if key in NOT_ENFORCEABLE:
                self.note("not enforced", path, key)
            elif key not in STRUCTURAL and key not in ANNOTATIONS:
                self.note("ignored", path, key, "unknown keyword")
        if "anyOf" in schema or "oneOf" in schema:
            return self.branches(schema, path, refs)
        if "const" in schema or "enum" in schema:
            return self.enum(schema, path)
        types = self.types(schema, path)
        parts = [self.typed(t, schema, path, refs) for t in types]
        return _alt([p for p in parts if p is not None])

    # -- references and combinators ----------------------------------------------------------------------

    def resolve(self, ref: str, path: list[str]) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise self.error(path, f"unsupported $ref {ref!r} (only local references '#/...' are supported)")
        node = self.root
        for token in filter(None, unquote(ref[1:]).split("/")):  # a URI fragment: percent-decoded first
            token = _unescape_pointer(token)
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise self.error(path, f"$ref {ref!r} does not resolve")
        return node

    def expand(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...]):
        """Inline ``$ref`` and merge ``allOf``; returns (schema, refs) or (None, refs) once recursion is cut."""
        while "$ref" in schema or "allOf" in schema:
            if "$ref" in schema:
                ref = schema["$ref"]
                if refs.count(ref) >= self.max_recursion:
                    self.note("unrolled", path, "$ref", f"recursion through {ref} cut at depth {self.max_recursion}")
                    return None, refs
                target = self.resolve(ref, path)
                refs = refs + (ref,)
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                if target is True or target == {}:
                    schema = rest or {}
                    if not schema:
                        return {}, refs
                    continue
                if target is False:
                    return None, refs
                schema = self.merge(target, rest, path) if rest else dict(target)
            else:
                subs = schema["allOf"]
                if not isinstance(subs, list) or not subs:
                    raise self.error(path, "'allOf' must be a non-empty list")
                merged = {k: v for k, v in schema.items() if k != "allOf"}
                for sub in subs:
                    if sub is False:
                        return None, refs
                    if sub is True:
                        continue
                    if not isinstance(sub, dict):
                        raise self.error(path, "'allOf' entries must be schemas")
                    if "$ref" in sub:
                        sub, refs = self.expand(sub, path, refs)
                        if sub is None:
                            return None, refs
                    merged = self.merge(merged, sub, path)
                schema = merged
        return schema, refs

    def merge(self, a: dict[str, Any], b: dict[str, Any], path: list[str]) -> dict[str, Any]:
        """The conjunction of two schemas as one schema (``allOf`` of both), as far as the grammar needs."""
        out = dict(a)
        for key, value in b.items():
            if key not in out:
                out[key] = value
                continue
            mine = out[key]
            if mine == value:
                continue
            if key == "properties":
                props = dict(mine)
                for name, sub in value.items():
                    props[name] = {"allOf": [props[name], sub]} if name in props else sub
                out[key] = props
            elif key == "required":
                out[key] = list(dict.fromkeys([*mine, *value]))
            elif key == "type":
                ta = {mine} if isinstance(mine, str) else set(mine)
                tb = {value} if isinstance(value, str) else set(value)
                both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) or
                                    ("number" in ta and "integer" in tb) else set())
                out[key] = sorted(both)
            elif key == "enum":
                out[key] = [v for v in mine if v in value]
            elif key in ("minimum", "minLength", "minItems", "exclusiveMinimum") and _num(mine) and _num(value):
                out[key] = max(mine, value)
            elif key in ("maximum", "maxLength", "maxItems", "exclusiveMaximum") and _num(mine) and _num(value):
                out[key] = min(mine, value)
            elif key in ("items", "additionalProperties") and isinstance(mine, (dict, bool)) and isinstance(value, (dict, bool)):
                if mine is False or value is False:
                    out[key] = False
                elif mine is True:
                    out[key] = value
                elif value is not True:
                    out[key] = {"allOf": [mine, value]}
            elif key in ("anyOf", "oneOf"):
                out[key] = [self.merge(x, y, path) if isinstance(x, dict) and isinstance(y, dict) else x
                            for x in mine for y in value]
            elif key in ANNOTATIONS:
                continue
            else:
                self.note("not enforced", path, key, "conflicting values in allOf; the first is used")
        return out

    def branches(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...]) -> Node | None:
        base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        options: list[dict[str, Any]] = [base]
        for key in ("anyOf", "oneOf"):
            if key not in schema:
                continue
            subs = schema[key]
            if not isinstance(subs, list) or not subs:
                raise self.error(path, f"'{key}' must be a non-empty list")
            if key == "oneOf" and len(subs) > 1:
                self.note("not enforced", path, "oneOf", "compiled as anyOf: exclusivity is not enforced")
            nxt = []
            for opt in options:
                for sub in subs:
                    if sub is False:
                        continue
                    if sub is True:
                        nxt.append(opt)
                        continue
                    sub, sub_refs = self.expand(sub, path, refs) if isinstance(sub, dict) else (sub, refs)
                    if sub is None:
                        continue
                    nxt.append(self.merge(opt, sub, path) if opt else sub)
            options = nxt
        parts = [self.value(opt, path, refs) for opt in options]
        return _alt([p for p in parts if p is not None])

    # -- literals ----------------------------------------------------------------------------------------

    def enum(self, schema: dict[str, Any], path: list[str]) -> Node | None:
        if "const" in schema:
            values = [schema["const"]]
        else:
            values = schema["enum"]
            if not isinstance(values, list):
                raise self.error(path, "'enum' must be a list")
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const") and k not in ANNOTATIONS}
        if "enum" in schema and "const" in schema:
            values = [v for v in values if v in schema["enum"]]
        if rest:
            # check each value against its sibling keywords (with the root's definitions for $ref)
            defs = {k: self.root[k] for k in ("$defs", "definitions") if isinstance(self.root, dict) and k in self.root}
            try:
                validator = jsonschema.validators.validator_for(self.root)({**defs, **rest})
                values = [v for v in values if validator.is_valid(v)]
            except Exception:  # a sibling keyword jsonschema cannot evaluate: keep every value
                self.note("not enforced", path, "enum", "sibling keywords not checked")
        if not values:
            return None
        texts = []
        for v in values:
            texts.append(canonical(v))
            # JSON Schema compares numbers by value: 1 and 1.0 are the same enum value
            if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
                texts.append(canonical(int(v)))
            elif isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**15:
                texts.append(canonical(float(v)))
        return Literals(list(dict.fromkeys(texts)))

    # -- types -------------------------------------------------------------------------------------------

    def types(self, schema: dict[str, Any], path: list[str]) -> list[str]:
        t = schema.get("type")
        if t is None:
            # Without "type" every type is allowed and type-specific keywords constrain only their own type.
            # Scalars are always included; objects and arrays only when their keywords say so (an
            # unconstrained structure would be any JSON value), which narrows the language (noted).
            keys = set(schema)
            inferred = []
            if keys & OBJECT_KEYWORDS:
                inferred.append("object")
            if keys & ARRAY_KEYWORDS:
                inferred.append("array")
            if not inferred and not keys & (STRING_KEYWORDS | NUMBER_KEYWORDS):
                return ["any"]
            self.note("limited", path, "type", "no 'type': " + ", ".join(inferred + ["scalars"]))
            return inferred + ["string", "number", "boolean", "null"]
        if isinstance(t, str):
            t = [t]
        if not isinstance(t, list):
            raise self.error(path, "'type' must be a string or a list")
        if not t:  # e.g. an allOf/anyOf branch whose types do not meet: no value
            return []
        for x in t:
            if x not in TYPES and x != "integer":
                raise self.error(path, f"unknown type {json.dumps(x)}")
        if "number" in t and "integer" in t:
            t = [x for x in t if x != "integer"]
        return list(dict.fromkeys(t))

    def typed(self, type_: str, schema: dict[str, Any], path: list[str], refs: tuple[str, ...]) -> Node | None:
        """The node of ``schema`` restricted to one JSON type."""
        if type_ == "any":
            self.note("limited", path, "any value", f"nested at most {self.any_depth} deep")
            return self.any_value(self.any_depth)
        if type_ == "string":
            return self.string(schema, path)
        if type_ == "integer":
            return self.integer(schema, path)
        if type_ == "number":
            return self.number(schema, path)
        if type_ == "boolean":
            return Literals(["true", "false"])
        if type_ == "null":
            return Literals(["null"])
        if type_ == "array":
            return self.array(schema, path, refs)
        return self.object(schema, path, refs)

    def counts(self, schema: dict[str, Any], path: list[str], min_key: str, max_key: str):
        """(lo, hi) of a minX/maxX pair; raises SchemaError when malformed; hi < lo means no value."""
        lo, hi = schema.get(min_key, 0), schema.get(max_key)
        if not isinstance(lo, int) or lo < 0 or (hi is not None and (not isinstance(hi, int) or hi < 0)):
            raise self.error(path, f"malformed {min_key}/{max_key} ({lo}, {hi})")
        return lo, hi

    def capped(self, lo: int, hi: int | None, path: list[str], min_key: str, max_key: str):
        """Counts above MAX_COUNT are left to the check after generation (noted): (0 or lo, None or hi)."""
        if lo > MAX_COUNT:
            self.note("not enforced", path, min_key, f"above {MAX_COUNT}")
            lo = 0
        if hi is not None and hi > MAX_COUNT:
            self.note("not enforced", path, max_key, f"above {MAX_COUNT}")
            hi = None
        return lo, hi

    def string(self, schema: dict[str, Any], path: list[str]) -> Node | None:
        lo, hi = self.counts(schema, path, "minLength", "maxLength")
        if hi is not None and hi < lo:
            return None
        fmt = schema.get("format")
        content = None
        if isinstance(fmt, str) and fmt in FORMATS:
            content = FORMATS[fmt]
            for k in ("pattern", "minLength", "maxLength"):
                if k in schema:
                    self.note("not enforced", path, k, f"with format {fmt}")
        elif fmt is not None:
            self.note("not enforced", path, "format", f"unknown format {fmt!r}")
        if content is None and "pattern" in schema:
            try:
                content = pattern_regex(schema["pattern"])
            except PatternError as exc:
                self.note("not enforced", path, "pattern", str(exc))
            else:
                for k in ("minLength", "maxLength"):
                    if k in schema:
                        self.note("not enforced", path, k, "with pattern")
        if content is None:
            if lo == 0 and hi is None:
                return Leaf(STRING)
            lo, hi = self.capped(lo, hi, path, "minLength", "maxLength")
            content = _repeat(COUNTED_CHAR if (lo or hi is not None) else STRING_CHAR, lo, hi)
        return Leaf(string_of(content))

    def bounds(self, schema: dict[str, Any]) -> tuple[Any, bool, Any, bool]:
        """(lower, exclusive, upper, exclusive) across draft 4 (boolean) and draft 6+ (number) spellings."""
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo_x = hi_x = False
        emin, emax = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if emin is True:
            lo_x = True
        elif _num(emin) and (lo is None or emin >= lo):
            lo, lo_x = emin, True
        if emax is True:
            hi_x = True
        elif _num(emax) and (hi is None or emax <= hi):
            hi, hi_x = emax, True
        if lo is not None and not _num(lo):
            lo = None
        if hi is not None and not _num(hi):
            hi = None
        return lo, lo_x, hi, hi_x

    def integer(self, schema: dict[str, Any], path: list[str]) -> Node | None:
        lo, lo_x, hi, hi_x = self.bounds(schema)
        if lo is None and hi is None:
            return Leaf(INTEGER)
        ilo = None if lo is None else (math.floor(lo) + 1 if lo_x else math.ceil(lo))
        ihi = None if hi is None else (math.ceil(hi) - 1 if hi_x else math.floor(hi))
        from .ranges import LIMIT

        if (ilo is not None and ilo > LIMIT) or (ihi is not None and ihi < -LIMIT):
            raise self.error(path, f"integer bounds ({lo}, {hi}) lie beyond the grammar's 15-digit integers")
        if (ilo is not None and ilo < -LIMIT) or (ihi is not None and ihi > LIMIT):
            self.note("limited", path, "integer", "15 digits at most")
        regex = integer_range(ilo, ihi)
        return None if regex is None else Leaf(regex)

    def number(self, schema: dict[str, Any], path: list[str]) -> Node | None:
        lo, lo_x, hi, hi_x = self.bounds(schema)
        if lo is None and hi is None:
            return Leaf(NUMBER)
        if lo is not None and hi is not None and (hi < lo or (hi == lo and (lo_x or hi_x))):
            return None
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if k in schema:
                self.note("not enforced", path, k, "bounds on a number are checked after generation" +
                          ("; the sign is enforced" if lo is not None and lo >= 0 else ""))
        if lo is not None and lo >= 0:
            return Leaf(NONNEGATIVE_NUMBER)
        return Leaf(NUMBER)

    def array(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...]) -> Node | None:
        lo, hi = self.counts(schema, path, "minItems", "maxItems")
        if hi is not None and hi < lo:
            return None
        lo, hi = self.capped(lo, hi, path, "minItems", "maxItems")
        items = schema.get("items", True)
        prefix: list[Any] = []
        rest: Any = items
        if "prefixItems" in schema:
            prefix = list(schema["prefixItems"])
        elif isinstance(items, list):  # draft 4-7 tuple form
            prefix = items
            rest = schema.get("additionalItems", True)
        sub = path + ["[]"]
        prefix_rx = [self.value(p, sub, refs) for p in prefix]
        rest_rx = self.value(rest, sub, refs) if rest is not False else None
        # the longest possible array: up to the first impossible prefix item, or the prefix if no rest
        usable = len(prefix_rx)
        for i, rx in enumerate(prefix_rx):
            if rx is None:
                usable = i
                break
        cap = usable if (usable < len(prefix_rx) or rest_rx is None) else None
        if hi is not None:
            cap = hi if cap is None else min(cap, hi)
        if cap is not None and cap < lo:
            return None
        return ArrayNode(prefix_rx[:usable], rest_rx if usable == len(prefix_rx) else None, lo, cap)

    def object(self, schema: dict[str, Any], path: list[str], refs: tuple[str, ...]) -> Node | None:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise self.error(path, "'properties' must be a JSON object")
        required = schema.get("required", [])
        if not isinstance(required, list):
            raise self.error(path, "'required' must be a list")
        extra = schema.get("additionalProperties", True)
        if not props and not [r for r in required if isinstance(r, str)]:
            if extra is False:
                return ObjectNode([])
            return self.map(extra, schema, path, refs)
        members = []
        for name, sub in props.items():
            rx = self.value(sub, path + [name], refs)
            if rx is None:
                if name in required:
                    return None
                continue
            members.append((json.dumps(name, ensure_ascii=False), rx, name in required))
        for name in required:
            if isinstance(name, str) and name not in props:
                rx = self.value(extra if isinstance(extra, dict) else True, path + [name], refs)
                if rx is None:
                    return None
                members.append((json.dumps(name, ensure_ascii=False), rx, True))
        return ObjectNode(members)

    def map(self, extra: Any, schema: dict[str, Any], path: list[str], refs: tuple[str, ...]) -> Node:
        """An object with string keys and values of ``additionalProperties`` (any value if absent/true)."""
        pattern_props = schema.get("patternProperties")
        if isinstance(pattern_props, dict) and pattern_props:
            catch_all = [v for k, v in pattern_props.items() if k in ("", ".*", "^.*$", ".+", "^.+$")]
            if len(pattern_props) == 1 and catch_all and extra is not False:
                extra = catch_all[0]  # every key matches: values follow that schema
            else:
                self.note("not enforced", path, "patternProperties", "keys are any string")
        value = self.value(extra if isinstance(extra, dict) else True, path + ["*"], refs)
        if value is None:
            return ObjectNode([])
        return MapNode(Leaf(STRING), value)

    def any_value(self, depth: int) -> Node:
        """Any JSON value, nested at most ``depth`` arrays/objects deep."""
        scalars = [Leaf(STRING), Leaf(NUMBER), Literals(["true", "false", "null"])]
        if depth <= 0:
            return Alt(scalars)
        inner = self.any_value(depth - 1)
        return Alt(scalars + [ArrayNode([], inner, 0, None), MapNode(Leaf(STRING), inner)])


def _alt(parts: list[Node]) -> Node | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else Alt(parts)


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def call_regex(functions: list[tuple[str, str]], parameters_key: str = "parameters") -> str:
    """The regex of one whole call ``{"name": "<fn>", "parameters": {...}}``.

    ``functions`` holds ``(name, parameters regex)`` pairs; the name selects that function's parameters.
    """
    key = literal(parameters_key)
    branches = [f"{literal(name)}, {key}: {regex}" for name, regex in functions]
    return r'\{"name": ' + alternation(branches) + r"\}"
