"""The prompt: the model's own chat template, a system message listing the catalog, the user's request."""

from __future__ import annotations

import json
from typing import Any

from ..catalog import Function


def type_text(schema: Any) -> str:
    """A short human-readable type of a JSON schema: ``number``, ``array of string``, ``"a" | "b"``."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        if key in schema and isinstance(schema[key], list):
            return " | ".join(type_text(s) for s in schema[key])
    t = schema.get("type", "object" if "properties" in schema else "any")
    if isinstance(t, list):
        return " | ".join(map(str, t))
    if t == "array":
        return f"array of {type_text(schema.get('items', {}))}"
    if t == "object" and isinstance(schema.get("properties"), dict):
        inner = ", ".join(f"{k}: {type_text(v)}" for k, v in schema["properties"].items())
        return "{" + inner + "}"
    return str(t)


def describe_function(fn: Function) -> str:
    """One line per function: ``name(param: type, opt?: type) - description`` plus parameter notes."""
    props = fn.parameters.get("properties", {})
    required = set(fn.parameters.get("required", []))
    params = ", ".join(f"{k}{'' if k in required else '?'}: {type_text(v)}" for k, v in props.items())
    line = f"- {fn.name}({params})"
    if fn.description:
        line += f": {fn.description}"
    notes = [
        f"    {k}: {v['description']}"
        for k, v in props.items()
        if isinstance(v, dict) and isinstance(v.get("description"), str) and v["description"]
    ]
    return "\n".join([line, *notes])


def system_message(functions: list[Function], parameters_key: str = "parameters") -> str:
    """The system message that lists each function with its description and parameter types."""
    listing = "\n".join(describe_function(fn) for fn in functions)
    return (
        "You are a function-calling assistant. Pick the one function below that fulfils the user's request "
        f'and answer with a single JSON object {{"name": <function name>, "{parameters_key}": '
        "{<argument>: <value>, ...}}. Take argument values from the request, exactly as written there.\n\n"
        f"Functions:\n{listing}"
    )


def prompt_ids(tokenizer, functions: list[Function], request: str, parameters_key: str = "parameters") -> list[int]:
    """Token ids of the chat (system listing + user request) up to the start of the assistant's turn."""
    messages = [
        {"role": "system", "content": system_message(functions, parameters_key)},
        {"role": "user", "content": request},
    ]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)
