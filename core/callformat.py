"""The call formats a grammar can follow, shared by the compiler options and the runtime's prompts.

* ``plain``: the catalog is listed in a system message; the call is ``{"name": ..., "parameters": {...}}``.
* ``tools``: the catalog goes through the chat template's own ``tools=`` support and the call follows the
  model's format: Qwen writes ``<tool_call>\\n`` then ``{"name": ..., "arguments": {...}}``. The opening text
  is appended to the prompt (``<tool_call>`` is a special token, which a mask never allows).
"""

from __future__ import annotations

FORMATS = ("plain", "tools")
TOOLS_KEY = "arguments"
TOOLS_OPENING = "<tool_call>\n"


def grammar_options(fmt: str) -> dict[str, str]:
    """The compile options of a call format: the arguments key and the opening text."""
    if fmt == "tools":
        return {"parameters_key": TOOLS_KEY, "opening": TOOLS_OPENING}
    if fmt == "plain":
        return {"parameters_key": "parameters", "opening": ""}
    raise ValueError(f"unknown call format {fmt!r} (expected one of {', '.join(FORMATS)})")
