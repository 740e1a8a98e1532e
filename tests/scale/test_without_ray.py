"""``--ray`` where Ray is not installed, and the flags' own errors: one line each, exit status 2, nothing
loaded."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from callmaybe.cli import main

MISSING = "error: --ray needs Ray, which is not installed: pip install 'callmaybe[ray]'\n"


@pytest.fixture
def no_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError


@pytest.mark.parametrize("args", [
    ["run", "--ray"],
    ["run", "--ray=auto"],
    ["eval", "schemas", "--ray"],
    ["serve", "--ray", "--port", "65001"],
])
def test_ray_flags_without_ray_say_how_to_install_it(no_ray, args):
    result = CliRunner().invoke(main, args)
    assert (result.exit_code, result.stderr) == (2, MISSING)


def test_ray_actors_without_ray_is_refused():
    result = CliRunner().invoke(main, ["run", "--ray-actors", "2"])
    assert (result.exit_code, result.stderr) == (2, "error: --ray-actors needs --ray\n")


def test_an_input_taken_for_the_address_is_refused(tmp_path):
    requests = tmp_path / "in.json"
    requests.write_text("[]")
    result = CliRunner().invoke(main, ["run", "--ray", str(requests)])
    assert (result.exit_code, result.stderr) == (2, f"error: --ray took {str(requests)!r} as the cluster's address: "
                                                    "give the input before --ray, or --ray=ADDRESS\n")
