"""The prompt: the model's own chat template, a system message listing the catalog, the user's request."""

from __future__ import annotations

import json
from typing import Any

from ..core.callformat import TOOLS_OPENING
from ..core.catalog import Function


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
        "{<argument>: <value>, ...}}.\n"
        "- Give every required argument. Give an optional argument (marked ?) only when the request states "
        "its value; otherwise leave it out and its default applies.\n"
        "- Take values from the request, converted to what the parameter expects: units (50 mL as litres is "
        "0.05), amounts in words (3 million is 3000000), expressions (pi/2 is 1.5708).\n\n"
        f"Functions:\n{listing}"
    )


def supports_tools(tokenizer) -> bool:
    """True when the tokenizer's chat template renders a ``tools=`` argument (e.g. Qwen2.5's)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return "tools" in template


def choose_call_format(tokenizer, requested: str = "auto") -> str:
    """``requested`` if given, else "tools" where the chat template supports it, else "plain"."""
    if requested != "auto":
        return requested
    return "tools" if supports_tools(tokenizer) else "plain"


def tool_spec(fn: Function) -> dict:
    """``fn`` in OpenAI tool format, for ``apply_chat_template(tools=...)``."""
    return {"type": "function", "function": {"name": fn.name, "description": fn.description,
                                             "parameters": fn.parameters}}


def prompt_ids(tokenizer, functions: list[Function], request: str, call_format: str = "plain") -> list[int]:
    """Token ids of the chat (catalog + user request) up to where the call starts.

    "plain": a system message listing the catalog; "tools": the chat template's ``tools=`` rendering, with
    the model's opening text (``<tool_call>\\n``) already appended after the assistant turn starts.
    """
    if call_format == "tools":
        messages = [{"role": "user", "content": request}]
        text = tokenizer.apply_chat_template(messages, tools=[tool_spec(fn) for fn in functions],
                                             add_generation_prompt=True, tokenize=False)
        text += TOOLS_OPENING
    else:
        messages = [
            {"role": "system", "content": system_message(functions)},
            {"role": "user", "content": request},
        ]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


def shared_prefix_length(tokenizer, functions: list[Function], call_format: str) -> int:
    """How many leading prompt tokens every request shares (the catalog part), found by comparing the
    prompts of two different requests."""
    a = prompt_ids(tokenizer, functions, "Request one?", call_format)
    b = prompt_ids(tokenizer, functions, "Another request entirely.", call_format)
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
