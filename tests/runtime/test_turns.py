"""A turn as tool_choice and parallel calls shape it (runtime/turns.py), with a scripted model over a byte
vocabulary: the model writes a given text (markers included); the turn decides, constrains and stops."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from callmaybe.compiler.compile import CompileOptions, compile_index
from callmaybe.core.catalog import Function, parse_catalog
from callmaybe.core.errors import InputError
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.masks import TokenIndex
from callmaybe.runtime.runner import Grounded
from callmaybe.runtime.turn import Sampling, TurnRequest
from callmaybe.runtime.turns import TurnDecoding, Vocab

from .tiny import TinyTokenizer

# printable ASCII and newline, the two bytes of "é" apart, then the call markers and EOS (control tokens: no
# bytes)
TOKENS = [bytes([b]) for b in range(32, 127)] + [b"\n", b'{"name": "', b"\xc3", b"\xa9", None, None, None]
OPEN, CLOSE, EOS = len(TOKENS) - 3, len(TOKENS) - 2, len(TOKENS) - 1
VOCAB = Vocabulary(name="tiny-turns", token_bytes=tuple(TOKENS), eos_ids=(EOS,), vocab_size=len(TOKENS))
MARKERS = {"<tool_call>": OPEN, "</tool_call>": CLOSE}
PROMPT = [ord("#") - 32]


class Tokenizer(TinyTokenizer):
    """Greedy byte encoding that knows the two call markers."""

    def __init__(self):
        super().__init__(TOKENS)

    def encode(self, text, add_special_tokens=False):
        ids = []
        for part in _split(text):
            ids += [MARKERS[part]] if part in MARKERS else super().encode(part)
        return ids

    def decode(self, ids):
        names = {v: k for k, v in MARKERS.items()}
        return "".join(names.get(i) or (TOKENS[i] or b"").decode() for i in ids)


def _split(text):
    out, rest = [], text
    while rest:
        hits = [(rest.find(m), m) for m in MARKERS if m in rest]
        if not hits:
            return out + [rest]
        at, m = min(hits)
        out += [p for p in (rest[:at], m) if p]
        rest = rest[at + len(m):]
    return out


class ScriptModel:
    """Prefers, at each step, the token that continues ``script`` (markers spelled as in the chat template) from
    what was generated so far; EOS once it is written. Its second choice is ``fallback``, then EOS; off the
    script (a token it did not want was forced or masked in), ``fallback`` comes first. Returns float logits of
    shape (vocab_size,)."""

    def __init__(self, script: str, fallback: int = EOS):
        self.script = Tokenizer().encode(script)
        self.fallback = fallback

    def __call__(self, generated: list[int]) -> torch.Tensor:
        logits = torch.zeros(len(TOKENS))
        logits[EOS] = 1.0
        logits[self.fallback] = 5.0  # its second choice, on the script or off it
        text, want = _text(generated), _text(self.script)
        if want.startswith(text):
            rest = want[len(text):]
            if not rest:
                logits[EOS] = 50.0
            else:
                nxt = next((i for i in (OPEN, CLOSE) if rest.startswith(_text([i]))), None)
                if nxt is None:
                    nxt = max((i for i, t in enumerate(TOKENS) if t and rest.startswith(t)),
                              key=lambda i: len(TOKENS[i]))
                logits[nxt] = 50.0
        else:
            logits[self.fallback] = 40.0
        return logits


def _text(ids):
    return b"".join({OPEN: b"\x01", CLOSE: b"\x02"}.get(i, TOKENS[i] or b"") for i in ids)


ADD = {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}
GREET = {"name": "greet", "description": "Greet someone.", "parameters": {
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
FUNCTIONS = parse_catalog([ADD, GREET], "test")


@pytest.fixture(scope="module")
def index():
    options = CompileOptions(parameters_key="arguments", opening="<tool_call>\n")
    return TokenIndex(compile_index(FUNCTIONS, VOCAB, options)[0], VOCAB.token_bytes)


def turn(index, script, call_format="tools", fallback=EOS, schema_index=None, judge=None, model=None, asked=None,
         functions=FUNCTIONS, ground=None, pair=None, **request):
    """Decode one turn of the scripted model (or ``model``, a callable as :class:`ScriptModel`) for the user
    message ``asked`` (default :data:`ASKED`) with the catalog ``functions`` (``index`` compiled from it) and
    the grounding callback ``ground`` (None: no grounding); returns (TurnResult, events)."""
    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, Tokenizer(), call_format)
    request.setdefault("tool_choice", "auto")
    req = TurnRequest([{"role": "user", "content": asked or ASKED}], functions, **request)
    events = []
    # as the engine renders it: a required call's opening ends the prompt ("tools" call format)
    opens = call_format == "tools" and (req.tool_choice == "required" or req.function is not None)
    prompt = PROMPT + (Tokenizer().encode("<tool_call>\n") if opens else [])
    row = TurnDecoding(req, vocab, prompt, prompt, index, schema_index, ground, events.append, judge=judge,
                       pair=pair)
    model, generated = model or ScriptModel(script, fallback), []
    while not row.take_forced():
        generated += row.pending
        if row.choose(model(generated[len(PROMPT):])):
            break
    return row.result(), events


#: The request's text (what grounding and the parallel-call rule read; the scripted model sees only "#").
ASKED = "Add 2 and 3, then greet Bob."
CALL = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
GREET_BOB = '{"name": "greet", "arguments": {"name": "Bob"}}'


def test_auto_text_answer(index):
    result, events = turn(index, "Hello there.")
    assert (result.content, result.calls, result.finish_reason) == ("Hello there.", [], "stop")
    assert "".join(e.data for e in events if e.kind == "text") == "Hello there."
    assert [e.kind for e in events][-1] == "done"


def test_auto_call_after_the_marker(index):
    result, events = turn(index, f"<tool_call>\n{CALL}\n</tool_call>")
    assert result.content is None and result.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert [e.kind for e in events] == ["call", "done"]


def test_auto_call_without_the_marker(index):
    result, _ = turn(index, CALL)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]


def test_auto_text_then_a_call(index):
    result, events = turn(index, f"Let me add.<tool_call>\n{CALL}\n</tool_call>")
    assert result.content == "Let me add."
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert [e.kind for e in events] == ["text"] * len("Let me add.") + ["call", "done"]


def test_none_never_calls(index):
    # the model wants its marker; under "none" the marker is masked out, so it falls back to text ("x")
    result, _ = turn(index, f"<tool_call>\n{CALL}", tool_choice="none", fallback=ord("x") - 32, max_tokens=4)
    assert (result.content, result.calls, result.finish_reason) == ("xxxx", [], "length")


def test_required_one_call_even_if_the_model_writes_text(index):
    result, _ = turn(index, "I would rather chat.", tool_choice="required", fallback=EOS)
    assert len(result.calls) == 1 and result.content is None and result.finish_reason == "tool_calls"
    fn = {f.name: f for f in FUNCTIONS}[result.calls[0].name]
    jsonschema.validate(result.calls[0].arguments, fn.parameters)


def test_parallel_calls_then_eos(index):
    script = f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{GREET_BOB}\n</tool_call>"
    result, events = turn(index, script, tool_choice="required", parallel=True)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3}), ("greet", {"name": "Bob"})]
    assert [e.data[0] for e in events if e.kind == "call"] == [0, 1]
    assert result.finish_reason == "tool_calls"


def test_without_parallel_the_turn_stops_after_one_call(index):
    script = f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{GREET_BOB}\n</tool_call>"
    result, _ = turn(index, script, tool_choice="required", parallel=False)
    assert [c.name for c in result.calls] == ["add"]


def test_a_repeated_call_ends_the_turn(index):
    script = f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{GREET_BOB}"
    result, _ = turn(index, script, tool_choice="required", parallel=True)
    assert [c.name for c in result.calls] == ["add"]


def test_parallel_stops_when_the_budget_holds_no_other_call(index):
    script = f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{GREET_BOB}\n</tool_call>"
    result, _ = turn(index, script, tool_choice="required", parallel=True, max_tokens=40)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert result.finish_reason == "tool_calls" and result.completion_tokens <= 40


def test_parallel_plain_format_one_call_per_line(index):
    plain = TokenIndex(compile_index(FUNCTIONS, VOCAB, CompileOptions(parameters_key="parameters"))[0],
                       VOCAB.token_bytes)
    script = CALL.replace("arguments", "parameters") + "\n" + GREET_BOB.replace("arguments", "parameters")
    result, _ = turn(plain, script, call_format="plain", tool_choice="auto", parallel=True)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3}), ("greet", {"name": "Bob"})]


def test_parallel_tries_another_call_where_the_model_would_stop(index):
    """After a call the model is not asked whether to go on (Qwen2.5-Coder-1.5B puts p < 0.02 on the newline
    in the plain format): another call is tried, and kept because the request asks for it."""
    plain = TokenIndex(compile_index(FUNCTIONS, VOCAB, CompileOptions(parameters_key="parameters"))[0],
                       VOCAB.token_bytes)
    first = CALL.replace("arguments", "parameters")
    script = ScriptModel(first + "\n" + GREET_BOB.replace("arguments", "parameters"))

    def wants_to_stop(generated):
        logits = script(generated)
        if _text(generated) == first.encode():
            logits[EOS] = 100.0
        return logits

    result, _ = turn(plain, None, call_format="plain", tool_choice="required", parallel=True, model=wants_to_stop)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3}), ("greet", {"name": "Bob"})]
    assert wants_to_stop(Tokenizer().encode(first)).argmax().item() == EOS


def test_parallel_with_a_named_function_tries_another_call_only_when_it_fits(index):
    """The room for another call is that of the named function (its pinned name, then its shortest
    completion), not the index's shortest call: with 70 tokens the turn ends after one call, done, instead of
    pinning a name it cannot finish (an error before)."""
    script = f"<tool_call>\n{CALL}\n</tool_call>"
    for max_tokens in (70, 76):
        result, events = turn(index, script, tool_choice="required", function="add", parallel=True,
                              max_tokens=max_tokens)
        assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
        assert (result.finish_reason, [e.kind for e in events]) == ("tool_calls", ["call", "done"])
        assert result.completion_tokens <= max_tokens


def test_named_function_is_pinned(index):
    result, _ = turn(index, f"<tool_call>\n{CALL}", tool_choice="required", function="greet",
                     fallback=ord("z") - 32)
    assert [c.name for c in result.calls] == ["greet"]
    jsonschema.validate(result.calls[0].arguments, GREET["parameters"])


def test_named_function_must_be_a_tool(index):
    with pytest.raises(InputError, match="tool_choice names 'shout', which is not among the tools"):
        turn(index, CALL, tool_choice="required", function="shout")


def test_text_budget_gives_length(index):
    result, _ = turn(index, "A long answer that goes on.", max_tokens=6)
    assert (result.content, result.finish_reason, result.completion_tokens) == ("A long", "length", 6)


def test_text_tokens_cut_a_declining_answer_short(index):
    result, _ = turn(index, "No function fits this request.", text_tokens=3)
    assert (result.content, result.finish_reason, result.calls) == ("No ", "length", [])


def test_response_schema_answer_is_valid_json(index):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    fns = parse_catalog([{"name": "reply", "parameters": schema}], "schema")
    value = TokenIndex(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments"))[0], VOCAB.token_bytes)
    # a call-shaped index stands in for the schema's own: the answer is the whole constrained text
    result, events = turn(index, "Sure: 5", tool_choice="none", schema_index=value, fallback=ord("7") - 32)
    assert result.finish_reason == "stop" and result.calls == []
    assert "".join(e.data for e in events if e.kind == "text") == result.content  # streamed as it is decoded
    assert len([e for e in events if e.kind == "text"]) > 3
    parsed = json.loads(result.content)
    assert parsed["name"] == "reply" and isinstance(parsed["arguments"]["answer"], int)


class Uniform:
    def __call__(self, generated):
        return torch.zeros(len(TOKENS))


def sampled(index, seed):
    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, Tokenizer(), "tools")
    req = TurnRequest([{"role": "user", "content": "#"}], FUNCTIONS, "required",
                      sampling=Sampling(temperature=1.0, top_p=0.9, seed=seed))
    row = TurnDecoding(req, vocab, PROMPT, PROMPT, index, None, None, lambda e: None)
    while not row.take_forced():
        if row.choose(Uniform()([])):
            break
    return row.result().calls


def test_sampling_is_reproducible_with_a_seed(index):
    first = sampled(index, 11)
    assert sampled(index, 11) == first
    assert any(sampled(index, s) != first for s in (12, 13, 14))
    for call in first:
        jsonschema.validate(call.arguments, {f.name: f for f in FUNCTIONS}[call.name].parameters)


def test_a_required_call_that_cannot_fit_is_refused(index):
    with pytest.raises(InputError, match=r"max_tokens 5 cannot hold a call: the shortest takes \d+ tokens"):
        turn(index, CALL, tool_choice="required", max_tokens=5)


def test_auto_call_that_cannot_fit_ends_without_a_call(index):
    result, events = turn(index, f"<tool_call>\n{CALL}", max_tokens=5)
    assert (result.content, result.calls, result.finish_reason) == (None, [], "length")
    assert [e.kind for e in events] == ["done"]


def test_a_failing_row_reports_an_error_and_nothing_else(index):
    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, Tokenizer(), "tools")
    events = []
    row = TurnDecoding(TurnRequest([{"role": "user", "content": "#"}], FUNCTIONS, "auto"), vocab, PROMPT, PROMPT,
                       index, None, None, events.append)
    assert row.choose(torch.zeros(3)) is True  # logits of the wrong shape: this row fails, nothing raises
    assert [e.kind for e in events] == ["error"] and row.result().finish_reason == "error"


def test_stop_texts_end_the_answer_before_them(index):
    result, events = turn(index, "Hello world. And more.", stop=("world",))
    assert (result.content, result.finish_reason) == ("Hello ", "stop")
    assert "".join(e.data for e in events if e.kind == "text") == "Hello "
    # a text that only begins like a stop is held back, then sent when the answer ends
    result, events = turn(index, "Hello wor", stop=("world",))
    assert (result.content, result.finish_reason) == ("Hello wor", "stop")
    assert "".join(e.data for e in events if e.kind == "text") == "Hello wor"
    # the first of several, wherever a token boundary falls
    result, _ = turn(index, "a.b;c.d", stop=(";", "."))
    assert result.content == "a"


def test_a_character_cut_in_half_by_the_budget_is_dropped(index):
    result, events = turn(index, "caf\u00e9!", max_tokens=4)  # c a f and the first byte of the e-acute
    assert (result.content, result.finish_reason) == ("caf", "length")
    assert "\ufffd" not in "".join(e.data for e in events if e.kind == "text")
    result, _ = turn(index, "caf\u00e9!", max_tokens=5)
    assert result.content == "caf\u00e9"


def value_index(schema):
    fns = [Function(name="answer", description="", parameters=schema)]  # as Runtime.index_for_schema wraps it
    return TokenIndex(compile_index(fns, VOCAB, CompileOptions(form="value"))[0], VOCAB.token_bytes)


def test_a_json_answer_is_checked_after_generation(index):
    unique = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    result, events = turn(index, "[7, 7]", tool_choice="none", schema_index=value_index(unique),
                          response_schema=unique)
    # withheld with a refusal (issue 30, item 2: never an error the server turns into a 500)
    assert (result.content, result.finish_reason, events[-1].kind) == (None, "content_filter", "done")
    assert result.refusal == "the answer fails the response schema after generation: [7, 7] has non-unique elements"
    result, _ = turn(index, "[7, 8]", tool_choice="none", schema_index=value_index(unique), response_schema=unique)
    assert (result.content, result.finish_reason, result.refusal) == ("[7, 8]", "stop", None)
    anything = {"type": "object"}
    result, events = turn(index, '{"a": 1, "a": 2}', tool_choice="none", schema_index=value_index(anything),
                          response_schema=anything)
    assert result.refusal == ("the answer fails the response schema after generation: the key 'a' is given "
                              "twice in one object")


def test_counts_of_a_turn(index):
    result, _ = turn(index, f"<tool_call>\n{CALL}\n</tool_call>")
    # the marker is chosen, its newline forced; the call's forced text is appended without the model
    assert result.completion_tokens == len(Tokenizer().encode(f"<tool_call>\n{CALL}"))
    assert 0 < result.forced_tokens < result.completion_tokens
    assert result.forward_passes == result.completion_tokens - result.forced_tokens


def test_a_call_the_request_does_not_ask_for_ends_the_turn(index):
    guess = '{"name": "greet", "arguments": {"name": "Alice"}}'
    script = (f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{GREET_BOB}\n</tool_call>\n"
              f"<tool_call>\n{guess}\n</tool_call>")
    result, events = turn(index, script, tool_choice="required", parallel=True)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3}), ("greet", {"name": "Bob"})]
    assert [e.kind for e in events] == ["call", "call", "done"]


def _calls(*arguments):
    return "\n".join(f'<tool_call>\n{{"name": "add", "arguments": {json.dumps(a)}}}\n</tool_call>' for a in arguments)


def test_a_first_call_that_joins_later_ones_is_left_out(index):
    # BFCL parallel_7, "the factorial of 5,10 and 15": the model read 5,10 as 510, then gave 5, 10 and 15
    asked = "Add 1 to 5,10 and 15."
    script = _calls({"a": 510, "b": 1}, {"a": 5, "b": 1}, {"a": 10, "b": 1}, {"a": 15, "b": 1})
    result, events = turn(index, script, tool_choice="required", parallel=True, asked=asked)
    assert [c.arguments for c in result.calls] == [{"a": 5, "b": 1}, {"a": 10, "b": 1}, {"a": 15, "b": 1}]
    # the calls wait for the turn's end (the first one may be left out), then go with their final positions
    assert [(e.kind, e.data[0] if e.kind == "call" else None) for e in events] == [
        ("call", 0), ("call", 1), ("call", 2), ("done", None)]
    assert [e.data[1].arguments for e in events if e.kind == "call"] == [c.arguments for c in result.calls]


def test_a_first_call_from_nowhere_that_joins_nothing_stays(index):
    asked = "Add 1 to 5,10 and 15."
    script = _calls({"a": 7, "b": 1}, {"a": 5, "b": 1}, {"a": 10, "b": 1}, {"a": 15, "b": 1})
    result, events = turn(index, script, tool_choice="required", parallel=True, asked=asked)
    assert [c.arguments["a"] for c in result.calls] == [7, 5, 10, 15]
    assert [e.kind for e in events] == ["call"] * 4 + ["done"]
    # two calls: nothing to join, the first stays
    result, _ = turn(index, _calls({"a": 510, "b": 1}, {"a": 5, "b": 1}), tool_choice="required", parallel=True,
                     asked=asked)
    assert [c.arguments["a"] for c in result.calls] == [510, 5]


def test_a_value_joined_with_and_is_split_at_the_turns_end(index):
    script = '<tool_call>\n{"name": "greet", "arguments": {"name": "Ann and Bob"}}\n</tool_call>'
    asked, pairs = "Greet Ann and Bob.", []

    def pair(key, first, second):
        pairs.append((key, first, second))
        return 0.01

    result, events = turn(index, script, tool_choice="required", parallel=True, asked=asked, pair=pair)
    assert [c.arguments for c in result.calls] == [{"name": "Ann"}, {"name": "Bob"}]
    assert pairs == [("name", "Ann", "Bob")]
    assert [(e.kind, e.data[0] if e.kind == "call" else None) for e in events] == [
        ("call", 0), ("call", 1), ("done", None)]
    # a pair read as one name stays whole, and so does every value without the callback; the pass counts
    again, _ = turn(index, script, tool_choice="required", parallel=True, asked=asked, pair=lambda *a: 0.9)
    assert [c.arguments for c in again.calls] == [{"name": "Ann and Bob"}]
    unasked, _ = turn(index, script, tool_choice="required", parallel=True, asked=asked)
    assert [c.arguments for c in unasked.calls] == [{"name": "Ann and Bob"}]
    assert result.forward_passes == again.forward_passes == unasked.forward_passes + 1
    # one call: nothing is split
    single, _ = turn(index, script, tool_choice="required", asked=asked, pair=pair)
    assert [c.arguments for c in single.calls] == [{"name": "Ann and Bob"}]


def test_a_failure_while_the_turn_closes_is_an_error_event(index):
    # the turn's end runs callbacks (here the pair check): a failure there must still end the turn with an
    # event, or the caller waits for ever (eval once lost two cases this way)
    script = '<tool_call>\n{"name": "greet", "arguments": {"name": "Ann and Bob"}}\n</tool_call>'

    def broken(key, first, second):
        raise KeyError("pair pass")

    result, events = turn(index, script, tool_choice="required", parallel=True, asked="Greet Ann and Bob.",
                          pair=broken)
    assert result.finish_reason == "error"
    assert [(e.kind, e.data) for e in events] == [("error", "KeyError: 'pair pass'")]


LOOP = parse_catalog([{"name": "field", "description": "Magnetic field of a loop.", "parameters": {
    "type": "object", "properties": {"current": {"type": "integer"}, "radius": {"type": "number"},
                                     "permeability": {"type": "integer"}}, "required": ["current", "radius"]}}], "test")


def _kept(fn, arguments, context, tokens):
    """A grounding callback that keeps every argument (as the runner does for stated values)."""
    return Grounded(arguments, {}, [], {k: {"action": "kept", "evidence": "stated"} for k in arguments}, 0)


@pytest.fixture(scope="module")
def loop_index():
    options = CompileOptions(parameters_key="arguments", opening="<tool_call>\n")
    return TokenIndex(compile_index(LOOP, VOCAB, options)[0], VOCAB.token_bytes)


def test_optional_numbers_whose_mention_a_required_argument_takes_are_left_out(loop_index):
    # BFCL parallel_95: "a radius of 1 meter" is the second loop's radius, in neither call a permeability
    asked = ("The first loop has a radius of 0.5 meters and 10 amperes, the second a radius of 1 meter and 15 "
             "amperes.")
    script = "\n".join(f'<tool_call>\n{{"name": "field", "arguments": {json.dumps(a)}}}\n</tool_call>'
                       for a in ({"current": 10, "radius": 0.5, "permeability": 1},
                                 {"current": 15, "radius": 1.0, "permeability": 1}))
    result, events = turn(loop_index, script, tool_choice="required", parallel=True, asked=asked, functions=LOOP,
                          ground=_kept)
    assert [c.arguments for c in result.calls] == [{"current": 10, "radius": 0.5}, {"current": 15, "radius": 1.0}]
    assert [c.model_arguments for c in result.calls] == [{"current": 10, "radius": 0.5, "permeability": 1},
                                                         {"current": 15, "radius": 1.0, "permeability": 1}]
    left_out = {"action": "left out", "evidence": "1 is stated once in the request, and the required radius takes it"}
    kept = {"action": "kept", "evidence": "stated"}
    assert result.grounding == [{"current": kept, "radius": kept, "permeability": left_out}] * 2
    assert [e.data[1].arguments for e in events if e.kind == "call"] == [c.arguments for c in result.calls]
    # one call: left out before it is reported; without grounding, kept
    one = '<tool_call>\n{"name": "field", "arguments": {"current": 15, "radius": 1, "permeability": 1}}\n</tool_call>'
    result, events = turn(loop_index, one, tool_choice="required", asked=asked, functions=LOOP, ground=_kept)
    assert [e.data[1].arguments for e in events if e.kind == "call"] == [{"current": 15, "radius": 1}]
    result, _ = turn(loop_index, one, tool_choice="required", asked=asked, functions=LOOP)
    assert result.calls[0].arguments == {"current": 15, "radius": 1, "permeability": 1}
    # stated twice: the permeability has its own mention
    result, _ = turn(loop_index, one, tool_choice="required", asked=asked + " Permeability 1.", functions=LOOP,
                     ground=_kept)
    assert result.calls[0].arguments == {"current": 15, "radius": 1, "permeability": 1}


def test_auto_call_in_a_code_fence(index):
    result, events = turn(index, "```json\n" + CALL + "\n```")
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert result.content is None and [e.kind for e in events] == ["call", "done"]


def test_a_code_block_that_is_not_a_call_is_text(index):
    result, _ = turn(index, "```python\nprint(5)\n```")
    assert (result.content, result.calls, result.finish_reason) == ("```python\nprint(5)\n```", [], "stop")


def test_auto_declines_a_call_from_nowhere(index):
    script = '<tool_call>\n{"name": "add", "arguments": {"a": 70, "b": 175}}'
    result, events = turn(index, script)  # the request asks to add 2 and 3 and greet Bob: 70 and 175 are not in it
    assert result.calls == [] and result.finish_reason == "stop"
    assert result.content == ("No call: add would take values the request does not give (none of its values is "
                              "in the request).")
    result, _ = turn(index, script, tool_choice="required")  # required: the call stands
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 70, "b": 175})]


def test_auto_declines_a_call_the_relevance_check_doubts(index):
    from callmaybe.runtime.relevance import Relevance

    asked = []

    def judge(verdict):
        def check(fn, request):
            asked.append((fn.name, request))
            return verdict
        return check

    doubt = Relevance(0.41, 3.0, False, "the model doubts that add does what the request asks (p(yes) 0.41 < 0.6)", 3)
    result, events = turn(index, f"<tool_call>\n{CALL}", judge=judge(doubt))
    assert asked == [("add", ASKED)]
    assert (result.calls, result.finish_reason) == ([], "stop")
    assert result.content == "No call: the model doubts that add does what the request asks (p(yes) 0.41 < 0.6)."
    sure = Relevance(0.9, 12.0, True, "the model says add does what the request asks", 3)
    result, _ = turn(index, f"<tool_call>\n{CALL}", judge=judge(sure))
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    unchecked, _ = turn(index, f"<tool_call>\n{CALL}")
    assert result.forward_passes == unchecked.forward_passes + 3  # the check's passes are counted
    asked.clear()
    result, _ = turn(index, f"<tool_call>\n{CALL}", judge=judge(doubt), tool_choice="required")
    assert asked == [] and [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]


# issue 30 ----------------------------------------------------------------------------------------------------


def test_a_named_function_needs_its_own_shortest_call():
    """Issue 30, item 3: the budget of a named function is its own shortest call (its pinned name and its
    shortest completion), not the shortest call of any tool: a budget between the two was an empty 200
    (``get_weather{city}`` and ``get_time{timezone: ^[A-Za-z_]+/[A-Za-z_]+$}``, ``get_time`` named)."""
    fns = parse_catalog([
        {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                               "required": ["city"]}},
        {"name": "get_time", "parameters": {"type": "object", "properties": {
            "timezone": {"type": "string", "pattern": "^[A-Za-z_]+/[A-Za-z_]+$"}}, "required": ["timezone"]}}],
        "test")
    idx = TokenIndex(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments",
                                                               opening="<tool_call>\n"))[0], VOCAB.token_bytes)
    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, Tokenizer(), "tools")
    req = TurnRequest([{"role": "user", "content": "#"}], fns, "required", function="get_time")
    need = TurnDecoding(req, vocab, PROMPT, PROMPT, idx, None, None, lambda e: None)._call_need()
    assert (idx.min_tokens(idx.start), need) == (41, 45)  # get_weather's shortest call, get_time's
    call = '{"name": "get_time", "arguments": {"timezone": "Europe/Paris"}}'
    for budget in (41, 44):
        with pytest.raises(InputError) as err:
            turn(idx, call, tool_choice="required", function="get_time", max_tokens=budget, functions=fns)
        assert str(err.value) == f"max_tokens {budget} cannot hold a call of get_time: the shortest takes 45 tokens"
    result, _ = turn(idx, call, tool_choice="required", function="get_time", max_tokens=45, functions=fns,
                     fallback=ord("a") - 32)
    assert [c.name for c in result.calls] == ["get_time"] and result.completion_tokens <= 45
    jsonschema.validate(result.calls[0].arguments, fns[1].parameters)


def test_a_call_the_check_after_generation_fails_is_withheld_with_a_refusal():
    """Issue 30, item 2: a call that fails a keyword the grammar does not enforce (``run`` takes such
    schemas; the server refuses them up front) ends the turn with a refusal, which ``run`` writes as an error
    entry and the server as ``finish_reason: content_filter``; never an error event (a 500)."""
    tags = {"name": "tag", "parameters": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}, "required": ["tags"]}}
    fns = parse_catalog([tags], "test")
    idx = TokenIndex(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments",
                                                               opening="<tool_call>\n"))[0], VOCAB.token_bytes)
    result, events = turn(idx, '<tool_call>\n{"name": "tag", "arguments": {"tags": ["x", "x"]}}', functions=fns,
                          tool_choice="required")
    assert (result.content, result.calls, result.finish_reason) == (None, [], "content_filter")
    assert result.refusal == ("the call fails the check after generation: arguments do not match tag's schema: "
                              "['x', 'x'] has non-unique elements")
    assert [e.kind for e in events] == ["done"]
