"""Issue 30, items 8-10: the batch commands against a real data set's and a full disk's faults. One
unsatisfiable catalog among the cases of ``eval`` gets an error entry of its own; a journal that can no longer
be appended to is one line saying where the answers are kept; an empty journal is no journal.

The runs use the SmolLM2 fixture model (float32, one thread)."""

from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from callmaybe.cli import main
from callmaybe.core import journal as journal_module
from callmaybe.core.journal import journal_path

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "schemas" / "functions_definition.json"
MODEL = ["--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32"]
PROMPTS = ["What is the sum of 2 and 3?", "Greet shrek", "Reverse the string 'hello'", "Greet john"]

ADD = {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}
#: BFCL live_simple_71-35-0's shape (the case itself is not in the development data): a required array
#: parameter with a string ``enum`` at the array level, which no value satisfies.
EXTRACT = {"type": "function", "function": {
    "name": "extract_parameters_v1", "description": "Extract the given fields from a data source.",
    "parameters": {"type": "object", "properties": {
        "data_source": {"type": "string", "description": "Where the data is."},
        "fields": {"type": "array", "items": {"type": "string"}, "enum": ["name", "age", "email"],
                   "description": "The fields to extract."}},
        "required": ["data_source", "fields"]}}}
UNSATISFIABLE = ("function 'extract_parameters_v1', parameter 'fields': the parameter's schema admits no value "
                 "(unsatisfiable), and it is required")


def test_one_unsatisfiable_catalog_gets_an_error_entry_and_the_others_are_scored(tmp_path):
    """Item 8: the second case's catalog admits no value; it stopped the whole eval and nothing was written."""
    cases = tmp_path / "cases.jsonl"
    add = {"tools": [ADD], "expected": {"name": "add", "parameters": {"a": [2, 2.0], "b": [3, 3.0]}}}
    bad_catalog = {**add, "tools": [{**ADD, "function": {**ADD["function"], "parameters": {
        "type": "object", "properties": {"a": {"type": "bogus"}}}}}]}
    cases.write_text("".join(json.dumps(c) + "\n" for c in [
        {"id": "case_0", "prompt": "What is the sum of 2 and 3?", **add},
        {"id": "live_simple_71-35-0", "prompt": "Extract the name and age fields from users.csv", "tools": [EXTRACT],
         "expected": {"name": "extract_parameters_v1", "parameters": {"data_source": ["users.csv"],
                                                                      "fields": [["name", "age"]]}}},
        {"id": "case_2", "prompt": "What is the sum of 4 and 5?",
         **{**add, "expected": {"name": "add", "parameters": {"a": [4, 4.0], "b": [5, 5.0]}}}},
        {"id": "case_3", "prompt": "Add 1 and 1", **bad_catalog}]))
    out = tmp_path / "out.json"
    r = CliRunner().invoke(main, ["eval", str(cases), "--output", str(out), *MODEL])
    assert r.exit_code == 1, r.output
    rows = json.loads(out.read_text())
    assert [row["id"] for row in rows] == ["case_0", "live_simple_71-35-0", "case_2", "case_3"]
    assert rows[1] == {"id": "live_simple_71-35-0", "prompt": "Extract the name and age fields from users.csv",
                       "error": UNSATISFIABLE}
    assert rows[3] == {"id": "case_3", "prompt": "Add 1 and 1", "error": (
        f"{cases}:4: function 0 (add): invalid JSON Schema at 'properties/a/type': 'bogus' is not valid under any "
        "of the given schemas")}
    for row in (rows[0], rows[2]):
        assert row["name"] == "add" and set(row["parameters"]) == {"a", "b"} and "right_arguments" in row
    assert r.stdout.splitlines()[0].startswith("cases 4: parsed 2, schema-valid 2, ")
    assert "failed (an error entry: a catalog that cannot be compiled, a failed answer) 2 of 4" in r.stdout


def full_disk_after(monkeypatch, answers: int):
    """Make the journal's writes fail with ENOSPC once it holds ``answers`` answers (its header is the first
    write), as a disk that fills does."""
    real = journal_module.os.write
    writes = []

    def write(fd, data):
        writes.append(len(data))
        if len(writes) > answers + 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(journal_module.os, "write", write)


def run(*args: str):
    return CliRunner().invoke(main, ["run", "--functions_definition", str(CATALOG), *args])


def test_a_full_disk_while_the_journal_is_appended_is_one_line(tmp_path, monkeypatch):
    """Item 9: the disk filled at answer 21 of 66: about 40 lines of traceback (OSError in the journal's write,
    then again in its close), and no line saying where the 20 answers were."""
    requests = tmp_path / "in.json"
    requests.write_text(json.dumps([{"prompt": p} for p in PROMPTS]))
    out = tmp_path / "out.json"
    journal = journal_path(out)
    full_disk_after(monkeypatch, 2)
    r = run("--input", str(requests), "--output", str(out), *MODEL)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[-1] == (
        f"error: {journal}: cannot append to the journal: No space left on device; the 2 answers before it are kept "
        f"in {journal}: rerun the same command with --resume once there is room")
    assert "Traceback" not in r.output and not out.exists()
    lines = journal.read_text().splitlines()  # the header and two whole answers, no half line
    assert [json.loads(line)["prompt"] for line in lines[1:]] == PROMPTS[:2]
    monkeypatch.undo()
    r = run("--input", str(requests), "--output", str(out), *MODEL, "--resume")
    assert r.exit_code == 0 and "2 from the journal" in r.stderr
    results = json.loads(out.read_text())
    assert [e["prompt"] for e in results] == PROMPTS and all("name" in e for e in results)
    assert [e["name"] for e in results[:2]] == ["fn_add_numbers", "fn_greet"]  # kept from the journal
    assert not journal.exists()


def test_a_full_disk_at_the_first_answer_keeps_no_journal(tmp_path, monkeypatch):
    requests = tmp_path / "in.json"
    requests.write_text(json.dumps([{"prompt": p} for p in PROMPTS[:2]]))
    out = tmp_path / "out.json"
    full_disk_after(monkeypatch, 0)
    r = run("--input", str(requests), "--output", str(out), *MODEL)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[-1] == (f"error: {journal_path(out)}: cannot append to the journal: No space left "
                                         "on device; no answer was kept")
    assert not journal_path(out).exists() and not out.exists()


@pytest.fixture()
def full_tmpfs(tmp_path):
    """A 64 KiB tmpfs filled to the last byte (needs root and the right to mount; skipped elsewhere)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        with open(mount / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"x" * 512)
            except OSError:
                pass
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_at_the_start_leaves_no_journal(full_tmpfs, tmp_path):
    """Item 10: a full disk at the start left a 0-byte journal that blocked every later run ("a journal of an
    interrupted run is here"; --resume: "not a callmaybe journal") until it was deleted by hand."""
    requests = tmp_path / "in.json"
    requests.write_text(json.dumps([{"prompt": PROMPTS[0]}]))
    out = full_tmpfs / "out.json"
    journal = journal_path(out)
    r = run("--input", str(requests), "--output", str(out), "--model", "no-such-model")
    assert r.exit_code == 2
    assert r.stderr == f"error: {journal}: cannot write the journal: No space left on device\n"
    assert not journal.exists()


def test_an_empty_journal_is_no_journal(tmp_path):
    """Item 10, the journal an older run left: empty, or a header cut short, is removed with one line; a
    journal with another first line is still refused, saying how to go on."""
    requests = tmp_path / "in.json"
    requests.write_text(json.dumps([{"prompt": PROMPTS[0]}]))
    out = tmp_path / "out.json"
    journal = journal_path(out)
    for left in (b"", b'{"journal": 1, "ru'):
        journal.write_bytes(left)
        r = run("--input", str(requests), "--output", str(out), "--model", "no-such-model")
        assert r.stderr.splitlines()[0] == (f"removing {journal}: an empty journal (a run that could not write its "
                                            "first line left it)")
        assert r.exit_code == 2 and "no-such-model" in r.stderr.splitlines()[-1]  # then the run went on
        assert not journal.exists()
    journal.write_bytes(b"not a journal\n")
    r = run("--input", str(requests), "--output", str(out), "--model", "no-such-model", "--resume")
    assert (r.exit_code, r.stderr) == (2, f"error: {journal}: not a callmaybe journal (bad first line)\n")


def test_numbers_json_does_not_have_are_malformed_input(tmp_path):
    """Tried again as a hostile user: NaN, Infinity, 1e400 (read as infinity, written back as ``Infinity``)
    and an integer of 5,000 digits (Python's reader raises ValueError: a traceback) in a requests file, a
    catalog or a cases file are one error line, exit 2, before the model loads."""
    catalog, requests = tmp_path / "cat.json", tmp_path / "in.json"
    good_catalog = [{"name": "f", "parameters": {"x": {"type": "number"}}}]
    for text, why in (('[{"prompt": NaN}]', "NaN is not a JSON value"),
                      ('[{"prompt": "hi", "x": 1e400}]', "the number 1e400 is past the range of a double"),
                      ('[{"prompt": "hi", "x": %s}]' % ("9" * 5000),
                       "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits; use "
                       "sys.set_int_max_str_digits() to increase the limit")):
        catalog.write_text(json.dumps(good_catalog))
        requests.write_text(text)
        r = CliRunner().invoke(main, ["run", str(requests), "--functions_definition", str(catalog), "--output",
                                      str(tmp_path / "o.json"), "--model", "no-such-model"])
        assert (r.exit_code, r.stderr) == (2, f"error: {requests}: malformed JSON: {why}\n")
    catalog.write_text('[{"name": "f", "parameters": {"x": {"type": "number", "maximum": Infinity}}}]')
    requests.write_text('[{"prompt": "hi"}]')
    r = CliRunner().invoke(main, ["run", str(requests), "--functions_definition", str(catalog), "--output",
                                  str(tmp_path / "o.json"), "--model", "no-such-model"])
    assert (r.exit_code, r.stderr) == (2, f"error: {catalog}: malformed JSON: Infinity is not a JSON value\n")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": 0, "prompt": "hi", "tools": [ADD], "expected": {"name": "add", "parameters": {}}})
                     + "\n" + '{"id": 1, "prompt": NaN}\n')
    r = CliRunner().invoke(main, ["eval", str(cases), "--model", "no-such-model"])
    assert (r.exit_code, r.stderr) == (2, f"error: {cases}:2: malformed JSON: NaN is not a JSON value\n")
