"""The layer rules and no import circle, checked by import-linter's contracts in pyproject.toml: core imports
neither side (nor torch, transformers or interegular); the compiler never imports the runtime or torch; the
runtime never imports the compiler or interegular; the server sits between cli and them, and never imports the
compiler; scale (Ray) sits between cli and the server, and never imports the compiler either; no package's
modules or sub-packages import each other in a circle."""

import ast
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
    contracts = (REPO / "pyproject.toml").read_text(encoding="utf-8").count("[[tool.importlinter.contracts]]")
    assert f"Contracts: {contracts} kept, 0 broken." in proc.stdout


def test_no_module_at_the_top_level_but_cli():
    """The user's top level: the three packages, cli.py and the package marker; nothing loose beside them."""
    loose = sorted(p.name for p in REPO.glob("*.py"))
    assert loose == ["__init__.py", "cli.py"]


def test_no_layer_imports_the_root_package():
    """The root ``callmaybe`` re-exports the public API lazily (import-linter cannot see through that), so no
    module of a layer may import from it: each imports what it needs from its own layer or a lower one."""
    offenders = []
    for path in sorted(REPO.glob("*/**/*.py")):
        layer = path.relative_to(REPO).parts[0]
        if layer not in ("core", "compiler", "runtime", "server", "scale"):
            continue
        package = ["callmaybe", *path.relative_to(REPO).parent.parts]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                if target == "callmaybe":
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name == "callmaybe" for a in node.names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_no_function_above_complexity_15():
    """ruff's McCabe check (C901, ``max-complexity = 15`` in pyproject.toml) over the package, its tests and
    its benchmarks: a function past it is split by the cases it handles."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff, "ruff not installed (pip install -e '.[test]')"
    proc = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(REPO)], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
