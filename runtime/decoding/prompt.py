"""The prompt: the model's own chat template, a system message listing the catalog, the user's request."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ...core.callformat import TOOLS_OPENING
from ...core.catalog import Function


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


def system_message(functions: list[Function], parameters_key: str = "parameters", tool_choice: str = "required",
                   parallel: bool = False) -> str:
    """The system message that lists each function with its description and parameter types.

    ``tool_choice`` "required" (the default, the message ``run`` has always used) asks for a call; "auto"
    is the same message with :data:`AUTO_CLAUSE` after the catalog, which allows a text answer when no function
    fits (so the two share every token before it). ``parallel`` allows several calls, one object per line,
    one per value, with an example (BFCL parallel's first 100 with Qwen2.5-Coder-1.5B: 69 right without the
    example line, 70 with it, 2 won and 1 lost; a single-call message that asked for "a single JSON object"
    got 62 in the tools format).
    """
    listing = "\n".join(describe_function(fn) for fn in functions)
    call = f'{{"name": <function name>, "{parameters_key}": {{<argument>: <value>, ...}}}}'
    if parallel:
        opening = ("You are a function-calling assistant. Answer the user's request with calls of the functions "
                   f"below, one JSON object {call} per call, one per line.\n")
    else:
        opening = ("You are a function-calling assistant. Pick the one function below that fulfils the user's "
                   f"request and answer with a single JSON object {call}.\n")
    several = ("- When the request asks for the same thing for several values (two cities, three numbers, a "
               "second case), write one call per value, each with that one value: never several values joined "
               f'in one string. "Weather in Paris and Rome" is two calls, {{"name": "get_weather", '
               f'"{parameters_key}": {{"city": "Paris"}}}} then {{"name": "get_weather", "{parameters_key}": '
               '{"city": "Rome"}}.\n' if parallel else "")
    return (
        opening + several +
        "- Give every required argument. Give an optional argument (marked ?) only when the request states "
        "its value; otherwise leave it out and its default applies.\n"
        "- Take values from the request, converted to what the parameter expects: units (50 mL as litres is "
        "0.05), amounts in words (3 million is 3000000), expressions (pi/2 is 1.5708).\n\n"
        f"Functions:\n{listing}" + (AUTO_CLAUSE if tool_choice == "auto" else "")
    )


#: What the "auto" system message adds to the "required" one, after the catalog: the two messages share every
#: token before it, so a call decided under "auto" can be decoded under "required"'s message by feeding again
#: only what follows (:attr:`~..answering.turns.TurnDecoding` ``call_ids``).
AUTO_CLAUSE = "\n\nWhen none of the functions above fulfils the user's request, answer in plain text instead."


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
    """Token ids of the chat (catalog + user request) up to where the call starts: :func:`chat_ids` of one
    user message, with the call's opening text where the call format has one.

    "plain": a system message listing the catalog; "tools": the chat template's ``tools=`` rendering, with
    the model's opening text (``<tool_call>\\n``) already appended after the assistant turn starts.
    """
    return chat_ids(tokenizer, functions, [{"role": "user", "content": request}], call_format, opening=True)


def chat_ids(tokenizer, functions: list[Function], messages: list[dict[str, Any]], call_format: str = "plain",
             opening: bool = False, tool_choice: str = "required", parallel: bool = False) -> list[int]:
    """Token ids of a chat up to where the assistant's answer starts (:func:`render_chat`); with ``opening``,
    the call format's opening text (``<tool_call>\\n``) follows, so the answer starts with the call.

    Only the chat template's own markers (and the opening) become added tokens (``<|im_start|>``,
    ``<|im_end|>``, ``<tool_call>`` ...): catalog and message text that spells one is encoded as plain text,
    as :func:`_literal_ids` explains. A prompt whose texts spell no marker is encoded exactly as its rendered
    text always was. Raises ValueError when the chat template cannot render the messages.
    """
    def render(text: Callable[[str], str] | None = None) -> str:
        return render_chat(tokenizer, functions, messages, call_format, text, opening, tool_choice, parallel)

    markers = _marker_pattern(tokenizer)
    texts = [*_strings(messages), *_catalog_strings(functions, call_format)]
    if markers is None or not any(markers.search(t) for t in texts):
        return list(tokenizer.encode(render(), add_special_tokens=False))
    return _literal_ids(tokenizer, render, markers, texts)


def _literal_ids(tokenizer, render: Callable[[Callable[[str], str] | None], str], markers: re.Pattern,
                 texts: list[str]) -> list[int]:
    """The prompt's token ids when a catalog or message text spells a marker.

    Each marker spelled in a text is replaced by a placeholder (letters, digits and ``_``, which no template
    escapes and no text of this prompt contains) before the chat template renders it (``render`` applies its
    argument to every catalog and message text), so every marker left in the rendered text is the template's
    own. That text is encoded as usual; each stretch between two of its added tokens that holds a placeholder
    is then encoded again with the placeholders put back, by the tokenizer's normalizer, pre-tokenizer and
    model alone (its added tokens, special or not, never match there). The other stretches keep the ids the
    tokenizer gave them. ``texts``: the messages' and the catalog's texts, as :func:`chat_ids` collected them.
    """
    base = _fresh_word("CallmaybeLiteral", [str(getattr(tokenizer, "chat_template", None) or ""), *texts])
    spellings: list[str] = []

    def hide(text: str) -> str:
        def tag(match: re.Match) -> str:
            if match.group() not in spellings:
                spellings.append(match.group())
            return f"{base}{spellings.index(match.group())}_"
        hidden = markers.sub(tag, text)
        if markers.search(hidden):  # cannot happen (a placeholder never completes a marker), but never trusted
            raise ValueError("cannot encode the prompt's text without control tokens")
        return hidden

    tags = re.compile(re.escape(base) + r"(\d+)_")
    text = render(hide)
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    added = set(getattr(tokenizer, "added_tokens_decoder", {}))
    ids, offsets = list(encoding["input_ids"]), list(encoding["offset_mapping"])
    out: list[int] = []
    start, run = 0, 0  # the current stretch: its first character, its first token
    for k in range(len(ids) + 1):
        if k < len(ids) and not (ids[k] in added and markers.fullmatch(text, *offsets[k])):
            continue
        end = offsets[k][0] if k < len(ids) else len(text)
        stretch = text[start:end]
        if tags.search(stretch):
            out += plain_text_ids(tokenizer, tags.sub(lambda m: spellings[int(m.group(1))], stretch), start == 0)
        else:
            out += ids[run:k]
        if k < len(ids):
            out.append(ids[k])
            start, run = offsets[k][1], k + 1
    return out


def _fresh_word(base: str, texts: list[str]) -> str:
    """``base``, a number and "x" (letters and digits, which no template escapes), the first such word that
    none of ``texts`` contains."""
    n = 0
    while any(f"{base}{n}" in t for t in texts):
        n += 1
    return f"{base}{n}x"


def plain_text_ids(tokenizer, text: str, at_start: bool = True) -> list[int]:
    """``text`` encoded with no added token (special or not): the backend tokenizer's normalizer, pre-tokenizer
    and model, as the tokenizer encodes a stretch between two added tokens. ``at_start``: the stretch opens
    the prompt (a Metaspace pre-tokenizer with ``prepend_scheme="first"`` adds its ``▁`` only there)."""
    backend = tokenizer.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    pre = backend.pre_tokenizer
    if pre is None:
        return [token.id for token in backend.model.tokenize(text)]
    if not at_start and getattr(pre, "prepend_scheme", None) == "first":
        from tokenizers.pre_tokenizers import Metaspace

        pre = Metaspace(replacement=pre.replacement, prepend_scheme="never", split=pre.split)
    return [token.id for piece, _ in pre.pre_tokenize_str(text) for token in backend.model.tokenize(piece)]


def _marker_pattern(tokenizer) -> re.Pattern | None:
    """A pattern matching any of the tokenizer's added tokens (longest first), or None when it has none."""
    contents = {t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.content}
    if not contents:
        return None
    return re.compile("|".join(re.escape(c) for c in sorted(contents, key=len, reverse=True)))


def _catalog_strings(functions: list[Function], call_format: str) -> list[str]:
    """Every text of the catalog that reaches the prompt."""
    if call_format == "tools":
        return [s for fn in functions for s in _strings(tool_spec(fn))]
    return [system_message(functions)]


def _strings(value: Any) -> list[str]:
    """The strings in a JSON value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` with ``fn`` applied to each of its strings, keys included."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {_map_strings(k, fn): _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_map_strings(v, fn) for v in value]
    return value


def template_messages(messages: list[dict[str, Any]], call_format: str, parameters_key: str) -> list[dict]:
    """``messages`` (OpenAI chat messages) as the chat template takes them.

    "tools": an assistant message's ``tool_calls`` keep their shape with each ``arguments`` JSON string
    parsed (Qwen's template writes it with ``tojson``); a tool message keeps its role. "plain" (templates
    without tools): an assistant message's calls become its text, one call object per line, in the call
    format's own shape, and a tool message becomes a user message "Result of <name>: <content>" (its ``name``,
    else the name of the call its ``tool_call_id`` answers, else that id).
    """
    out = []
    names = {c.get("id"): (c.get("function") or c).get("name") for m in messages if m.get("role") == "assistant"
             for c in (m.get("tool_calls") or []) if isinstance(c, dict) and c.get("id")}
    for m in messages:
        role, content = m.get("role"), m.get("content")
        content = "" if content is None else content
        if isinstance(content, list):  # OpenAI content parts: the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        calls = [c.get("function", c) for c in (m.get("tool_calls") or []) if isinstance(c, dict)]
        calls = [{"name": c.get("name"), "arguments": _arguments(c.get("arguments"))} for c in calls]
        if call_format == "tools":
            entry = {"role": role, "content": content}
            if calls:
                entry["tool_calls"] = [{"type": "function", "function": c} for c in calls]
            out.append(entry)
        elif role == "assistant" and calls:
            lines = [json.dumps({"name": c["name"], parameters_key: c["arguments"]}, ensure_ascii=False)
                     for c in calls]
            out.append({"role": "assistant", "content": "\n".join(filter(None, [content, *lines]))})
        elif role == "tool":
            name = m.get("name") or names.get(m.get("tool_call_id")) or m.get("tool_call_id") or "the call"
            out.append({"role": "user", "content": f"Result of {name}: {content}"})
        else:
            out.append({"role": role, "content": content})
    return out


def _arguments(value: Any) -> Any:
    """A call's arguments as a JSON value: a JSON string is parsed, anything else kept."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:  # not JSON (or an integer past Python's 4,300-digit limit): kept as text
            return value
    return {} if value is None else value


def result_wrapper(tokenizer, functions: list[Function], messages: list[dict[str, Any]],
                   call_format: str) -> tuple[str, str]:
    """The line of text the prompt writes right before the last tool result's content, and right after it,
    that it would not write around a user message's content (Qwen2.5's template: ``("<tool_response>",
    "</tool_response>")``; the "plain" call format: ``("Result of get_weather:", "")``), found by rendering the
    chat both ways with a placeholder content; each stripped, and "" where it holds one of the tokenizer's
    added tokens (a role header such as Llama 3's ``ipython<|end_header_id|>``: control text, which a text
    answer never picks). ``("", "")`` when ``messages`` end with no tool result or the template cannot render
    them. A model that answers from a tool result may copy these (:class:`~..answering.turns.TurnDecoding` keeps
    them out of a text answer)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") in ("user", "tool")), default=-1)
    if last < 0 or messages[last].get("role") != "tool":
        return "", ""
    placeholder = _fresh_word("CallmaybeResult", [str(getattr(tokenizer, "chat_template", None) or ""),
                                                  *_strings(messages)])
    as_tool = [*messages[:last], {**messages[last], "content": placeholder}, *messages[last + 1:]]
    as_user = [*messages[:last], {"role": "user", "content": placeholder}, *messages[last + 1:]]
    try:
        tool = render_chat(tokenizer, functions, as_tool, call_format)
        user = render_chat(tokenizer, functions, as_user, call_format)
    except ValueError:
        return "", ""
    if tool.count(placeholder) != 1 or user.count(placeholder) != 1:
        return "", ""
    tool_before, tool_after = tool.split(placeholder)
    user_before, user_after = user.split(placeholder)
    opening = tool_before[common_length(tool_before, user_before):]
    closing = tool_after[:len(tool_after) - common_length(tool_after[::-1], user_after[::-1])]
    markers = _marker_pattern(tokenizer)

    def line(text: str) -> str:
        text = text.strip()
        return "" if not text or (markers is not None and markers.search(text)) else text

    return line(opening.splitlines()[-1] if opening.strip() else ""), \
        line(closing.strip().splitlines()[0] if closing.strip() else "")


def render_chat(tokenizer, functions: list[Function], messages: list[dict[str, Any]], call_format: str,
                text: Callable[[str], str] | None = None, opening: bool = False, tool_choice: str = "required",
                parallel: bool = False) -> str:
    """The prompt's text by the chat template, up to the assistant's answer, each catalog and message text
    passed through ``text`` if given.

    "tools": the catalog goes through the template's ``tools=``; "plain": :func:`system_message` lists it
    first (before the caller's own system message, if any). No functions: the messages alone. ``opening``:
    the call format's opening text follows. Raises ValueError when the template cannot render them.
    """
    def own(value: Any) -> Any:
        return value if text is None else _map_strings(value, text)

    key = "arguments" if call_format == "tools" else "parameters"
    chat = own(template_messages(messages, call_format, key))
    try:
        if call_format == "tools" and functions:
            tools = [own(tool_spec(fn)) for fn in functions]
            rendered = tokenizer.apply_chat_template(chat, tools=tools, add_generation_prompt=True, tokenize=False)
            return rendered + (TOOLS_OPENING if opening else "")
        if functions:
            listing = own(system_message(functions, key, tool_choice, parallel))
            if chat and chat[0].get("role") == "system":
                chat = [{"role": "system", "content": chat[0]["content"] + "\n\n" + listing}, *chat[1:]]
            else:
                chat = [{"role": "system", "content": listing}, *chat]
        return tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    except Exception as exc:  # jinja2 errors: a template that cannot render these messages
        if isinstance(exc, ValueError):
            raise
        raise ValueError(f"the chat template cannot render these messages: {exc}") from None


def shared_prefix_length(tokenizer, functions: list[Function], call_format: str) -> int:
    """How many leading prompt tokens every request shares (the catalog part), found by comparing the
    prompts of two different requests."""
    a = prompt_ids(tokenizer, functions, "Request one?", call_format)
    b = prompt_ids(tokenizer, functions, "Another request entirely.", call_format)
    return common_length(a, b)


def common_length(a: list[int], b: list[int]) -> int:
    """How many leading ids ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
