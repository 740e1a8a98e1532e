"""bench/jsonschemasuite.py: one group's evaluation and classification on hand-written groups, and one real
file of the JSON Schema Test Suite (skipped where ../shared is absent)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ..conftest import shared_path

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def suite():
    """bench/jsonschemasuite.py as a module (bench/ is no package: its folder goes on sys.path, as when it
    runs as a script, for its ``_schema_checks`` import), registered in sys.modules while the tests run."""
    name = "_bench_jsonschemasuite"
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / "jsonschemasuite.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclass looks its module up there
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
        sys.path.remove(str(BENCH))


def test_integer_group_agrees(suite):
    group = {"description": "integer", "schema": {"type": "integer"},
             "tests": [{"description": "one", "data": 1, "valid": True},
                       {"description": "a string", "data": "a", "valid": False}]}
    verdicts = suite.evaluate_group(group, "2020-12", "hand.json")
    assert [(v.test, v.accepted, v.cls) for v in verdicts] == [("one", True, suite.AGREE),
                                                               ("a string", False, suite.AGREE)]


def test_stated_design_rejections(suite):
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    group = {"description": "design", "schema": schema,
             "tests": [{"description": "declared order", "data": {"a": 1, "b": 2}, "valid": True},
                       {"description": "reversed", "data": {"b": 2, "a": 1}, "valid": True},
                       {"description": "undeclared key", "data": {"a": 1, "c": 3}, "valid": True},
                       {"description": "whole float", "data": {"a": 1.0}, "valid": True}]}
    verdicts = suite.evaluate_group(group, "7", "hand.json")
    assert [(v.accepted, v.cls) for v in verdicts] == [(True, suite.AGREE)] + [(False, suite.VALID_DESIGN)] * 3
    assert [v.reason for v in verdicts[1:]] == ["keys out of declaration order",
                                                "undeclared key (objects are closed)",
                                                "whole-number float for an integer"]


def test_refusal_counts_every_test(suite):
    group = {"description": "remote", "schema": {"$ref": "http://localhost:1234/integer.json"},
             "tests": [{"description": "x", "data": 1, "valid": True},
                       {"description": "y", "data": "a", "valid": False}]}
    verdicts = suite.evaluate_group(group, "2020-12", "hand.json")
    assert [(v.accepted, v.cls, v.reason) for v in verdicts] == [(None, suite.REFUSED, "remote reference")] * 2


def test_a_schema_admitting_nothing_rejects_every_test(suite):
    group = {"description": "nothing", "schema": False,
             "tests": [{"description": "x", "data": 1, "valid": False}]}
    verdicts = suite.evaluate_group(group, "2020-12", "hand.json")
    assert [(v.accepted, v.cls) for v in verdicts] == [(False, suite.AGREE)]


def test_remote_refs(suite):
    assert suite.remote_refs({"$ref": "http://localhost:1234/integer.json"}) == ["http://localhost:1234/integer.json"]
    local = {"$id": "http://example.com/root.json", "$defs": {"a": {"$id": "a.json", "type": "integer"}},
             "$ref": "a.json"}
    assert suite.remote_refs(local) == []
    assert suite.remote_refs({"$ref": "#/$defs/a", "$defs": {"a": {}}}) == []


def test_one_suite_file_runs(suite):
    shared_path("data", "json_schema_test_suite", "draft2020-12", "maxLength.json")
    verdicts, skipped = suite.run_draft("2020-12", ["maxLength"], progress=False)
    assert verdicts and not skipped
    assert all(v.cls in suite.CLASSES and v.file == "maxLength.json" for v in verdicts)
    assert not any(v.reason.startswith("CRASH") for v in verdicts)
