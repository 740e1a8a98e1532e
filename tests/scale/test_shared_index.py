"""SharedCompile: a new catalog compiled once for every replica that shares the folder (no Ray needed: two
threads stand for two replicas, each with its own SharedCompile, as each replica has)."""

from __future__ import annotations

import threading
import time

from callmaybe.compiler.build import runtime_compiler
from callmaybe.core.callformat import compile_options
from callmaybe.core.catalog import Function
from callmaybe.core.indexfile import to_bytes
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.scale.shared_index import SharedCompile

VOCAB = Vocabulary(name="bytes", token_bytes=tuple(bytes([b]) for b in range(256)) + (None,), eos_ids=(256,),
                   vocab_size=257)
FUNCTIONS = [Function(name="get_weather", description="", parameters={
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]})]
OPTIONS = compile_options("plain")


class Counted:
    """The real compiler, slowed down and counted: how many times each replica really compiled."""

    def __init__(self):
        self.calls = 0

    def __call__(self, functions, vocabulary, options, quiet):
        self.calls += 1
        time.sleep(0.3)  # long enough for the other replica to ask meanwhile
        return runtime_compiler(functions, vocabulary, options, quiet)


def test_two_replicas_asking_at_once_compile_once(tmp_path):
    compilers = [Counted(), Counted()]
    replicas = [SharedCompile(c, tmp_path) for c in compilers]
    indexes = [None, None]

    def ask(k):
        indexes[k] = replicas[k](FUNCTIONS, VOCAB, OPTIONS, True)

    threads = [threading.Thread(target=ask, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c.calls for c in compilers) == [0, 1]
    assert sorted((r.counts["compiled"], r.counts["shared"]) for r in replicas) == [(0, 1), (1, 0)]
    assert to_bytes(indexes[0]) == to_bytes(indexes[1])
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".lock", ".safetensors"]  # one index, its lock


def test_a_corrupt_shared_index_is_compiled_again_and_replaced(tmp_path, capsys):
    first = SharedCompile(Counted(), tmp_path)
    first(FUNCTIONS, VOCAB, OPTIONS, True)
    (path,) = tmp_path.glob("*.safetensors")
    path.write_bytes(path.read_bytes()[:100])
    again = Counted()
    index = SharedCompile(again, tmp_path)(FUNCTIONS, VOCAB, OPTIONS, True)
    assert again.calls == 1
    assert path.read_bytes() == to_bytes(index)
    assert capsys.readouterr().err.startswith(f"compiling again: {path}: ")


def test_other_options_are_another_index(tmp_path):
    shared = SharedCompile(Counted(), tmp_path)
    shared(FUNCTIONS, VOCAB, OPTIONS, True)
    shared(FUNCTIONS, VOCAB, compile_options("tools"), True)
    shared(FUNCTIONS, VOCAB, OPTIONS, True)
    assert shared.counts == {"compiled": 2, "shared": 1}
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
