"""Hostile lengths get a clear error, fast (issue 12, item 8): a catalog whose prompt fills the model's context is
refused before any forward pass; a request whose prompt does gets an error entry and the others are answered."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from click.testing import CliRunner

from callmaybe.cli import main
from callmaybe.core.journal import journal_path

REPO = Path(__file__).resolve().parents[2]
MODEL = ["--model", "smollm2-135m-instruct", "--threads", "1", "--dtype", "float32"]  # context 8,192 tokens


def test_a_catalog_longer_than_the_context_is_refused_before_decoding(tmp_path):
    catalog = json.loads((REPO / "schemas" / "functions_definition.json").read_text())
    catalog[0]["description"] = "word " * 200_000  # 1 MB
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    (tmp_path / "in.json").write_text(json.dumps([{"prompt": "Greet john"}]))
    out = tmp_path / "out.json"
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["run", "--functions_definition", str(tmp_path / "catalog.json"), "--input",
                                  str(tmp_path / "in.json"), "--output", str(out), *MODEL])
    assert r.exit_code == 2
    m = re.fullmatch(r"error: the catalog's prompt is (\d+) tokens; the model's context is 8192 \(shorten the "
                     r"descriptions or split the catalog\)\n", r.stderr.splitlines(keepends=True)[-1])
    assert m and int(m.group(1)) > 200_000, r.stderr
    assert time.monotonic() - t0 < 60
    assert not out.exists() and not journal_path(out).exists()


def test_only_the_request_longer_than_the_context_gets_an_error_entry(tmp_path):
    requests = [{"prompt": "Greet " + "john " * 9000}, {"prompt": "What is the sum of 2 and 3?"}]
    (tmp_path / "in.json").write_text(json.dumps(requests))
    out = tmp_path / "out.json"
    r = CliRunner().invoke(main, ["run", "--functions_definition", str(REPO / "schemas" / "functions_definition.json"),
                                  "--input", str(tmp_path / "in.json"), "--output", str(out), *MODEL])
    assert r.exit_code == 1, r.output
    first, second = json.loads(out.read_text())
    assert re.fullmatch(r"the prompt is (\d+) tokens; the model's context is 8192", first["error"])
    assert int(first["error"].split()[3]) > 9000
    assert second == {"prompt": "What is the sum of 2 and 3?", "name": "fn_add_numbers",
                      "parameters": {"a": 2.0, "b": 3.0}}
