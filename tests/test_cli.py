"""Bad input: one clear error line, exit code 2, nothing written."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from callmaybe.cli import main


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def compile_one(tmp_path, parameter, *flags, out="out"):
    """Write a one-function catalog ``f(p: parameter)`` and compile it for SmolLM2 into ``tmp_path/out``."""
    cat = tmp_path / "cat.json"
    cat.write_text(json.dumps([{"name": "f", "parameters": {"p": parameter}}]))
    return cat, invoke("compile", str(cat), "--tokenizer", "smollm2-135m-instruct", "-o", str(tmp_path / out), *flags)


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


def test_unknown_type_in_catalog(tmp_path):
    cat, r = compile_one(tmp_path, {"type": "date"})
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: {cat}: function 0 (f): invalid JSON Schema at 'properties/p/type': "
        "'date' is not valid under any of the given schemas")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_strict_turns_not_enforced_into_an_error(tmp_path):
    # a step of more than 10,000 remainders is left to the check after generation
    note = "function 'f', parameter 'p': multipleOf (1000000007 needs more than 10,000 remainder states)"
    _, r = compile_one(tmp_path, {"type": "integer", "multipleOf": 1000000007})
    assert r.exit_code == 0
    assert f"not enforced by the grammar (checked after generation):\n  {note}\n" in r.stderr
    cat, r = compile_one(tmp_path, {"type": "integer", "multipleOf": 1000000007}, "--strict", out="out2")
    assert r.exit_code == 2
    assert r.stderr == f"error: {cat}: not enforced by the grammar (--strict): {note}\n"
    assert not (tmp_path / "out2").exists()


def test_explain_and_strict_see_what_the_catalogs_index_leaves_to_the_check(tmp_path):
    # enforcing minLength 100 takes 100 copies of a string position, millions of entries for SmolLM2's
    # vocabulary (a maximum is one counter): past the entries limit set here, the catalog is compiled again
    # with the length left to the check; the grammar alone enforces it
    parameter = {"type": "string", "minLength": 100}
    why = "minLength (100 above 64: enforcing it, the catalog's index would pass the compile limit entries)"
    cat, r = compile_one(tmp_path, parameter, "--compile-limits", "entries=1000000", "--explain")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["function 'f':", "  p: enforced: type", f"    checked after generation: {why}"]
    assert not (tmp_path / "out").exists()
    cat, r = compile_one(tmp_path, parameter, "--compile-limits", "entries=1000000", "--strict")
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1] == f"error: {cat}: not enforced by the grammar (--strict): function 'f', " \
                                        f"parameter 'p': {why}"
    assert not (tmp_path / "out").exists()
    _, r = compile_one(tmp_path, parameter, "--explain")
    assert r.stdout.splitlines() == ["function 'f':", "  p: enforced: minLength, type"]
    # --explain --strict: the explanation, then the strict error
    cat, r = compile_one(tmp_path, parameter, "--compile-limits", "entries=1000000", "--explain", "--strict")
    assert r.exit_code == 2
    assert r.stdout.splitlines()[-1] == f"    checked after generation: {why}"
    assert r.stderr.splitlines()[-1].startswith(f"error: {cat}: not enforced by the grammar (--strict): ")
    # an error of the compile names the catalog, as without --explain
    cat, r = compile_one(tmp_path, parameter, "--compile-limits", "entries=10", "--explain")
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1].startswith(f"error: {cat}: ")


def test_explain_keeps_a_dotted_parameter_apart(tmp_path):
    cat = tmp_path / "cat.json"
    cat.write_text(json.dumps([{"name": "f", "parameters": {"a": {"type": "string", "maxLength": 10},
                                                            "a.b": {"type": "string", "minLength": 300}}}]))
    r = invoke("compile", str(cat), "--tokenizer", "smollm2-135m-instruct", "--explain")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["function 'f':", "  a: enforced: maxLength, type", "  a.b: enforced: type",
                                     "    checked after generation: minLength (300 above 256)"]


def test_match_names_a_schema_nested_too_deeply(tmp_path):
    # arrays 150 deep pass Python's recursion limit in the schema walk: one line, not a traceback
    schema = {"type": "integer"}
    for _ in range(150):
        schema = {"type": "array", "items": schema}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(schema))
    r = invoke("match", "--schema", str(path), "[1]")
    assert r.exit_code == 2
    assert r.stderr == f"error: {path}: schema nested too deeply\n"


def test_match_command(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1,
                                  "maximum": 12}}, "required": ["n"]}))
    r = invoke("match", "--schema", str(schema), '{"n": 12}', '{"n": 13}', '{"n":1}')
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        '{"text": "{\\"n\\": 12}", "accepted": true}',
        '{"text": "{\\"n\\": 13}", "accepted": false}',
        '{"text": "{\\"n\\":1}", "accepted": false}',
    ]
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "integer", "minimum": 3, "maximum": 1}')
    r = invoke("match", "--schema", str(bad), "1")
    assert r.exit_code == 2
    assert r.stderr == f"error: schema '{bad}': the schema admits no value (unsatisfiable)\n"


def test_compile_prints_figures(tmp_path, public_catalog_path):
    r = invoke("compile", str(public_catalog_path), "--tokenizer", "Qwen/Qwen3-0.6B", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "compiled 5 functions for Qwen/Qwen3-0.6B: 453 states (1 accepting), 483,592 allowed-token entries" in r.stderr
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


def test_unsatisfiable_schema_names_the_file(tmp_path):
    cat, r = compile_one(tmp_path, {"type": "integer", "minimum": 3, "maximum": 1})
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: {cat}: function 'f', parameter 'p': the parameter's schema admits no value (unsatisfiable), and it is "
        "required")


def test_output_path_that_is_a_folder_fails_before_loading(tmp_path, public_catalog_path):
    inp = tmp_path / "in.json"
    inp.write_text('[{"prompt": "hi"}]')
    r = invoke("run", str(inp), "--functions_definition", str(public_catalog_path), "--output", str(tmp_path))
    assert r.exit_code == 2
    assert r.stderr == f"error: {tmp_path}: output path is a folder\n"


def test_empty_catalog(tmp_path):
    cat = tmp_path / "cat.json"
    cat.write_text("[]")
    r = invoke("match", "--functions", str(cat), "x")
    assert r.exit_code == 2
    assert r.stderr == f"error: {cat}: catalog holds no functions\n"


def test_compile_never_imports_torch_and_runtime_never_imports_interegular(tmp_path, public_catalog_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from callmaybe.cli import main\n"
        f"r = CliRunner().invoke(main, ['compile', {str(public_catalog_path)!r}, '--tokenizer', 'Qwen/Qwen3-0.6B', "
        f"'-o', {str(tmp_path)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'torch' not in sys.modules\n"
        "import callmaybe.runtime.answering.runner, callmaybe.runtime.decoding.masks, callmaybe.runtime.decoding.decoder\n"
        "assert 'interegular' not in sys.modules or 'callmaybe.compiler.automata.dfa' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    code = "import sys, callmaybe.runtime.answering.runner, callmaybe.runtime.decoding.processor; assert 'interegular' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_old_flag_names_still_work(tmp_path, public_catalog_path):
    """--prompt-format and --vocab-width are the deprecated names of --call-format and --vocab-size."""
    from callmaybe.core.indexfile import read_header

    r = invoke("compile", str(public_catalog_path), "--tokenizer", "smollm2-135m-instruct", "-o", str(tmp_path),
               "--prompt-format", "tools", "--vocab-width", "49160")
    assert r.exit_code == 0, r.output
    header = read_header(tmp_path / "functions_definition.smollm2-135m-instruct.tools.safetensors")
    assert header["options"] == {"parameters_key": "arguments", "opening": "<tool_call>\n", "form": "call"}
    assert header["vocab_size"] == 49160


def test_an_unreadable_text_file_is_one_line_naming_it(tmp_path, public_catalog_path):
    """Every command reads text files through one helper: missing, not UTF-8 -> one error line, exit 2."""
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "integer"}')
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe1\n")
    r = invoke("match", "--schema", str(schema), "--jsonl", str(bad))
    assert r.exit_code == 2 and r.stderr == f"error: {bad}: not UTF-8 text (invalid start byte at byte 0)\n"
    r = invoke("match", "--schema", str(schema), "--jsonl", str(tmp_path / "missing.jsonl"))
    assert r.exit_code == 2 and r.stderr == f"error: {tmp_path / 'missing.jsonl'}: file not found\n"
    requests = tmp_path / "requests.json"
    requests.write_bytes(b'[{"prompt": "\xff"}]')
    r = invoke("run", str(requests), "--functions_definition", str(public_catalog_path), "--output",
               str(tmp_path / "out.json"))
    assert r.exit_code == 2
    assert r.stderr == f"error: {requests}: not UTF-8 text (invalid start byte at byte 13)\n"
    assert not (tmp_path / "out.json").exists()


def test_eval_ids_option():
    r = invoke("eval", "--help")
    assert r.exit_code == 0
    assert "--ids [even|odd]" in r.output and "tune on one and report the other" in " ".join(r.output.split())
    r = invoke("eval", "nope.jsonl", "--ids", "all")
    assert r.exit_code == 2 and "'all' is not one of 'even', 'odd'" in r.output + r.stderr


def test_a_combined_threshold_without_both_checks_is_a_usage_error():
    # it used to be accepted and did nothing (the rule needs the three log-odds)
    for command in ("eval", "run", "serve"):
        data = [str(Path(__file__).parents[1] / "bench/catalogs/everyday_cases.jsonl")] if command == "eval" else []
        r = invoke(command, *data, "--combined-threshold", "3", "--no-confirm-check")
        assert r.exit_code == 2, command
        assert ("Error: --combined-threshold has no effect with --no-confirm-check: it bounds the sum of the first "
                "token's, the relevance check's and the confirm check's log-odds") in r.output
    r = invoke("run", "--combined-threshold", "3", "--no-relevance-check", "--no-confirm-check")
    assert "has no effect with --no-relevance-check:" in r.output


@pytest.mark.parametrize("value, said", [("nan", "must be a finite number, got nan"),
                                         ("inf", "must be a finite number, got inf"),
                                         ("-1", "-1.0 is not in the range x>=0")])
def test_prefill_share_must_be_a_finite_share(value, said):
    # nan and inf were accepted and failed every turn beside a new tool list's prompt with a 500 (a break test)
    r = invoke("serve", "--prefill-share", value)
    assert r.exit_code == 2 and f"Invalid value for '--prefill-share': {said}" in r.output


def test_call_threshold_must_be_a_number():
    # NaN made every decision "text" (log-odds >= nan is false) and was accepted without a word
    for command in ("eval", "run", "serve"):
        r = invoke(command, *(["nope.jsonl"] if command == "eval" else []), "--call-threshold", "nan")
        assert r.exit_code == 2, command
        assert "Invalid value for '--call-threshold': must be a number of nats, got nan" in r.output
