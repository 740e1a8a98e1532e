"""The call formats a grammar can follow, shared by the compile options and the runtime's prompts.

* ``plain``: the catalog is listed in a system message; the call is ``{"name": ..., "parameters": {...}}``.
* ``tools``: the catalog goes through the chat template's own ``tools=`` support and the call follows the
  model's format: Qwen writes ``<tool_call>\\n`` then ``{"name": ..., "arguments": {...}}``. The opening text
  is appended to the prompt (``<tool_call>`` is a special token, which a mask never allows).

A "call format" is only this choice; "format" alone in JSON Schema (``"format": "date"``) is another thing.
"""

from __future__ import annotations

CALL_FORMATS = ("plain", "tools")
TOOLS_KEY = "arguments"
TOOLS_OPENING = "<tool_call>\n"


#: The forms of an index's grammar: a whole call, or one value of a schema (``response_format``).
INDEX_FORMS = ("call", "value")


def compile_options(call_format: str, form: str = "call") -> dict[str, str]:
    """The compile options of a call format: the arguments key and the opening text; with ``form="value"``
    (an index of one schema's values, no call around them) also ``"form": "value"`` and no opening text. The
    call form leaves ``form`` out, so the options of a call index stay those older indexes recorded.

    Raises ValueError for an unknown call format or form.
    """
    if form not in INDEX_FORMS:
        raise ValueError(f"unknown index form {form!r} (expected one of {', '.join(INDEX_FORMS)})")
    if form == "value":
        return {**compile_options(call_format), "opening": "", "form": "value"}
    if call_format == "tools":
        return {"parameters_key": TOOLS_KEY, "opening": TOOLS_OPENING}
    if call_format == "plain":
        return {"parameters_key": "parameters", "opening": ""}
    raise ValueError(f"unknown call format {call_format!r} (expected one of {', '.join(CALL_FORMATS)})")


def call_format_of(options: dict[str, str]) -> str:
    """The call format an index was compiled for, from the compile options in its header."""
    return "tools" if options.get("opening") == TOOLS_OPENING else "plain"
