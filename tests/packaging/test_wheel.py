"""The installed product: a wheel built from this tree carries the shipped indexes, and, installed in a fresh
virtualenv, answers the public set with the SmolLM2 test model from a shipped index (no compile); indexes in a
model folder are found too.

The fresh virtualenv gets the wheel itself (``pip install --no-deps``) and reaches the test virtualenv's
packages for its dependencies through a ``.pth`` file, so the test needs no download beyond the build backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODEL = "smollm2-135m-instruct"


def source_files() -> list[str]:
    """The files of this tree as git sees them: tracked, plus untracked ones that are not ignored."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         check=True, capture_output=True, text=True).stdout
    return sorted(f for f in out.splitlines() if (REPO / f).is_file())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a clean copy of the tree (an in-place build would reuse a stale ``build/``)."""
    src = tmp_path_factory.mktemp("src")
    for f in source_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, src / f)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(src)],
                   check=True, capture_output=True)
    (path,) = dist.glob("callmaybe-*.whl")
    return path


@pytest.fixture(scope="module")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    return venv


def shared_cache_without_indexes(tmp: Path) -> Path:
    """A cache root that reuses this machine's model, wheel and vocabulary caches but holds no index, so
    finding an index proves it came from the package or the model folder."""
    from callmaybe.core.files import cache_dir

    root = tmp / "cache"
    root.mkdir()
    for part in ("models", "wheels", "vocab"):
        (root / part).symlink_to(cache_dir(part), target_is_directory=True)
    return root


def test_wheel_carries_every_module_and_index_and_nothing_else(wheel):
    """The wheel's files under ``callmaybe/`` are exactly the tree's modules of the layers (core, compiler,
    runtime, server, scale), ``cli.py``, the package marker, the shipped indexes and the C sources of the native
    kernel and the DFA minimization (built on the user's machine at first use): no test, benchmark or stale
    file."""
    names = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("callmaybe/")}
    layers = ("core/", "compiler/", "runtime/", "server/", "scale/")
    want = {f"callmaybe/{f}" for f in source_files()
            if f in ("__init__.py", "cli.py") or (f.startswith(layers) and f.endswith(".py"))
            or (f.startswith("indexes/") and f.endswith(".safetensors"))
            or f in ("runtime/model/gemv.c", "compiler/automata/native.c")}
    assert {"callmaybe/runtime/model/gemv.c", "callmaybe/compiler/automata/native.c"} <= want and names == want


def test_installed_run_uses_the_shipped_index(fresh_venv, tmp_path):
    from callmaybe.runtime.model.load import resolve_model_dir

    resolve_model_dir(MODEL)  # fetch and convert once, in the test's own cache
    env = {**os.environ, "CALLMAYBE_CACHE": str(shared_cache_without_indexes(tmp_path))}
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [str(fresh_venv / "bin" / "callmaybe"), "run", "--model", MODEL, "--threads", "1", "--output", str(out),
         "--functions_definition", str(REPO / "schemas" / "functions_definition.json"),
         "--input", str(REPO / "data" / "input" / "function_calling_tests.json")],
        cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "compiling" not in proc.stderr
    results = json.loads(out.read_text())
    assert len(results) == 11 and all("name" in r for r in results)
    where = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", "import callmaybe; print(callmaybe.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(fresh_venv))


def test_installed_bench_says_it_needs_a_checkout(fresh_venv, tmp_path):
    proc = subprocess.run([str(fresh_venv / "bin" / "callmaybe"), "bench"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert proc.stderr == ("error: callmaybe bench runs from a source checkout (bench/ is not installed with the "
                           "package): run it there, e.g. `make bench`\n")


def test_an_index_in_the_model_folder_is_found(tmp_path, monkeypatch):
    """A model folder carrying ``callmaybe/*.safetensors``: the runtime finds the index there, with an empty
    cache and a compiler that must not be called."""
    from callmaybe import compile_catalog, load_catalog
    from callmaybe.runtime.model.load import resolve_model_dir
    from callmaybe.runtime.answering.session import RunConfig, Runtime

    converted = resolve_model_dir(MODEL)
    folder = tmp_path / "published-model"
    folder.mkdir()
    for f in converted.iterdir():
        (folder / f.name).symlink_to(f)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps([{"name": "ping", "description": "Ping a host",
                                    "parameters": {"host": {"type": "string"}}}]))
    functions = load_catalog(catalog)

    def must_not_compile(*args):
        raise AssertionError("compiled although the model folder carries the index")

    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path / "empty-cache"))
    runtime = Runtime(RunConfig(model=str(folder), threads=1), must_not_compile)
    compile_catalog(functions, runtime.vocabulary, folder / "callmaybe" / "catalog.safetensors")
    answerer = runtime.answerer(functions)
    entry, _ = answerer.answer({"prompt": "Ping the host example.org"})
    assert entry["name"] == "ping" and isinstance(entry["parameters"]["host"], str)
