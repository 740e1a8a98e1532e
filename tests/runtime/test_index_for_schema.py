"""``Runtime.index_for_schema``: a response schema's index in the value form, compiled once and cached on disk,
never mistaken for (or taken as) the call index of a one-function catalog with the same fingerprint. A
Runtime without a model (its loading skipped), on a tiny vocabulary."""

from callmaybe.compiler.build import runtime_compiler
from callmaybe.core.callformat import compile_options
from callmaybe.core.catalog import Function
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.answering.session import RunConfig, Runtime

TOKENS = [b"{", b"}", b'"', b"a", b":", b" ", b"1", b"2", b",", b"name", b"parameters", None]
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(11,), vocab_size=12)


def bare_runtime(compiled: list) -> Runtime:
    runtime = Runtime.__new__(Runtime)  # no model: only what index_for and index_for_schema use

    def counting(functions, vocabulary, options, quiet):
        compiled.append(dict(options))
        return runtime_compiler(functions, vocabulary, options, quiet)

    runtime.config, runtime.compile, runtime.vocabulary = RunConfig(), counting, VOCAB
    runtime.options, runtime.model_dir = compile_options("plain"), None
    return runtime


def test_a_schema_index_is_a_value_index_compiled_once(tmp_path, monkeypatch):
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path))
    compiled = []
    runtime = bare_runtime(compiled)
    schema = {"type": "integer", "minimum": 1, "maximum": 2}
    index = runtime.index_for_schema("pick", schema)
    assert index.header["options"] == {"parameters_key": "parameters", "opening": "", "form": "value"}
    assert index.header["functions"] == ["pick"]
    again = runtime.index_for_schema("pick", schema)  # found in the cache, not compiled again
    assert len(compiled) == 1 and again.header["catalog_fingerprint"] == index.header["catalog_fingerprint"]
    # the call index of the same one-function catalog is another index
    call = runtime.index_for([Function(name="pick", description="", parameters=schema)])
    assert len(compiled) == 2 and "form" not in compiled[1]
    assert call.header["options"]["form"] == "call"
    assert runtime.index_for_schema("pick", schema).header["options"]["form"] == "value"
    assert len(compiled) == 2
