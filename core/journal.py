"""The journal of a run: every answer appended as it is produced, so an interrupted or failed run loses nothing.

A journal is a JSON-lines file beside the output, named ``<output name>.journal.jsonl``. Its first line is the
header: ``{"journal": 1, "run": {...}}``, where ``run`` names what decides the answers (the model, the index,
the flags; :func:`callmaybe.runtime.answering.session.run_identity`). Each following line is one answer:
``{"position": i, "prompt": <the request's prompt>, "entry": <its result entry>}``, flushed and synced to disk
as soon as it is written. A line cut short by a kill or a full disk is ignored (a failed append is cut off
again where it can be). A journal that holds nothing (empty, or a header cut short: its disk was full when the
run started) is no journal: it is removed with one line saying so. A run holds an exclusive ``flock`` on its
journal, so a second run writing the same output is refused while the first is alive. The journal is deleted once the output file
is written from it; ``run --resume`` continues one, skipping the requests it holds (matched by position and
prompt text), and refuses one whose header names another model, index or flags.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import InputError, OutputError
from .messages import say

JOURNAL_VERSION = 1
#: A header line is far shorter than this (bytes): a longer file without a newline is not a cut header.
HEADER_MAX = 1 << 20


def _in_use(path: Path, mine=None) -> bool:
    """True when another process holds the journal at ``path`` (an exclusive ``flock``). With ``mine``, an
    open file of that journal, take the lock on it and keep it (released when it is closed)."""
    f = mine if mine is not None else open(path, "rb")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        if mine is None:
            f.close()
    return False


def journal_path(output: Path) -> Path:
    """The journal of a run writing ``output``: ``<output>.journal.jsonl`` in the same folder."""
    output = Path(output)
    return output.with_name(output.name + ".journal.jsonl")


@contextmanager
def _signals_held():
    """Within the block, SIGINT and SIGTERM are held and raised again when it ends, to the handlers there were,
    so that a record is written and counted, or neither: an interrupted run said "1 of 8 answers are kept" of a
    journal holding 2 (the signal's handler ran between the line's fsync and its count). A handler is recorded,
    not a signal mask: a blocked signal still reaches the process through any other thread, and Python runs
    its handler in the main thread all the same. Off the main thread (where handlers cannot be set), or where a
    handler was set outside Python, nothing is held."""
    held = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or any(signal.getsignal(s) is None for s in held):
        yield  # a handler set outside Python could not be put back
        return
    caught: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: caught.append(signum))
                for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in caught:
            signal.raise_signal(signum)


class Journal:
    """An open journal (see the module docstring). :meth:`open` starts or continues it; :meth:`add` appends
    one answer; :meth:`remove` deletes it. ``answers`` maps position -> (prompt, entry) of the answers it
    holds (those of an earlier run too)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.answers: dict[int, tuple[Any, dict]] = {}
        self._file = None

    def open(self, run: dict[str, Any], resume: bool) -> None:
        """Start a journal for ``run`` or, with ``resume``, continue the one there.

        Raises InputError when a journal exists and ``resume`` is not given (it holds the answers of an
        interrupted run), when ``resume`` is given and there is none, when the journal there was written for
        another run (the differing fields are named), or when it cannot be read or written.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # as the output's own write would
        except OSError as exc:
            raise InputError(f"{self.path}: cannot write the journal: {exc.strerror or exc}") from None
        if self.path.exists() and _in_use(self.path):
            raise self._busy()
        if self.path.exists() and self._holds_nothing():
            say(f"removing {self.path}: an empty journal (a run that could not write its first line left it)")
            self.path.unlink(missing_ok=True)
        exists = self.path.exists()
        if exists and not resume:
            raise InputError(f"{self.path}: a journal of an interrupted run is here; rerun with --resume to "
                             "continue it, or delete it to start again")
        if resume and not exists:
            raise InputError(f"{self.path}: no journal to resume (nothing was interrupted for this output)")
        created = False
        try:
            if exists:
                self._read(run)
                self._file = open(self.path, "ab", buffering=0)
                if self.path.read_bytes()[-1:] not in (b"", b"\n"):
                    self._append(b"\n")  # end the line a kill cut short, so the next one stands alone
            else:
                self._file = open(self.path, "xb", buffering=0)
                created = True
            if _in_use(self.path, self._file):  # lost a race with another run opening it
                self.close()
                raise self._busy()
            if not exists:
                self._write({"journal": JOURNAL_VERSION, "run": run})
        except OSError as exc:
            if created:  # a journal without its header is none: leave nothing behind
                self.remove()
            raise InputError(f"{self.path}: cannot write the journal: {exc.strerror or exc}") from None

    def _busy(self) -> InputError:
        return InputError(f"{self.path}: another callmaybe run is writing this output now (its journal is in use); "
                          "wait for it, or choose another --output")

    def done(self, position: int, prompt: Any) -> dict | None:
        """The entry already journaled for the request at ``position`` with this ``prompt``, else None."""
        held = self.answers.get(position)
        return held[1] if held is not None and held[0] == prompt else None

    def add(self, position: int, prompt: Any, entry: dict) -> None:
        """Append one answer and sync it to disk. Raises OutputError (one line naming the journal, how many
        answers it keeps and how to go on) when it cannot be written: a full disk, say."""
        with _signals_held():  # a SIGINT between the line and its count would say one answer fewer than kept
            try:
                self._write({"position": position, "prompt": prompt, "entry": entry})
            except OSError as exc:
                kept = len(self.answers)
                where = (f"the {kept} answer{'s' if kept != 1 else ''} before it are kept in {self.path}: rerun the "
                         "same command with --resume once there is room" if kept else "no answer was kept")
                raise OutputError(f"{self.path}: cannot append to the journal: {exc.strerror or exc}; {where}") \
                    from None
            self.answers[position] = (prompt, entry)

    def close(self) -> None:
        """Close the file (nothing is buffered: every record was written and synced, or cut off)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None

    def remove(self) -> None:
        """Delete and close the journal (once the output is written); deleted while still locked, so no other
        run can take it up in between."""
        self.path.unlink(missing_ok=True)
        self.close()

    def _write(self, record: dict) -> None:
        """Append ``record`` as one line and sync it; raises OSError, with the file cut back to where the line
        began where it can be (so a full disk leaves no half line)."""
        self._append((json.dumps(record) + "\n").encode("ascii"))  # a lone surrogate in a prompt stays an escape

    def _append(self, data: bytes) -> None:
        fd = self._file.fileno()
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise

    def _holds_nothing(self) -> bool:
        """True when the file at :attr:`path` holds no line: empty, or one line cut short (no newline)."""
        try:
            with open(self.path, "rb") as f:
                head = f.read(HEADER_MAX + 1)
        except OSError:
            return False
        return len(head) <= HEADER_MAX and b"\n" not in head

    def _read(self, run: dict[str, Any]) -> None:
        try:
            lines = self.path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{self.path}: cannot read the journal: {exc}") from None
        try:
            header = json.loads(lines[0])
            assert isinstance(header, dict) and header.get("journal") == JOURNAL_VERSION
        except (ValueError, AssertionError):
            raise InputError(f"{self.path}: not a callmaybe journal (bad first line)") from None
        theirs = header.get("run", {})
        differ = sorted(k for k in set(run) | set(theirs) if run.get(k) != theirs.get(k))
        if differ:
            raise InputError(f"{self.path}: the journal was written by a run with another "
                             f"{', '.join(differ)} ({'; '.join(f'{k}: {theirs.get(k)!r}' for k in differ)}); "
                             "rerun with the same options, or delete it to start again")
        for line in lines[1:]:
            try:
                record = json.loads(line)
                self.answers[int(record["position"])] = (record["prompt"], record["entry"])
            except (ValueError, KeyError, TypeError):
                continue  # the last line of a killed run may be cut short
