"""Function catalogs: read the exercise's format and OpenAI's tool format into one plain form.

A catalog is a JSON list of functions. Three spellings of a function are accepted:

* the exercise's format: ``{"name", "description", "parameters": {param: schema}, "returns"}``, where
  ``parameters`` maps each parameter name to its JSON schema and every parameter is required;
* OpenAI's tool format: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
* the same function object without that wrapper.

In the last two, ``parameters`` is an object schema with ``properties`` and ``required`` (a missing
``required`` means none is required). Each function becomes a :class:`Function` whose ``parameters`` is a
normalized object schema. Imports neither torch nor interegular.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import CatalogError, InputError
from .jsonio import read_json


@dataclass(frozen=True)
class Function:
    """One callable function of a catalog.

    ``spelling`` says how the source wrote it: ``"native"`` (the exercise's), ``"openai"`` (a tool wrapper)
    or ``"function"`` (a bare function object). ``parameters`` is an object schema ``{"type": "object",
    "properties": {...}, "required": [...], "additionalProperties": False}`` (no ``required`` where nothing is
    required and the source wrote none) plus whatever other top-level keywords the source gave (``$defs``,
    ``allOf`` ...; with ``allOf``, ``$ref`` or another in-place keyword, ``"unevaluatedProperties": False``
    closes it instead of ``additionalProperties``). Property order is the declaration order and is the order
    the grammar emits.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    returns: Any = None
    spelling: str = "native"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def _is_object_schema(parameters: Any) -> bool:
    # In the exercise's format every value of ``parameters`` is a schema (a dict), so a string "object"
    # under the key "type" can only mean an OpenAI-style object schema.
    return isinstance(parameters, dict) and (
        parameters.get("type") == "object" and not isinstance(parameters.get("properties", {}), str)
    )


def _object_parameters(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """``parameters`` written as an object schema (the function-calling spelling), with ``type`` and
    ``properties`` filled in, and ``required`` where some property is required or the source wrote it. Raises
    CatalogError for malformed ``properties`` or ``required``, or ``required`` naming a property that is not
    declared (unless an in-place keyword may)."""
    params = dict(raw)
    params.setdefault("type", "object")
    props = params.get("properties", {})
    if not isinstance(props, dict):
        raise CatalogError(f"{where}: 'properties' must be a JSON object")
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise CatalogError(f"{where}: 'required' must be a list of property names")
    unknown = [r for r in required if r not in props]
    if unknown and not any(k in params for k in _IN_PLACE):  # else allOf, $ref ... may declare them
        raise CatalogError(f"{where}: 'required' names unknown properties {unknown}")
    params["properties"] = props
    if required or "required" in raw:  # draft 4 refuses an empty list: none is written for none
        params["required"] = required
    return params


def _native_parameters(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """``parameters`` written as name -> schema (the exercise's spelling): an object schema requiring each.
    Raises CatalogError for a parameter whose schema is no object or boolean."""
    for pname, pschema in raw.items():
        if not isinstance(pschema, (dict, bool)):
            raise CatalogError(f"{where}: parameter '{pname}' must be a JSON schema object")
    return {"type": "object", "properties": dict(raw), "required": list(raw)}


def parse_function(entry: Any, where: str) -> Function:
    """Turn one catalog entry into a :class:`Function`.

    ``where`` names the entry in error messages (``"file.json: function 3"``). Raises CatalogError for a
    missing or non-string name, a non-object ``parameters`` or malformed ``properties``/``required``.
    """
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: expected a JSON object, got {type(entry).__name__}")
    spelling = "native"
    if entry.get("type") == "function" and "function" in entry:
        entry = entry["function"]
        spelling = "openai"
        if not isinstance(entry, dict):
            raise CatalogError(f"{where}: 'function' must be a JSON object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise CatalogError(f"{where}: missing or empty 'name'")
    broken = lone_surrogate(entry)
    if broken is not None:
        shown = name.encode("utf-8", "backslashreplace").decode()
        raise CatalogError(f"{where} ({shown}): text that is not valid Unicode (a lone surrogate) at '{broken}'")
    where = f"{where} ({name})"
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise CatalogError(f"{where}: 'description' must be a string")
    raw = entry.get("parameters", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: 'parameters' must be a JSON object")
    if _is_object_schema(raw) or (spelling == "openai" and not raw):
        if spelling == "native":
            spelling = "function"
        params = _object_parameters(raw, where)
    else:
        params = _native_parameters(raw, where)
    # Parameters are always closed: the grammar emits exactly the declared properties. Where allOf, $ref or
    # another in-place keyword declares some of them, additionalProperties would refuse those (it sees only
    # the properties beside it): unevaluatedProperties closes the object instead.
    if any(k in params for k in _IN_PLACE):
        params["unevaluatedProperties"] = False
    else:
        params["additionalProperties"] = False
    check_schema(params, where)
    return Function(
        name=name,
        description=description,
        parameters=params,
        returns=entry.get("returns"),
        spelling=spelling,
    )


#: Keywords that apply other schemas to the parameters object itself (they may declare properties).
_IN_PLACE = ("allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas", "dependencies", "$dynamicRef")


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """The place (``a/b/0``, keys and indices joined, a surrogate in a key written ``\\ud800``; ``""`` for
    ``value`` itself) of the first string of ``value``, key or value, holding a lone surrogate (``"\\ud800"``:
    JSON escapes may spell it, UTF-8 cannot hold it); None when there is none."""
    stack = [(value, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return at
        elif isinstance(node, dict):
            for k, v in reversed(list(node.items())):
                shown = str(k).encode("utf-8", "backslashreplace").decode()
                step = f"{at}/{shown}" if at else shown
                if isinstance(k, str) and lone_surrogate(k) is not None:
                    return step
                stack.append((v, step))
        elif isinstance(node, list):
            stack.extend((v, f"{at}/{i}" if at else str(i)) for i, v in reversed(list(enumerate(node))))
    return None


def check_schema(schema: dict[str, Any], where: str) -> None:
    """Raise CatalogError when ``schema`` is not a valid JSON Schema (bad keyword values, bad patterns; a
    pattern's ``\\p{...}`` class is read as ECMA-262 reads it, :mod:`.patterns`) or holds a pattern that the
    check after generation cannot search in linear time (a lookahead, a backreference: :mod:`.linear`)."""
    import jsonschema

    from .validation import UncheckablePattern, UnknownProperty, check_schema as check_meta

    broken = lone_surrogate(schema)
    if broken is not None:
        raise CatalogError(f"{where}: text that is not valid Unicode (a lone surrogate) at '{broken}'")

    try:
        check_meta(schema)
    except (UnknownProperty, UncheckablePattern) as exc:
        raise CatalogError(f"{where}: {exc}") from None
    except jsonschema.SchemaError as exc:
        at = "/".join(str(p) for p in exc.absolute_path) or "parameters"
        raise CatalogError(f"{where}: invalid JSON Schema at '{at}': {exc.message}") from None
    except RecursionError:
        raise CatalogError(f"{where}: schema nested too deeply") from None


def parse_catalog(data: Any, source: str) -> list[Function]:
    """Parse a decoded catalog (a list of functions, or one function object) from ``source``.

    Raises CatalogError for a malformed entry, an empty catalog or a function name given twice.
    """
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise CatalogError(f"{source}: a catalog must be a JSON list of functions")
    functions = [parse_function(entry, f"{source}: function {i}") for i, entry in enumerate(data)]
    if not functions:
        raise CatalogError(f"{source}: catalog holds no functions")
    seen: set[str] = set()
    for fn in functions:
        if fn.name in seen:
            raise CatalogError(f"{source}: function name '{fn.name}' is defined twice")
        seen.add(fn.name)
    return functions


def load_catalog(path: str | Path) -> list[Function]:
    """Load a catalog from a JSON file or a folder of ``*.json`` files (sorted by name, concatenated).

    Raises InputError for a missing path or malformed JSON, CatalogError for a malformed catalog.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise InputError(f"{path}: folder holds no *.json catalog")
        functions: list[Function] = []
        for f in files:
            functions.extend(parse_catalog(read_json(f), str(f)))
        names = [fn.name for fn in functions]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise CatalogError(f"{path}: function name '{dup[0]}' is defined twice")
        return functions
    if not path.exists():
        raise InputError(f"{path}: file not found")
    return parse_catalog(read_json(path), str(path))


def catalog_fingerprint(functions: list[Function]) -> str:
    """SHA-256 (hex) of what an index depends on: each function's name and parameters schema, in order.

    Descriptions are left out: they change the prompt, not the grammar. Key order is kept (property order
    is the order the grammar emits).
    """
    payload = [[fn.name, fn.parameters] for fn in functions]
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
