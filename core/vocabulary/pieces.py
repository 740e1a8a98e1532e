"""The bytes of a token's stored piece: one decoder for every source that stores tokens as text pieces.

A tokenizer stores each token as a text *piece*; the bytes the token appends to the output follow from one of
two rules (the tokenizer.json and the GGUF sources both use :class:`PieceRule`):

* byte-level BPE (GPT-2; tokenizer.json ``ByteLevel`` pre-tokenizer/decoder, GGUF model ``gpt2``): every
  character of the piece stands for one byte through GPT-2's ``bytes_to_unicode`` table (OpenAI's
  ``gpt-2/src/encoder.py``; the same table as ``tokenizers``' ByteLevel and
  ``transformers.convert_slow_tokenizer.bytes_to_unicode``);
* SentencePiece (tokenizer.json ``Metaspace`` / ``Replace('▁', ' ')`` / ``ByteFallback``, GGUF model
  ``llama``): the replacement character (``▁``, U+2581) is a space, the rest is UTF-8; with byte fallback a
  ``<0xNN>`` piece (two hex digits) is the single byte NN. The decoder's removal of the sentence-initial space
  is a property of decoding a whole sequence, not of a token, and is ignored.

Token bytes are never taken from ``decode([id])``, which turns a token ending inside a UTF-8 character into U+FFFD.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Piece rules (:attr:`PieceRule.family`).
BYTE_LEVEL, SENTENCEPIECE = "byte_level", "sentencepiece"

#: SentencePiece's stand-in for a space (U+2581 LOWER ONE EIGHTH BLOCK).
SPACE_MARK = "▁"

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (256 entries).

    The printable bytes ``!``..``~``, ``¡``..``¬`` and ``®``..``ÿ`` stand for themselves; the other 68 bytes, in
    increasing order, take the characters U+0100, U+0101, ... (so a space, 0x20, is ``Ġ``, U+0120).
    """
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# str.translate table: an alphabet character -> the latin-1 character of its byte; a character below U+0144
# outside the alphabet -> U+FFFF, so that the latin-1 encoding below fails on it (as on anything above U+00FF).
_BYTE_LEVEL_TRANS = {cp: "\uffff" for cp in range(0x144)}
_BYTE_LEVEL_TRANS.update({ord(c): chr(b) for b, c in bytes_to_unicode().items()})


def byte_level_bytes(piece: str) -> bytes:
    """Bytes of a byte-level BPE piece (one byte per character). Raises ValueError when a character is outside
    GPT-2's alphabet."""
    try:
        return piece.translate(_BYTE_LEVEL_TRANS).encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"{piece!r} is not in GPT-2's byte-level alphabet") from None


def fallback_byte(piece: str) -> bytes | None:
    """The single byte of a byte-fallback piece ``<0xNN>`` (NN: two hex digits, either case), else None."""
    m = _BYTE_PIECE.fullmatch(piece)
    return bytes([int(m.group(1), 16)]) if m else None


def sentencepiece_bytes(piece: str, replacement: str = SPACE_MARK) -> bytes:
    """UTF-8 bytes of a SentencePiece piece with every ``replacement`` character turned into a space.

    Surrogate escapes (``\\udc80``..``\\udcff``, as ``bytes.decode(errors="surrogateescape")`` makes them) are
    the raw bytes they stand for, so that a piece read from raw bytes comes back unchanged. Raises ValueError
    for any other lone surrogate.
    """
    try:
        return piece.replace(replacement, " ").encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ValueError(f"{piece!r} is not UTF-8 text (it holds a lone surrogate)") from None


@dataclass(frozen=True)
class PieceRule:
    """How one tokenizer's pieces map to bytes.

    ``family``: :data:`BYTE_LEVEL` or :data:`SENTENCEPIECE`. For SentencePiece, ``replacement`` is the character
    that stands for a space and ``byte_fallback`` says whether ``<0xNN>`` pieces are single bytes.
    """

    family: str
    replacement: str = SPACE_MARK
    byte_fallback: bool = False

    def __post_init__(self) -> None:
        if self.family not in (BYTE_LEVEL, SENTENCEPIECE):
            raise ValueError(f"unknown piece rule {self.family!r}")

    def bytes_of(self, piece: str) -> bytes:
        """The bytes ``piece`` appends to the output (may be empty). Raises ValueError (its message starts with
        the piece's repr) for a byte-level piece outside GPT-2's alphabet or a piece holding a lone surrogate."""
        if self.family == BYTE_LEVEL:
            return byte_level_bytes(piece)
        if self.byte_fallback:
            b = fallback_byte(piece)
            if b is not None:
                return b
        return sentencepiece_bytes(piece, self.replacement)
