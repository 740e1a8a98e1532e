"""A scripted model that always wants an out-of-range value (too many digits, a duplicate, a value outside
bounds, a format it breaks) still yields a valid call (issue 13): the masks leave it no invalid token."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest
import torch

from callmaybe.compiler.compile import compile_index
from callmaybe.core.catalog import parse_catalog
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.decoding.decoder import generate
from callmaybe.runtime.decoding.index import open_index

from .tiny import TinyTokenizer

# every printable ASCII byte is a token, plus a few longer ones the model likes; EOS last
TOKENS = [bytes([b]) for b in range(0x20, 0x7F)] + [b'"red"', b"99", b"300", b"1e9", None]
EOS = len(TOKENS) - 1
VOCAB = Vocabulary(name="bytes", token_bytes=tuple(TOKENS), eos_ids=(EOS,), vocab_size=len(TOKENS))
ID = {t: i for i, t in enumerate(TOKENS) if t is not None}


class Stubborn:
    """Prefers the tokens of ``preference`` (most preferred first) at every step, then EOS."""

    def __init__(self, preference: list[bytes]):
        self.preference = [ID[t] for t in preference] + [EOS]

    def __call__(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        logits = torch.zeros(1, input_ids.shape[1], VOCAB.vocab_size)
        for rank, tok in enumerate(self.preference):
            logits[0, -1, tok] = 100.0 - rank
        return SimpleNamespace(logits=logits, cache=cache)


CASES = [
    # (parameter schema, what the model keeps asking for, the call it gets: its first choice wherever the
    # mask allows it, else the allowed token of lowest id; "1" may start 1e-05, so (0, 1) gets 0.111...; after
    # "-" the lowest is "0": "-0", the value 0, is valid JSON and within [-5, 5])
    ({"type": "integer", "maximum": 100}, [b"300", b"99", b"9"], 99),
    ({"type": "integer", "minimum": -5, "maximum": 5}, [b"99", b"9", b"-"], 0),
    ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, [b"1e9", b"1", b"0", b"."], 0.1111111111111111),
    ({"type": "integer", "multipleOf": 5, "maximum": 20}, [b"99", b"9", b"7", b"1"], 10),
    ({"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 2, "maxItems": 3,
      "uniqueItems": True}, [b'"red"', b'"', b",", b" ", b"g", b"b", b"]"], None),
    ({"type": "string", "format": "ipv4"}, [b"300", b"3", b".", b"1", b'"'], None),
]


@pytest.mark.parametrize("schema, preference, expected", CASES, ids=[json.dumps(c[0])[:60] for c in CASES])
def test_a_stubborn_model_still_writes_a_valid_call(schema, preference, expected):
    fns = parse_catalog([{"name": "f", "parameters": {"p": schema}}], "t")
    data, _ = compile_index(fns, VOCAB)
    gen = generate(Stubborn(preference), TinyTokenizer(TOKENS), open_index(data, VOCAB.token_bytes),
                   [ID[b"x"]], max_tokens=64)
    call = json.loads(gen.text)
    value = call["parameters"]["p"]
    jsonschema.validate(value, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    if expected is not None:
        assert value == expected and type(value) is type(expected)
    print(gen.text)
