"""Bad input: one clear error line, exit code 2, nothing written."""

import json

from click.testing import CliRunner

from callmaybe.cli import main


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_malformed_input_file(tmp_path, public_catalog_path):
    inp = tmp_path / "in.json"
    inp.write_text('[{"prompt": "x"')
    out = tmp_path / "out.json"
    r = invoke("run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(out))
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {inp}: malformed JSON: ")
    assert len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_input_file(tmp_path, public_catalog_path):
    out = tmp_path / "out.json"
    r = invoke("run", "--input", str(tmp_path / "nope.json"), "--functions_definition", str(public_catalog_path),
               "--output", str(out))
    assert r.exit_code == 2
    assert r.stderr == f"error: {tmp_path / 'nope.json'}: file not found\n"
    assert not out.exists()


def test_unsupported_keyword_in_catalog(tmp_path):
    cat = tmp_path / "cat.json"
    cat.write_text(json.dumps([{"name": "f", "parameters": {"p": {"type": "string", "format": "email"}}}]))
    r = invoke("compile", str(cat), "--tokenizer", "smollm2-135m-instruct", "-o", str(tmp_path / "out"))
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1] == "error: function 'f', parameter 'p': unsupported keyword 'format'"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_compile_prints_figures(tmp_path, public_catalog_path):
    r = invoke("compile", str(public_catalog_path), "--tokenizer", "Qwen/Qwen3-0.6B", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "compiled 5 functions for Qwen/Qwen3-0.6B: 354 states (1 accepting), 500,264 allowed-token entries" in r.stderr
    assert (tmp_path / "functions_definition.qwen-qwen3-0.6b.safetensors").exists()


def test_missing_model(tmp_path, public_catalog_path):
    out = tmp_path / "out.json"
    inp = tmp_path / "in.json"
    inp.write_text('[{"prompt": "hi"}]')
    r = invoke("run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(out),
               "--model", str(tmp_path / "no-model-here"))
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "no-model-here" in r.stderr
    assert not out.exists()
