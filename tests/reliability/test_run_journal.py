"""Nothing lost (issue 12, items 1-3, 10, 11): the output never overwrites an input, every answer is journaled as
it is produced, an interrupted run keeps its answers and resumes, exit statuses say what happened, one bad
request never sinks the file, and a bad --index is reported before the model loads.

The runs use the SmolLM2 fixture model (float32, one thread); signals are sent to a real subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from callmaybe.cli import main
from callmaybe.core.journal import Journal, journal_path

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "schemas" / "functions_definition.json"
MODEL = ["--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32"]
PROMPTS = ["What is the sum of 2 and 3?", "Greet shrek", "Reverse the string 'hello'", "What is the square root of 16?",
           "Greet john", "Reverse the string 'world'", "What is the sum of 265 and 345?", "Greet fiona"]


def write_requests(path: Path, prompts: list[str]) -> Path:
    path.write_text(json.dumps([{"prompt": p} for p in prompts]))
    return path


def run(*args: str):
    return CliRunner().invoke(main, ["run", "--functions_definition", str(CATALOG), *args])


def test_output_that_is_the_input_or_the_catalog_is_refused_before_the_model_loads(tmp_path):
    requests = write_requests(tmp_path / "same.json", PROMPTS[:1])
    before = requests.read_text()
    # a model that does not exist: the refusal must come first
    r = run("--input", str(requests), "--output", str(tmp_path / "." / "same.json"), "--model", "no-such-model")
    assert r.exit_code == 2
    assert r.stderr == (f"error: {tmp_path / 'same.json'}: the output file is the requests file; writing it would "
                        "destroy the requests file\n")
    assert requests.read_text() == before
    link = tmp_path / "catalog-link.json"
    link.symlink_to(CATALOG)
    r = run("--input", str(requests), "--output", str(link), "--model", "no-such-model")
    assert r.exit_code == 2
    assert r.stderr == (f"error: {link}: the output file is the catalog; writing it would destroy the catalog\n")


def test_a_bad_index_is_reported_before_the_model_loads(tmp_path):
    requests = write_requests(tmp_path / "in.json", PROMPTS[:1])
    truncated = tmp_path / "cut.safetensors"
    shipped = next((REPO / "indexes").glob("*.safetensors"))
    truncated.write_bytes(shipped.read_bytes()[:1000])
    for bad in (tmp_path, truncated):
        t0 = time.monotonic()
        r = run("--input", str(requests), "--output", str(tmp_path / "o.json"), "--index", str(bad),
                "--model", "no-such-model")
        assert r.exit_code == 2 and r.stderr.startswith(f"error: {bad}"), r.stderr
        assert "no-such-model" not in r.stderr and time.monotonic() - t0 < 10
    assert not (tmp_path / "o.json").exists()


def test_one_request_with_a_lone_surrogate_gets_its_own_error_entry(tmp_path):
    requests = tmp_path / "in.json"
    requests.write_text('[{"prompt": "\\ud800"}, {"prompt": "What is the sum of 2 and 3?"}]')
    out = tmp_path / "out.json"
    r = run("--input", str(requests), "--output", str(out), *MODEL)
    assert r.exit_code == 1, r.output
    assert json.loads(out.read_text()) == [
        {"prompt": "?", "error": "prompt is not valid Unicode"},
        {"prompt": "What is the sum of 2 and 3?", "name": "fn_add_numbers", "parameters": {"a": 2.0, "b": 3.0}},
    ]
    assert not journal_path(out).exists()


def test_exit_status_is_1_when_every_request_failed_and_0_when_all_were_answered(tmp_path):
    out = tmp_path / "out.json"
    r = run("--input", str(write_requests(tmp_path / "bad.json", ["", "  "])), "--output", str(out), *MODEL)
    assert r.exit_code == 1 and "(2 failed)" in r.stderr
    r = run("--input", str(write_requests(tmp_path / "good.json", PROMPTS[:1])), "--output", str(out), *MODEL)
    assert r.exit_code == 0 and "(0 failed)" in r.stderr


def test_a_failed_final_write_keeps_every_answer_in_the_journal(tmp_path, monkeypatch):
    from callmaybe.core.errors import InputError
    from callmaybe.runtime.answering import session

    def full_disk(path, data):
        raise InputError(f"{path}: cannot write: No space left on device")

    monkeypatch.setattr(session, "write_json", full_disk)
    out = tmp_path / "out.json"
    r = run("--input", str(write_requests(tmp_path / "in.json", PROMPTS[:2])), "--output", str(out), *MODEL)
    journal = journal_path(out)
    assert r.exit_code == 1
    assert r.stderr.splitlines()[-1] == (
        f"error: {out}: cannot write: No space left on device; the 2 answers are kept in {journal}: rerun the "
        "same command with --resume once it can be written")
    lines = journal.read_text().splitlines()
    assert [json.loads(line)["prompt"] for line in lines[1:]] == PROMPTS[:2]
    monkeypatch.undo()
    r = run("--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL, "--resume", "--model", "no-such")
    assert r.exit_code == 2 and "another model" in r.stderr  # refused: the journal is of another model
    r = run("--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL, "--resume")
    assert r.exit_code == 0 and "2 from the journal" in r.stderr
    assert [e["name"] for e in json.loads(out.read_text())] == ["fn_add_numbers", "fn_greet"]
    assert not journal.exists()


def start_run(tmp_path: Path, prompts: list[str], *extra: str) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "out.json"
    requests = write_requests(tmp_path / "in.json", prompts)
    proc = subprocess.Popen(
        [sys.executable, "-m", "callmaybe.cli", "run", "--functions_definition", str(CATALOG), "--input",
         str(requests), "--output", str(out), *MODEL, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal: a job started in
    return proc, out  # the background (a CI script's `&`) inherits SIGINT ignored, and Python then keeps it so


def wait_for_answers(journal: Path, count: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) > count:
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended first: {proc.stderr.read()}")
        time.sleep(0.05)
    pytest.fail("no answers journaled in time")


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_keeps_the_answers_and_resume_finishes_the_run(tmp_path, signum, status):
    proc, out = start_run(tmp_path, PROMPTS)
    journal = journal_path(out)
    wait_for_answers(journal, 2, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    kept = len(journal.read_text().splitlines()) - 1
    assert 2 <= kept < len(PROMPTS)
    assert err.splitlines()[-1] == (f"interrupted: {kept} of {len(PROMPTS)} answers are kept in {journal}; "
                                    "rerun the same command with --resume to continue")
    assert not out.exists()

    again = run("--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL)  # without --resume
    assert again.exit_code == 2
    assert again.stderr == (f"error: {journal}: a journal of an interrupted run is here; rerun with --resume to "
                            "continue it, or delete it to start again\n")
    other = run("--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL, "--max-tokens", "99", "--resume")
    assert other.exit_code == 2
    assert "the journal was written by a run with another max_tokens (max_tokens: 256)" in other.stderr

    resumed = run("--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"{kept} from the journal" in resumed.stderr
    results = json.loads(out.read_text())
    assert [r["prompt"] for r in results] == PROMPTS and all("name" in r for r in results)
    assert not journal.exists()
    straight = run("--input", str(tmp_path / "in.json"), "--output", str(tmp_path / "straight.json"), *MODEL)
    assert straight.exit_code == 0, straight.output
    assert json.loads((tmp_path / "straight.json").read_text()) == results


def test_a_journal_cut_short_by_a_kill_resumes_from_its_whole_lines(tmp_path):
    proc, out = start_run(tmp_path, PROMPTS[:4])
    journal = journal_path(out)
    wait_for_answers(journal, 1, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    with open(journal, "a") as f:
        f.write('{"position": 3, "prom')  # a line the kill cut short
    r = run("--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL, "--resume")
    assert r.exit_code == 0, r.output
    assert [e["prompt"] for e in json.loads(out.read_text())] == PROMPTS[:4]


def test_an_output_folder_that_does_not_exist_yet_is_created(tmp_path):
    out = tmp_path / "new" / "deeper" / "out.json"
    r = run("--input", str(write_requests(tmp_path / "in.json", PROMPTS[:1])), "--output", str(out), *MODEL)
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())[0]["name"] == "fn_add_numbers"
    assert not journal_path(out).exists()


def test_a_journal_another_run_is_writing_is_refused(tmp_path):
    import fcntl

    out = tmp_path / "out.json"
    journal = journal_path(out)
    journal.write_text('{"journal": 1, "run": {}}\n')
    with open(journal, "rb") as held:  # a live run holds its journal locked
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        for resume in ([], ["--resume"]):
            r = run("--input", str(write_requests(tmp_path / "in.json", PROMPTS[:1])), "--output", str(out),
                    "--model", "no-such-model", *resume)
            assert r.exit_code == 2
            assert r.stderr == (f"error: {journal}: another callmaybe run is writing this output now (its journal "
                                "is in use); wait for it, or choose another --output\n")


def test_journaled_entries_are_checked_again_on_resume(tmp_path, monkeypatch):
    """An edited journal cannot put an invalid call (or a non-entry) into the output: it is answered again."""
    from callmaybe.core.errors import InputError
    from callmaybe.runtime.answering import session

    def full_disk(path, data):
        raise InputError(f"{path}: cannot write: No space left on device")

    monkeypatch.setattr(session, "write_json", full_disk)
    out = tmp_path / "out.json"
    requests = write_requests(tmp_path / "in.json", PROMPTS[:3])
    assert run("--input", str(requests), "--output", str(out), *MODEL).exit_code == 1
    monkeypatch.undo()
    journal = journal_path(out)
    lines = journal.read_text().splitlines()
    first, second = json.loads(lines[1]), json.loads(lines[2])
    first["entry"] = {"prompt": first["prompt"], "name": "fn_does_not_exist", "parameters": {"a": "x"}}
    second["entry"] = 5
    journal.write_text("\n".join([lines[0], json.dumps(first), json.dumps(second), lines[3]]) + "\n")
    r = run("--input", str(requests), "--output", str(out), *MODEL, "--resume")
    assert r.exit_code == 0, r.output
    assert "1 from the journal" in r.stderr
    assert [e["name"] for e in json.loads(out.read_text())] == ["fn_add_numbers", "fn_greet", "fn_reverse_string"]


def test_an_interrupt_before_any_answer_leaves_no_journal(tmp_path, monkeypatch):
    from callmaybe.runtime.answering import session

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "Runtime", interrupted)  # as if Ctrl-C came while the model loads
    out = tmp_path / "out.json"
    r = run("--input", str(write_requests(tmp_path / "in.json", PROMPTS[:1])), "--output", str(out), *MODEL)
    assert r.exit_code == 130
    assert r.stderr.splitlines()[-1] == "interrupted before any request was answered"
    assert not journal_path(out).exists() and not out.exists()


def test_a_signal_while_an_answer_is_journaled_comes_after_it_is_counted(tmp_path, monkeypatch):
    """A SIGINT that arrives while a line is written (here: between its write and its fsync) waits until the
    answer is counted: the run's message and the journal agree. Before, the signal's KeyboardInterrupt came
    between the line and its count, and the run said "1 of 8 answers are kept" of a journal holding 2."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # SIGINT may be ignored (a background job)
    journal = Journal(tmp_path / "out.json.journal")
    journal.open({"model": "m"}, resume=False)
    real_fsync = os.fsync

    def fsync_interrupted(fd):
        os.kill(os.getpid(), signal.SIGINT)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            journal.add(0, "p", {"name": "f", "parameters": {}})
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.undo()
    journal.close()
    lines = journal.path.read_text().splitlines()
    assert (len(lines) - 1, sorted(journal.answers)) == (1, [0])
