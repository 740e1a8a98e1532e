"""The layer rules, checked by import-linter's contracts in pyproject.toml: core imports neither side (nor torch,
transformers or interegular); the compiler never imports the runtime or torch; the runtime never imports the
compiler or interegular."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept(tmp_path):
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "lint-imports not installed (pip install -e '.[test]')"
    proc = subprocess.run([lint, "--no-cache", str(REPO / "pyproject.toml")], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 3 kept, 0 broken." in proc.stdout


def test_no_module_at_the_top_level_but_cli():
    """The user's top level: the three packages, cli.py and the package marker; nothing loose beside them."""
    loose = sorted(p.name for p in REPO.glob("*.py"))
    assert loose == ["__init__.py", "cli.py"]
