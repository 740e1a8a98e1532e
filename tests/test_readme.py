"""The README's library example runs as written, and what it prints is a call that parses and matches its
function's schema."""

import contextlib
import io
import json
import os
import re
from pathlib import Path

import jsonschema

REPO = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Library\n", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_the_library_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    code = readme_example().replace('"catalog.safetensors"', repr(str(tmp_path / "catalog.safetensors")))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    call = json.loads(out.getvalue())
    schemas = {f["name"]: f for f in json.loads((REPO / "schemas" / "functions_definition.json").read_text())}
    fn = schemas[call["name"]]
    jsonschema.validate(call["parameters"], {"type": "object", "properties": fn["parameters"],
                                             "required": list(fn["parameters"]), "additionalProperties": False})
    assert os.path.exists(tmp_path / "catalog.safetensors")
