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


def compile_options(call_format: str) -> dict[str, str]:
    """The compile options of a call format: the arguments key and the opening text.

    Raises ValueError for an unknown call format.
    """
    if call_format == "tools":
        return {"parameters_key": TOOLS_KEY, "opening": TOOLS_OPENING}
    if call_format == "plain":
        return {"parameters_key": "parameters", "opening": ""}
    raise ValueError(f"unknown call format {call_format!r} (expected one of {', '.join(CALL_FORMATS)})")


def call_format_of(options: dict[str, str]) -> str:
    """The call format an index was compiled for, from the compile options in its header."""
    return "tools" if options.get("opening") == TOOLS_OPENING else "plain"
