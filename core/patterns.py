"""ECMA-262 patterns of JSON Schema read by Python's :mod:`re` (which jsonschema uses): the Unicode property
classes ``\\p{...}`` / ``\\P{...}``, which :mod:`re` lacks, written out as character classes of code-point
ranges (:mod:`.unicode`: general categories, ``Any``, ``ASCII``, ``Assigned``), and ``\\d \\w \\s``, which
:mod:`re` reads as Unicode classes, written as the narrower classes ECMA-262 means.

A schema's patterns (``pattern`` values and ``patternProperties`` keys, not data under ``const``/``enum``/
``default``/``examples``) are rewritten before jsonschema sees them (:func:`python_schema`), so that every
keyword that reads a pattern (``pattern``, ``patternProperties``, ``additionalProperties``,
``unevaluatedProperties``, ``propertyNames``) and the ``regex`` format of the meta-schema check agree with
the grammar, which reads ``\\p`` itself. Patterns without ``\\p``/``\\P`` are left as written.
"""

from __future__ import annotations

import re
from typing import Any

from .intervals import Interval, complement
from .unicode import UnknownProperty, basic_property

__all__ = ["UnknownProperty", "each_pattern", "python_pattern", "python_schema"]

#: Keywords whose values are data, never schemas.
_DATA = frozenset({"const", "enum", "default", "examples", "example"})
#: Keywords whose values map names to schemas (the names are not patterns).
_NAMED = frozenset({"properties", "$defs", "definitions", "dependentSchemas", "dependencies"})


def _char(cp: int) -> str:
    """Code point ``cp`` as a :mod:`re` escape that means it alone, inside a class."""
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _ranges(runs: list[Interval]) -> str:
    """The inside of a character class holding ``runs``."""
    return "".join(_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in runs)


#: ECMA-262's character class escapes (without the ``u`` and ``i`` flags), which Python's ``re`` reads as
#: Unicode classes: ``\\d`` ASCII digits, ``\\w`` ASCII word characters, ``\\s`` WhiteSpace and
#: LineTerminator (section 22.2.2.9); the upper-case forms are their complements.
_SHORTHAND: dict[str, list[Interval]] = {
    "d": [(0x30, 0x39)],
    "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "s": [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
          (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)],
}
_TRANSLATED = re.compile(r"\\[pPdDsSwW]")


def python_pattern(pattern: str) -> str:
    """``pattern`` with each ``\\p{name}`` written as a class of its code points (``\\P{name}``: of the rest),
    and ``\\d``, ``\\w``, ``\\s`` (and ``\\D``, ``\\W``, ``\\S``) as the ASCII and ECMA-262 classes they are
    there, inside or outside a character class; unchanged when it has none of them. Raises UnknownProperty
    naming a property that :func:`~.unicode.basic_property` does not know (a script, say) or a malformed
    one."""
    if not _TRANSLATED.search(pattern):
        return pattern
    out: list[str] = []
    i, in_class, n = 0, False, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt.lower() in _SHORTHAND:
                runs = _SHORTHAND[nxt.lower()]
                runs = complement(runs) if nxt.isupper() else runs
                out.append(_ranges(runs) if in_class else f"[{_ranges(runs)}]")
                i += 2
                continue
            if nxt in "pP" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise UnknownProperty(f"unclosed \\{nxt}{{ in pattern {pattern!r}")
                name = pattern[i + 3:end]
                runs = basic_property(name)
                if runs is None:
                    raise UnknownProperty(f"pattern {pattern!r}: \\{nxt}{{{name}}} is not a property the check "
                                          "after generation knows (general categories, Any, ASCII and "
                                          "Assigned)")
                if nxt == "P":
                    runs = complement(runs)
                out.append(_ranges(runs) if in_class else f"[{_ranges(runs)}]")
                i = end + 1
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            if pattern.startswith("^", i + 1):  # the class's negation, then a "]" that is a member
                out.append("^")
                i += 1
            if pattern.startswith("]", i + 1):
                out.append("\\]")
                i += 1
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def python_schema(schema: Any) -> Any:
    """``schema`` with every pattern translated by :func:`python_pattern` (a copy where one changes; the same
    object where none does). Raises UnknownProperty as :func:`python_pattern` does."""
    if isinstance(schema, list):
        items = [python_schema(v) for v in schema]
        return schema if all(a is b for a, b in zip(items, schema)) else items
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    changed = False
    for key, value in schema.items():
        new = value
        if key in _DATA:
            pass
        elif key == "pattern" and isinstance(value, str):
            new = python_pattern(value)
        elif key == "patternProperties" and isinstance(value, dict):
            new = {python_pattern(k) if isinstance(k, str) else k: python_schema(v) for k, v in value.items()}
            if all(a == b for a, b in zip(new, value)) and all(new[k] is value[k] for k in value):
                new = value
        elif key in _NAMED and isinstance(value, dict):
            new = {k: python_schema(v) for k, v in value.items()}
            if all(new[k] is value[k] for k in value):
                new = value
        else:
            new = python_schema(value)
        changed = changed or new is not value
        out[key] = new
    return out if changed else schema


def each_pattern(schema: Any):
    """Every pattern of ``schema`` as written (``pattern`` values and ``patternProperties`` keys, where
    :func:`python_schema` finds them), each once, in order."""
    seen: set[str] = set()

    def walk(node: Any):
        if isinstance(node, list):
            for v in node:
                yield from walk(v)
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key in _DATA:
                continue
            if key == "pattern" and isinstance(value, str):
                found = [value]
            elif key == "patternProperties" and isinstance(value, dict):
                found = [k for k in value if isinstance(k, str)]
                yield from (p for p in found if p not in seen and not seen.add(p))
                yield from walk(list(value.values()))
                continue
            elif key in _NAMED and isinstance(value, dict):
                yield from walk(list(value.values()))
                continue
            else:
                yield from walk(value)
                continue
            yield from (p for p in found if p not in seen and not seen.add(p))

    yield from walk(schema)
