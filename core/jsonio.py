"""JSON files in and out: read a JSON file or a requests file, check and write an output file atomically."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .errors import InputError
from .files import atomic_write_text


def read_text(path: Path, encoding: str = "utf-8") -> str:
    """The text of a file; raises InputError naming the file when it is missing, unreadable or not UTF-8."""
    try:
        return Path(path).read_text(encoding=encoding)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is past the range of a double")
    return value


def loads(text: str | bytes) -> Any:
    """``json.loads`` without what RFC 8259 lacks and Python's reader takes: ``NaN``, ``Infinity`` and numbers
    past the range of a double (``1e400`` would be read as infinity, then written back as ``Infinity``, which
    no JSON reader takes). Raises ValueError (json.JSONDecodeError for malformed text; an integer of more than
    Python's 4,300 digits too) or RecursionError."""
    return json.loads(text, parse_constant=_constant, parse_float=_float)


def read_json(path: Path, surrogates: bool = False) -> Any:
    """Read a JSON file (a UTF-8 byte-order mark is allowed); raises InputError naming the file for a missing
    or unreadable file or malformed JSON, and, unless ``surrogates``, for a lone surrogate escape such as
    ``"\\ud800"`` (text no UTF-8 file can hold)."""
    text = read_text(path, encoding="utf-8-sig")
    try:
        data = loads(text)
    except ValueError as exc:  # json.JSONDecodeError included
        raise InputError(f"{path}: malformed JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    if surrogates:
        return data
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{path}: contains a lone surrogate escape (not valid Unicode text)") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    return data


def read_requests(path: Path) -> list[Any]:
    """Read a requests file (a JSON list of ``{"prompt": ...}``); raises InputError for a bad file. A request
    whose text is not valid Unicode (a lone surrogate escape) is kept: it gets an error entry of its own."""
    data = read_json(path, surrogates=True)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of {{\"prompt\": ...}} objects")
    return data


def check_output_path(path: Path) -> None:
    """Raise InputError now (before any model is loaded) when ``path`` cannot be written as a file."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: output path is a folder")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{path}: cannot create the output file ({parent} is not a folder)")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{path}: the folder {parent} is not writable")


def check_distinct(output: Path, inputs: dict[str, Path]) -> None:
    """Raise InputError when ``output`` is one of ``inputs`` (label -> path) by resolved path (links and
    relative paths followed), so writing it would destroy an input."""
    target = Path(output).resolve()
    for label, path in inputs.items():
        if Path(path).resolve() == target:
            raise InputError(f"{output}: the output file is the {label}; writing it would destroy the {label}")


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented UTF-8 JSON to ``path`` atomically; raises InputError when it cannot."""
    try:
        atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
