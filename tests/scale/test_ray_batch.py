"""``run --ray`` and ``eval --ray`` on a local Ray (2 CPUs) with the SmolLM2 fixture model, against a plain
``run`` of the public set with the same flags: the same output, byte for byte; a journal continued across a
local and a Ray run; an actor killed midway that loses and repeats nothing (read in the journal)."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest
from click.testing import CliRunner

from callmaybe.cli import main
from callmaybe.compiler.build import runtime_compiler
from callmaybe.core import journal as journal_module
from callmaybe.core.catalog import load_catalog
from callmaybe.core.journal import Journal, journal_path
from callmaybe.runtime.answering.session import RunConfig, run_file, run_identity
from callmaybe.scale.batch import RayAnswering, RayPlan

from ..conftest import shared_path

MODEL = ["--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32"]
CONFIG = RunConfig(model="smollm2-135m-instruct", threads=1, dtype="float32")


@pytest.fixture(scope="module")
def public():
    """(catalog path, requests path) of the public set."""
    folder = shared_path("data", "public")
    return folder / "functions_definition.json", folder / "function_calling_tests.json"


@pytest.fixture(scope="module")
def plain(public, tmp_path_factory):
    """The bytes a plain ``run`` writes for the public set."""
    out = tmp_path_factory.mktemp("plain") / "out.json"
    result = CliRunner().invoke(main, ["run", str(public[1]), "--functions_definition", str(public[0]),
                                       "--output", str(out), *MODEL])
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def test_run_on_ray_writes_the_output_of_a_plain_run(ray_cluster, public, plain, tmp_path):
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", str(public[1]), "--functions_definition", str(public[0]),
                                       "--output", str(out), *MODEL, "--ray-actors", "2", "--ray"])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == plain
    assert "wrote 11 results to" in result.stderr and "(0 failed)" in result.stderr
    assert not journal_path(out).exists()


def test_a_local_journal_continues_on_ray_and_a_killed_actor_loses_and_repeats_nothing(
        ray_cluster, public, plain, tmp_path, monkeypatch):
    """A local run's journal of 3 answers is resumed on Ray; one actor is killed (SIGKILL) after the first
    answer Ray gives: the journal then holds every request once, each entry the plain run's."""
    expected = json.loads(plain)
    functions = load_catalog(public[0])
    out = tmp_path / "out.json"
    local = Journal(journal_path(out))  # what an interrupted local run leaves
    local.open(run_identity(CONFIG, functions), resume=False)
    for i in (0, 4, 7):
        local.add(i, expected[i]["prompt"], expected[i])
    local.close()
    kept = tmp_path / "kept.journal.jsonl"
    remove = Journal.remove
    monkeypatch.setattr(journal_module.Journal, "remove",
                        lambda self: (shutil.copy(self.path, kept), remove(self))[-1])
    answering = RayAnswering(CONFIG, runtime_compiler, RayPlan("", 2))
    killed = []

    def kill_one(record):
        if not killed:
            killed.append(answering.pool)
            os.kill(answering.pool.pids()[0], signal.SIGKILL)

    outcome = run_file(CONFIG, public[0], public[1], out, runtime_compiler, kill_one, resume=True,
                       answering=answering)
    assert out.read_bytes() == plain
    assert outcome.resumed == 3 and outcome.stats.requests == 8
    assert answering.pool is None  # closed: its actors are killed
    assert killed[0].replaced == 1 and killed[0].retried >= 1  # the dead actor's requests went to another
    lines = [json.loads(line) for line in kept.read_text().splitlines()]
    assert lines[0] == {"journal": 1, "run": run_identity(CONFIG, functions)}
    positions = [line["position"] for line in lines[1:]]
    assert sorted(positions) == list(range(11))  # every request once: none lost, none written twice
    assert all(line["entry"] == expected[line["position"]] for line in lines[1:])


def test_eval_on_ray_scores_the_calls_of_a_plain_run(ray_cluster, public, plain, tmp_path):
    out = tmp_path / "eval.json"
    result = CliRunner().invoke(main, ["eval", str(public[0].parent), *MODEL, "--output", str(out),
                                       "--ray-actors", "2", "--ray"])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    calls = [{k: row[k] for k in ("prompt", "name", "parameters")} for row in rows]
    assert calls == json.loads(plain)
    right = sum(row["right_arguments"] for row in rows)
    assert result.stdout.startswith(f"cases 11: parsed 11, schema-valid 11, right function "
                                    f"{sum(row['right_function'] for row in rows)} ")
    assert f"right arguments {right} ({100 * right / 11:.1f}%)" in result.stdout
