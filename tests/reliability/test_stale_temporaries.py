"""Issue 12 item 12: what a killed process leaves in the cache (a half-written file, a half-built folder) is
removed on the next run; what a live process is still writing is not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from callmaybe.core.files import atomic_file, remove_stale, temporary_dir

WRITER = """
import sys, time
from pathlib import Path
from callmaybe.core.files import atomic_file, temporary_dir
folder = Path(sys.argv[1])
with atomic_file(folder / "model.gguf") as out, temporary_dir(folder, ".hf-") as tmp:
    out.write(b"x" * 1000)
    out.flush()
    (tmp / "model.safetensors").write_bytes(b"y" * 2000)
    print("writing", flush=True)
    time.sleep(600)
"""


def start_writer(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "writing\n"
    return proc


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name.split(".")[1] if p.is_file() else p.name[:4] for p in folder.iterdir())


def test_temporaries_of_a_live_writer_are_kept_and_those_of_a_killed_one_removed(tmp_path):
    proc = start_writer(tmp_path)
    try:
        assert remove_stale(tmp_path, (".hf-",)) == 0
        assert leftovers(tmp_path) == [".hf-", "model"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (tmp_path / "model.gguf.verified").write_text("kept")  # not a temporary: never touched
    assert remove_stale(tmp_path, (".hf-",)) == 1000 + 2000
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf.verified"]


def test_a_folder_without_its_lock_yet_is_left_alone_while_young(tmp_path):
    young = tmp_path / ".hf-young"
    young.mkdir()
    (young / "part").write_bytes(b"z" * 10)
    assert remove_stale(tmp_path, (".hf-",)) == 0 and young.exists()
    old = time.time() - 3600
    os.utime(young, (old, old))
    assert remove_stale(tmp_path, (".hf-",)) == 10 and not young.exists()


def test_in_process_temporaries_are_in_use_and_cleaned_on_exit(tmp_path):
    with atomic_file(tmp_path / "a.bin") as out, temporary_dir(tmp_path, ".hf-") as folder:
        out.write(b"abc")
        assert remove_stale(tmp_path, (".hf-",)) == 0 and folder.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]
