"""The GGUF source: the tokenizer stored in a GGUF file's metadata (llama.cpp's format).

GGUF metadata is read by the small parser here (checked against ``gguf.GGUFReader`` by the tests) rather than
by the ``gguf`` package, whose ``GGUFReader`` spends seconds building views of tensors this source never
reads. Format: ``ggml/docs/gguf.md`` in the ggml repository (versions 2 and 3, either byte order).
Tokenizer models: ``gpt2`` (byte-level BPE) and ``llama`` (SentencePiece with ``<0xNN>`` byte tokens).
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VocabularyError
from .base import EOS_TOKEN_TEXTS, clear_eos
from .pieces import BYTE_LEVEL, SENTENCEPIECE, PieceRule, fallback_byte

# Token types (tokenizer.ggml.token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# Value types: scalars by struct format, then strings and arrays.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

#: The long arrays the parser keeps (every other array of more than 16 elements is skipped).
WANTED_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")

# Keys whose token id is an EOS id.
_EOS_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


class GgufHeader:
    """The metadata and tensor shapes of a GGUF file.

    ``kv``: key -> value (int, float, bool, str, or a list); arrays of more than 16 elements other than
    :data:`WANTED_ARRAYS` are None; the tokenizer's tokens are kept as raw UTF-8 ``bytes``.
    ``tensor_shapes``: tensor name -> dimensions as stored (GGUF order: the fastest-varying first; the embedding
    ``token_embd.weight`` is ``(hidden size, vocabulary size)``). Raises VocabularyError for a file that cannot
    be read or is not a GGUF file of version 2 or later.
    """

    def __init__(self, path: Path):
        self.path = path
        self.kv: dict[str, Any] = {}
        self.tensor_shapes: dict[str, tuple[int, ...]] = {}
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                self._parse(buf)
        except (OSError, ValueError, struct.error, IndexError, UnicodeDecodeError) as e:
            raise VocabularyError(f"cannot read GGUF file '{path}': {e}") from None

    def _parse(self, buf: mmap.mmap) -> None:
        if buf[:4] != b"GGUF":
            raise ValueError("not a GGUF file (bad magic)")
        (version,) = struct.unpack_from("<I", buf, 4)
        self.e = e = "<" if version & 0xFFFF else ">"
        if e == ">":
            (version,) = struct.unpack_from(">I", buf, 4)
        if version < 2:
            raise ValueError(f"GGUF version {version} is not supported (2 or later)")
        n_tensors, n_kv = struct.unpack_from(e + "QQ", buf, 8)
        self.buf, self.off = buf, 24
        for _ in range(n_kv):
            key = self._string().decode("utf-8")
            vtype = self._u32()
            self.kv[key] = self._value(vtype, keep=key in WANTED_ARRAYS)
        for _ in range(n_tensors):
            name = self._string().decode("utf-8", "replace")
            n_dims = self._u32()
            dims = struct.unpack_from(f"{e}{n_dims}Q", buf, self.off)
            self.off += 8 * n_dims + 4 + 8  # dims, ggml type, data offset
            self.tensor_shapes[name] = dims
        del self.buf

    def _u32(self) -> int:
        (v,) = struct.unpack_from(self.e + "I", self.buf, self.off)
        self.off += 4
        return v

    def _string(self) -> bytes:
        (n,) = struct.unpack_from(self.e + "Q", self.buf, self.off)
        start = self.off + 8
        self.off = start + n
        return self.buf[start : self.off]

    def _value(self, vtype: int, keep: bool) -> Any:
        e, buf = self.e, self.buf
        if vtype == _STRING:
            return self._string().decode("utf-8", "replace")
        if vtype in _SCALARS:
            fmt = e + _SCALARS[vtype]
            (v,) = struct.unpack_from(fmt, buf, self.off)
            self.off += struct.calcsize(fmt)
            return v
        if vtype != _ARRAY:
            raise ValueError(f"unknown GGUF value type {vtype}")
        etype = self._u32()
        (count,) = struct.unpack_from(e + "Q", buf, self.off)
        self.off += 8
        if etype in _SCALARS:
            size = struct.calcsize(_SCALARS[etype])
            start = self.off
            self.off += size * count
            if not keep and count > 16:
                return None
            dtype = np.dtype(_SCALARS[etype].replace("?", "b1")).newbyteorder(e)
            return np.frombuffer(buf, dtype=dtype, count=count, offset=start).tolist()
        if etype == _STRING:
            if not keep and count > 16:
                unpack = struct.Struct(e + "Q").unpack_from
                off = self.off
                for _ in range(count):
                    off += 8 + unpack(buf, off)[0]
                self.off = off
                return None
            if not keep:
                return [self._string().decode("utf-8", "replace") for _ in range(count)]
            return [self._string() for _ in range(count)]  # raw UTF-8 bytes, decoded by the caller
        return [self._value(etype, keep) for _ in range(count)]


def table_from_gguf(path: Path) -> tuple[list[bytes | None], list[int], int | None]:
    """(token bytes, EOS ids, vocabulary size or None) of a GGUF file's tokenizer.

    Only NORMAL tokens (and, for ``llama``, BYTE tokens ``<0xNN>``) have bytes. EOS ids: the ids of
    ``tokenizer.ggml.eos_token_id`` / ``eot_token_id`` / ``eom_token_id`` and the control, user-defined and
    unknown tokens whose text is in :data:`EOS_TOKEN_TEXTS`. The size is the vocabulary dimension of
    ``output.weight`` or ``token_embd.weight``, else ``<architecture>.vocab_size``, else None.
    Raises VocabularyError for an unreadable file, a file without tokens, or an unsupported tokenizer model.
    """
    h = GgufHeader(path)
    kv = h.kv
    model = kv.get("tokenizer.ggml.model")
    tokens = kv.get("tokenizer.ggml.tokens")
    if not tokens:
        raise VocabularyError(f"GGUF file '{path}' holds no tokenizer (tokenizer.ggml.tokens)")
    types = kv.get("tokenizer.ggml.token_type") or [NORMAL] * len(tokens)
    if len(types) != len(tokens):
        raise VocabularyError(f"GGUF file '{path}': {len(tokens)} tokens but {len(types)} token types")
    if model == "gpt2":
        rule, errors = PieceRule(BYTE_LEVEL), "strict"
    elif model == "llama":
        # Byte fallback is by token type here (BYTE), not by the piece's shape; raw bytes pass through unchanged.
        rule, errors = PieceRule(SENTENCEPIECE), "surrogateescape"
    else:
        raise VocabularyError(
            f"GGUF file '{path}': unsupported tokenizer model {model!r} ('gpt2' byte-level BPE and "
            "'llama' SentencePiece are supported)"
        )

    table: list[bytes | None] = [None] * len(tokens)
    texts: dict[str, int] = {}
    for i, (raw, ty) in enumerate(zip(tokens, types)):
        if ty == NORMAL:
            try:
                table[i] = rule.bytes_of(raw.decode("utf-8", errors)) or None
            except ValueError as e:  # "<piece repr> is not in GPT-2's byte-level alphabet"
                raise VocabularyError(f"GGUF file '{path}': token {i} {e}") from None
        elif ty == BYTE and model == "llama":
            table[i] = fallback_byte(raw.decode("utf-8", "replace"))
            if table[i] is None:
                raise VocabularyError(f"GGUF file '{path}': byte token {i} {raw!r} is not <0xNN>")
        elif ty in (CONTROL, USER_DEFINED, UNKNOWN):
            texts.setdefault(raw.decode("utf-8", "replace"), i)

    eos = {texts[t] for t in EOS_TOKEN_TEXTS if t in texts}
    for key in _EOS_KEYS:
        v = kv.get(key)
        if isinstance(v, int) and 0 <= v < len(tokens):
            eos.add(v)
    return clear_eos(table, eos), sorted(eos), _vocab_size(h)


def _vocab_size(h: GgufHeader) -> int | None:
    for name in ("output.weight", "token_embd.weight"):
        shape = h.tensor_shapes.get(name)
        if shape and len(shape) == 2:
            return int(shape[1])
    arch = h.kv.get("general.architecture")
    v = h.kv.get(f"{arch}.vocab_size") if arch else None
    return v if isinstance(v, int) and v > 0 else None
