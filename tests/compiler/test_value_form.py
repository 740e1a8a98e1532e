"""The ``value`` form of an index: one value of a schema, no call around it (``response_format``), on a small
hand-made vocabulary with exact allowed-token sets."""

import pytest

from callmaybe.compiler.build import runtime_compiler
from callmaybe.compiler.compile import CompileOptions, compile_index
from callmaybe.compiler.grammar import value_grammar
from callmaybe.core.callformat import compile_options
from callmaybe.core.catalog import Function
from callmaybe.core.errors import SchemaError
from callmaybe.core.indexes import options_match
from callmaybe.core.vocabulary import Vocabulary

TOKENS = [b'{"', b"a", b'":', b" ", b'"', b"{", b"}", b"1", b"12", b"0", b"01", b"-", b"x", b'"}', b", ",
          b"[", b"]", None]
VOCAB = Vocabulary(name="tiny", token_bytes=tuple(TOKENS), eos_ids=(17,), vocab_size=20)
T = {t: i for i, t in enumerate(TOKENS) if t is not None}
EOS = [17]


def ids(*tokens):
    return sorted(T[t] for t in tokens)


def value_index(schema):
    fn = Function(name="answer", description="", parameters=schema)
    index, _ = compile_index([fn], VOCAB, CompileOptions(form="value"))
    dfa = value_grammar(schema, name="answer").dfa

    def allowed(text: bytes) -> list[int]:
        state = dfa.state_after(text)
        assert state >= 0, text
        return list(index.allowed_tokens(state))

    return index, dfa, allowed


def test_a_bare_integer_with_a_minimum():
    index, dfa, allowed = value_index({"type": "integer", "minimum": 0})
    assert allowed(b"") == ids(b"1", b"12", b"0", b"-")  # no leading zero, no object; a minus for "-0" only
    assert allowed(b"-") == ids(b"0")
    assert allowed(b"0") == EOS
    assert allowed(b"1") == sorted(ids(b"1", b"12", b"0", b"01") + EOS)
    assert [dfa.accepts(t) for t in (b"0", b"120", b"-1", b"01", b'{"a": 1}', b"-0")] == [True, True, False, False,
                                                                                        False, True]
    assert index.header["options"] == {"parameters_key": "parameters", "opening": "", "form": "value"}
    assert index.header["functions"] == ["answer"] and index.header["regex"]


def test_an_object_value_is_the_object_alone_not_a_call():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    _, dfa, allowed = value_index(schema)
    assert allowed(b"") == ids(b'{"', b"{")
    assert allowed(b'{"a": ') == ids(b"1", b"12", b"0", b"-")
    assert allowed(b'{"a": 12') == ids(b"1", b"12", b"0", b"01", b"}")
    assert allowed(b'{"a": 12}') == EOS
    assert dfa.accepts(b'{"a": 12}')
    assert not dfa.accepts(b'{"name": "answer", "parameters": {"a": 12}}')


def test_an_array_root_and_a_string_root():
    _, dfa, allowed = value_index({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    assert allowed(b"") == ids(b"[")
    assert dfa.accepts(b"[]") and dfa.accepts(b"[1, 0]") and not dfa.accepts(b"[1, 0, 1]")
    _, dfa, allowed = value_index({"enum": ["x", "a"]})
    assert allowed(b"") == ids(b'"')
    assert allowed(b'"') == ids(b"x", b"a")
    assert dfa.accepts(b'"x"') and not dfa.accepts(b'"xa"')


def test_the_value_form_compiles_exactly_one_schema():
    fns = [Function("f", "", {"type": "integer"}), Function("g", "", {"type": "integer"})]
    with pytest.raises(ValueError, match="one schema"):
        compile_index(fns, VOCAB, CompileOptions(form="value"))
    with pytest.raises(ValueError, match="unknown index form"):
        CompileOptions(form="values")
    with pytest.raises(SchemaError):
        compile_index([Function("f", "", {"type": "integer", "minimum": 3, "maximum": 1})], VOCAB,
                      CompileOptions(form="value"))


def test_compile_options_of_the_value_form_and_matching():
    assert compile_options("plain") == {"parameters_key": "parameters", "opening": ""}
    assert compile_options("tools", "value") == {"parameters_key": "arguments", "opening": "", "form": "value"}
    with pytest.raises(ValueError):
        compile_options("plain", "nothing")
    value_header = {"options": {"parameters_key": "parameters", "opening": "", "form": "value"}}
    call_header = {"options": {"parameters_key": "parameters", "opening": "", "form": "call"}}
    old_header = {"options": {"parameters_key": "parameters", "opening": ""}}  # before forms existed
    plain, value = compile_options("plain"), compile_options("plain", "value")
    assert options_match(value_header, value) and not options_match(value_header, plain)
    assert options_match(call_header, plain) and options_match(old_header, plain)
    assert not options_match(call_header, value) and not options_match(old_header, value)


def test_the_runtime_compiler_takes_the_value_form():
    index = runtime_compiler([Function("answer", "", {"type": "boolean"})], VOCAB,
                             compile_options("plain", "value"), True)
    assert index.header["options"]["form"] == "value"
