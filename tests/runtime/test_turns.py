"""A turn as tool_choice and parallel calls shape it (runtime/answering/turns.py), with a scripted model over a byte
vocabulary: the model writes a given text (markers included); the turn decides, constrains and stops."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial

import jsonschema
import pytest
import torch

from callmaybe.compiler.compile import CompileOptions, compile_index
from callmaybe.core.catalog import Function, parse_catalog
from callmaybe.core.errors import InputError
from callmaybe.core.vocabulary import Vocabulary
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.answering.runner import Grounded
from callmaybe.runtime.decoding.turn import Sampling, TurnRequest
from callmaybe.runtime.answering.turns import TurnDecoding, Vocab, answered_calls

from .tiny import TinyTokenizer

# printable ASCII and newline, the two bytes of "é" apart, then the call markers and EOS (control tokens: no
# bytes)
TOKENS = [bytes([b]) for b in range(32, 127)] + [b"\n", b'{"name": "', b"```", b"\xc3", b"\xa9", None, None, None]
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
        text, want = _align(_text(generated), _text(self.script))
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


class FirstOf:
    """The first of several :class:`ScriptModel` s whose script what was generated still follows (the last one
    when none does): a model that would rather write the first script, and writes the next when the turn
    takes another way."""

    def __init__(self, *models: ScriptModel):
        self.models = models

    def __call__(self, generated: list[int]) -> torch.Tensor:
        for m in self.models:
            text, want = _align(_text(generated), _text(m.script))
            if want.startswith(text):
                return m(generated)
        return self.models[-1](generated)


def prefers_call(call: str, text: str) -> FirstOf:
    """A model whose first choice is ``call`` and whose second, at the first token, is ``text`` (which it then
    writes): the model a declined call falls back on."""
    first = Tokenizer().encode(text)[0]
    return FirstOf(ScriptModel(call, fallback=first), ScriptModel(text))


def _align(text: bytes, want: bytes) -> tuple[bytes, bytes]:
    """``text`` (generated) and ``want`` (the script) with what the turn writes around a call the script writes
    otherwise taken out: a marker the turn put before a call the script writes without it, and a code fence
    the script opens its call with (the turn decodes the call itself): the model writes the same call."""
    at = text.find(b"\x01\n")
    if at >= 0 and b"\x01" not in want[at:at + 1] and want.startswith(text[:at]):
        text = text[:at] + text[at + 2:]  # a marker the turn forced where the script writes its call as text
        for fence in (b"```json\n", b"```\n"):
            if want[at:].startswith(fence) and not text[at:].startswith(b"`"):
                want = want[:at] + want[at + len(fence):]
    return text, want


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
    return open_index(compile_index(FUNCTIONS, VOCAB, options)[0], VOCAB.token_bytes)


def turn(index, script, call_format="tools", fallback=EOS, schema_index=None, judge=None, model=None, asked=None,
         functions=FUNCTIONS, ground=None, pair=None, evidence=False, messages=None, confirm=None, narrowed=None,
         **request):
    """Decode one turn of the scripted model (or ``model``, a callable as :class:`ScriptModel`) for the user
    message ``asked`` (default :data:`ASKED`) with the catalog ``functions`` (``index`` compiled from it) and
    the grounding callback ``ground`` (None: no grounding); returns (TurnResult, events). ``narrowed``: a list
    that gets, per pass, the ids the row named (:meth:`TurnDecoding.needed_ids`), whose logits alone the model
    then gives (-inf elsewhere), as an output layer that computes only those does."""
    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, Tokenizer(), call_format)
    request.setdefault("tool_choice", "auto")
    req = TurnRequest(messages or [{"role": "user", "content": asked or ASKED}], functions, **request)
    events = []
    # as the engine renders it: a required call's opening ends the prompt ("tools" call format)
    opens = call_format == "tools" and (req.tool_choice == "required" or req.function is not None)
    prompt = PROMPT + (Tokenizer().encode("<tool_call>\n") if opens else [])
    row = TurnDecoding(req, vocab, prompt, prompt, index, schema_index, ground, events.append, judge=judge,
                       pair=pair, evidence=evidence, confirm=confirm)
    model, generated = model or ScriptModel(script, fallback), []
    while not row.take_forced():
        if row.truncate_to is not None:  # a declined call: back to the prompt, as the batch does
            generated, row.truncate_to = generated[:row.truncate_to], None
        generated += row.pending
        logits = model(generated[len(PROMPT):])
        if narrowed is not None:
            ids = row.needed_ids()
            narrowed.append(None if ids is None else ids.tolist())
            if ids is not None:
                logits = torch.full_like(logits, float("-inf")).index_copy_(0, ids, logits[ids])
        if row.choose(logits):
            break
    return row.result(), events


#: The request's text (what grounding and the parallel-call rule read; the scripted model sees only "#").
ASKED = "Add 2 and 3, then greet Bob."
CALL = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
GREET_BOB = '{"name": "greet", "arguments": {"name": "Bob"}}'


@pytest.mark.parametrize("script, choice", [
    ("Hello there.", "auto"), (f"<tool_call>\n{CALL}\n</tool_call>", "auto"),
    (f"Let me add.<tool_call>\n{CALL}\n</tool_call>", "auto"), (GREET_BOB, "required")])
def test_a_turn_decodes_the_same_from_the_logits_of_the_ids_it_names(index, script, choice):
    """Inside a call the next choice reads only the ids its mask allows: given those logits alone (-inf
    elsewhere, as the int8 output layer gives them), the turn is the same; deciding and text read them all."""
    want, want_events = turn(index, script, tool_choice=choice)
    narrowed = []
    got, events = turn(index, script, tool_choice=choice, narrowed=narrowed)
    def timeless(events):  # the done event carries the result, whose seconds differ
        return [(e.kind, replace(e.data, seconds=0) if e.kind == "done" else e.data) for e in events]

    assert replace(got, seconds=0) == replace(want, seconds=0) and timeless(events) == timeless(want_events)
    if choice == "auto":
        assert narrowed[0] is None  # the decision between a call and text reads every logit
    if "{" in script:  # the call's name: "add" or "greet", one byte token each
        name = narrowed[[n is not None for n in narrowed].index(True)]
        assert name == [ord("a") - 32, ord("g") - 32]
    else:
        assert narrowed == [None] * len(narrowed)


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
    plain = open_index(compile_index(FUNCTIONS, VOCAB, CompileOptions(parameters_key="parameters"))[0],
                       VOCAB.token_bytes)
    script = CALL.replace("arguments", "parameters") + "\n" + GREET_BOB.replace("arguments", "parameters")
    result, _ = turn(plain, script, call_format="plain", tool_choice="auto", parallel=True)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3}), ("greet", {"name": "Bob"})]


def test_parallel_tries_another_call_where_the_model_would_stop(index):
    """After a call the model is not asked whether to go on (Qwen2.5-Coder-1.5B puts p < 0.02 on the newline
    in the plain format): another call is tried, and kept because the request asks for it."""
    plain = open_index(compile_index(FUNCTIONS, VOCAB, CompileOptions(parameters_key="parameters"))[0],
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
    value = open_index(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments"))[0], VOCAB.token_bytes)
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


def test_auto_call_that_cannot_fit_answers_in_text(index):
    """Under auto, a call the budget cannot hold is not begun: the turn answers in text (the break test's
    max_tokens 8 after a tool result ended with no call and no text)."""
    result, events = turn(index, None, model=prefers_call(CALL, "Hi."), max_tokens=5)
    assert (result.content, result.calls, result.finish_reason) == ("Hi.", [], "stop")
    assert result.decision == ("answered in text: p(call) 1.000, log-odds +50.00 >= -1.00, but max_tokens 5 cannot "
                               "hold a call")
    assert [e.kind for e in events] == ["text", "text", "text", "done"]
    result, _ = turn(index, None, model=prefers_call(CALL, "Hi."), max_tokens=500)  # room for it: the call
    assert [c.name for c in result.calls] == ["add"]


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
    return open_index(compile_index(fns, VOCAB, CompileOptions(form="value"))[0], VOCAB.token_bytes)


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
    return open_index(compile_index(LOOP, VOCAB, options)[0], VOCAB.token_bytes)


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


def test_a_code_fence_counts_as_a_call_start_and_text_never_opens_one(index):
    from callmaybe.runtime.policy.relevance import Relevance

    code = "```python\nprint(5)\n```"
    result, _ = turn(index, code)  # the fence is where a call may start: the call is decoded under the grammar
    assert [c.name for c in result.calls] == ["add"] and result.decision.startswith("called: p(call) 1.000")
    doubt = Relevance(0.2, -1.4, False, "the model doubts it", 1)
    result, _ = turn(index, None, model=prefers_call(code, "Sure: print(5)"), judge=lambda f, r: doubt)
    assert (result.calls, result.content) == ([], "Sure: print(5)")  # a text answer opens no fence
    result, _ = turn(index, None, model=prefers_call(code, "Sure: print(5)"), tool_choice="none")
    assert (result.calls, result.content) == ([], "Sure: print(5)")

def test_auto_declines_a_call_from_nowhere_and_answers_in_the_models_text(index):
    script = '<tool_call>\n{"name": "add", "arguments": {"a": 70, "b": 175}}'
    model = prefers_call(script, "I can only add.")
    # the request asks to add 2 and 3 and greet Bob: 70 and 175 are not in it
    result, events = turn(index, None, model=model, evidence=True)
    assert (result.calls, result.finish_reason, result.content) == ([], "stop", "I can only add.")
    assert result.decision == ("declined a call: add would take values the request does not give (none of its "
                               "values is in the request)")
    assert [e.kind for e in events] == ["text"] * len("I can only add.") + ["done"]
    assert result.completion_tokens == len("I can only add.")  # the text's; the call's tokens are gone
    unchecked, _ = turn(index, None, model=prefers_call(script, "I can only add."))  # the check is optional
    assert [(c.name, c.arguments) for c in unchecked.calls] == [("add", {"a": 70, "b": 175})]
    result, _ = turn(index, script, tool_choice="required", evidence=True)  # required: the call stands
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 70, "b": 175})]


def test_a_call_the_models_verdict_doubts_is_a_text_answer(index):
    from callmaybe.runtime.policy.relevance import Relevance

    asked = []

    def judge(verdict):
        def check(functions, request):
            asked.append(([f.name for f in functions], request))
            return verdict
        return check

    doubt = Relevance(0.3, -0.85, False, "the model doubts a call of add, greet does what the request asks "
                      "(verdict log-odds -0.85 < +0.00)", 1)
    script = f"<tool_call>\n{CALL}"
    result, events = turn(index, None, model=prefers_call(script, "Hi."), judge=judge(doubt))
    assert asked == [(["add", "greet"], ASKED)]  # the whole catalog, before any call token
    assert (result.calls, result.finish_reason, result.content) == ([], "stop", "Hi.")
    assert result.decision == ("answered in text: p(call) 1.000, log-odds +50.00 >= -1.00, but the model doubts a "
                               "call of add, greet does what the request asks (verdict log-odds -0.85 < +0.00)")
    sure = Relevance(0.9, 2.2, True, "the model says a call of add, greet does what the request asks", 1)
    result, _ = turn(index, script, judge=judge(sure))
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    unchecked, _ = turn(index, script)
    assert result.forward_passes == unchecked.forward_passes + 1  # the check's pass is counted
    asked.clear()
    result, _ = turn(index, script, judge=judge(doubt), tool_choice="required")
    assert asked == [] and [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    result, _ = turn(index, None, model=prefers_call(script, "Hi."), judge=judge(doubt), call_threshold=60.0)
    assert asked == [] and result.content == "Hi."  # the first token wants text: no verdict asked
    other = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 4}}'
    result, _ = turn(index, None, model=prefers_call(other, "Hi."), judge=judge(doubt), messages=ANSWERED)
    assert asked == [] and [c.arguments for c in result.calls] == [{"a": 2, "b": 4}]  # after a tool result


def test_a_decoded_call_the_model_doubts_once_shown_it_is_a_text_answer(index):
    from callmaybe.runtime.policy.relevance import Relevance

    shown = []

    def confirm(verdict):
        def check(fn, request, arguments):
            shown.append((fn.name, request, arguments))
            return verdict
        return check

    doubt = Relevance(0.3, -0.85, False, "the model doubts that the call of add does what the request asks "
                      "(log-odds -0.85 < +0.50)", 1)
    script = f"<tool_call>\n{CALL}"
    result, events = turn(index, None, model=prefers_call(script, "Hi."), confirm=confirm(doubt))
    assert shown == [("add", ASKED, {"a": 2, "b": 3})]  # the decoded call, its function and the request
    assert (result.calls, result.finish_reason, result.content) == ([], "stop", "Hi.")
    assert result.decision == ("declined a call: the model doubts that the call of add does what the request asks "
                               "(log-odds -0.85 < +0.50)")
    assert [e.kind for e in events] == ["text"] * len("Hi.") + ["done"]  # the call never went out
    sure = Relevance(0.9, 2.2, True, "the model confirms that the call of add does what the request asks", 1)
    result, _ = turn(index, script, confirm=confirm(sure))
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert result.decision.endswith("; the model confirms that the call of add does what the request asks")
    unchecked, _ = turn(index, script)
    assert result.forward_passes == unchecked.forward_passes + 1  # the check's pass is counted
    shown.clear()
    result, _ = turn(index, script, confirm=confirm(doubt), tool_choice="required")  # required: the call stands
    assert shown == [] and [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    other = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 4}}'
    result, _ = turn(index, None, model=prefers_call(other, "Hi."), confirm=confirm(doubt), messages=ANSWERED)
    # after a tool result too: a new call the model doubts is a text answer (the break test's start_watering)
    assert shown == [("add", ASKED, {"a": 2, "b": 4})] and (result.calls, result.content) == ([], "Hi.")
    shown.clear()
    result, _ = turn(index, None, model=prefers_call(other, "Hi."), confirm=confirm(sure), messages=ANSWERED)
    assert shown == [("add", ASKED, {"a": 2, "b": 4})] and [c.arguments for c in result.calls] == [{"a": 2, "b": 4}]


ANSWERED = [{"role": "user", "content": ASKED},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "5"}]


def test_a_call_the_conversation_already_answered_is_not_made_again(index):
    script = f"<tool_call>\n{CALL}"
    result, events = turn(index, None, model=prefers_call(script, "It is 5."), messages=ANSWERED)
    assert (result.calls, result.content, result.finish_reason) == ([], "It is 5.", "stop")
    assert result.decision == "declined a call: add with these arguments was already called and answered"
    other = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 4}}'
    result, _ = turn(index, None, model=prefers_call(other, "It is 5."), messages=ANSWERED)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 4})]
    unanswered = ANSWERED[:2]  # no tool result yet: the call may be made
    result, _ = turn(index, None, model=prefers_call(script, "It is 5."), messages=unanswered)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    result, _ = turn(index, script, messages=ANSWERED, tool_choice="required")  # required: the call stands
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]


def test_a_call_answered_before_the_last_user_message_may_be_made_again(index):
    # the user asks again after the answer: a new call (the weather may have changed); only calls answered
    # since the last user message are repeats (before, "check it again" was declined for the whole conversation)
    script = f"<tool_call>\n{CALL}"
    again = ANSWERED + [{"role": "assistant", "content": "It is 5."}, {"role": "user", "content": ASKED}]
    result, _ = turn(index, None, model=prefers_call(script, "It is 5."), messages=again)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert answered_calls(again) == [] and answered_calls(ANSWERED) == [("add", {"a": 2, "b": 3})]
    looped = again + ANSWERED[1:]  # asked again, called, answered: the same call a third time is a repeat
    result, _ = turn(index, None, model=prefers_call(script, "It is 5."), messages=looped)
    assert (result.calls, result.content) == ([], "It is 5.")


def test_the_threshold_decides_and_a_text_answer_starts_with_no_call_opening(index):
    script = f"<tool_call>\n{CALL}"
    result, _ = turn(index, None, model=prefers_call(script, "Hi."), call_threshold=60.0)
    assert (result.calls, result.content) == ([], "Hi.")
    assert result.decision == "answered in text: p(call) 1.000, log-odds +50.00 < +60.00"
    result, _ = turn(index, None, model=prefers_call(script, "Hi."), call_threshold=-60.0)
    assert result.decision.startswith("called: p(call) 1.000") and len(result.calls) == 1
    text = ScriptModel("Hello", fallback=Tokenizer().encode("{")[0])  # text first, a brace second
    result, _ = turn(index, None, model=text, call_threshold=-60.0)
    assert result.decision == "called: p(call) 0.000, log-odds -44.98 >= -60.00"
    assert [c.name for c in result.calls] == ["add"]  # a call under the grammar, whatever the model wrote


def test_a_declined_call_after_text_goes_back_to_the_text_and_the_turn_never_calls_again(index):
    # the model's text turns into a call the conversation already answered: declined, the turn goes back to
    # where the call began (the text already sent stays, once) and the model's text goes on without a call;
    # before, the turn went back to its first token, wrote the text again and called again, without end
    script = f"Let me add.<tool_call>\n{CALL}\n</tool_call>"
    result, events = turn(index, script, messages=ANSWERED)
    assert (result.calls, result.content, result.finish_reason) == ([], "Let me add.", "stop")
    assert result.decision == "declined a call: add with these arguments was already called and answered"
    assert [e.kind for e in events] == ["text"] * len("Let me add.") + ["done"]
    assert (result.completion_tokens, result.forced_tokens) == (len("Let me add."), 0)
    space = Tokenizer().encode(" ")[0]  # where the call was, the model's next choice is a space, then more text
    model = FirstOf(ScriptModel(script, fallback=space), ScriptModel("Let me add. It is 5."))
    result, events = turn(index, None, model=model, messages=ANSWERED)
    assert (result.calls, result.content, result.finish_reason) == ([], "Let me add. It is 5.", "stop")
    assert "".join(e.data for e in events if e.kind == "text") == "Let me add. It is 5."
    assert result.completion_tokens == len("Let me add. It is 5.")
    # a call at the first token, declined: the text from there never turns into a call again
    model = prefers_call(f"<tool_call>\n{CALL}", f"It is 5.<tool_call>\n{CALL}")
    result, events = turn(index, None, model=model, messages=ANSWERED)
    assert (result.calls, result.content, result.finish_reason) == ([], "It is 5.", "stop")
    assert [e.kind for e in events] == ["text"] * len("It is 5.") + ["done"]
    # the value check (evidence=True) declines a call from nowhere written after text the same way
    nowhere = 'Sure.<tool_call>\n{"name": "add", "arguments": {"a": 70, "b": 175}}'
    result, _ = turn(index, nowhere, evidence=True)
    assert (result.calls, result.content, result.finish_reason) == ([], "Sure.", "stop")
    assert result.decision.startswith("declined a call: add would take values the request does not give")


def test_a_json_answer_under_auto_with_tools_is_not_taken_for_a_call(index):
    # a response schema under "auto" with tools: the answer opens with "{", as a call without the marker
    # would; in the "tools" call format only the marker starts a call. Before, the JSON answer was decided a
    # call and decoded under the call index: add(a=-1, b=-10**32)
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    fns = parse_catalog([{"name": "reply", "parameters": schema}], "schema")
    value = open_index(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments"))[0], VOCAB.token_bytes)
    answer = '{"name": "reply", "arguments": {"answer": 42}}'  # the schema index's JSON (see above)
    result, events = turn(index, answer, schema_index=value)
    assert (result.content, result.calls, result.finish_reason) == (answer, [], "stop")
    assert result.decision == "answered in text: p(call) 0.000, log-odds -50.00 < -1.00"
    assert "".join(e.data for e in events if e.kind == "text") == answer
    result, _ = turn(index, f"<tool_call>\n{CALL}", schema_index=value)  # the marker still calls
    assert (result.content, [(c.name, c.arguments) for c in result.calls]) == (None, [("add", {"a": 2, "b": 3})])


def test_a_text_answer_opens_no_call_after_a_blank_start(index):
    # the model writes a newline first, then its call as text (a JSON object or a code fence): with tools
    # offered, a text answer that is blank so far opens no call, under "none" and after "auto" decided text.
    # Before, only the first token was checked: content was '\n{"name": "add", "arguments": {"a": 2, "b": 3}}'
    letter = Tokenizer().encode("I")[0]
    for opening in (CALL, "```json\n" + CALL + "\n```"):
        for tool_choice in ("none", "auto"):
            model = FirstOf(ScriptModel("\n" + opening, fallback=letter), ScriptModel("\nI cannot call."))
            result, _ = turn(index, None, model=model, tool_choice=tool_choice)
            assert (result.calls, result.content, result.finish_reason) == ([], "\nI cannot call.", "stop")
    # without tools a JSON object is an answer like any other
    result, _ = turn(index, "\n" + CALL, tool_choice="none", functions=[])
    assert result.content == "\n" + CALL
    # under "auto" the marker may still turn a blank start into a call
    result, _ = turn(index, f"\n<tool_call>\n{CALL}")
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]


def test_a_parallel_turn_goes_on_past_a_call_the_conversation_already_answered(index):
    # the server's default is parallel_tool_calls: true. The model writes the answered add(2, 3) again, then
    # the new greet(Bob): the answered call is left out and the new one made. Before, the whole turn was
    # declined at the first call (and greet first, add second kept greet: the order decided)
    for script in (f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{GREET_BOB}\n</tool_call>",
                   f"<tool_call>\n{GREET_BOB}\n</tool_call>\n<tool_call>\n{CALL}\n</tool_call>"):
        result, events = turn(index, script, parallel=True, messages=ANSWERED, max_tokens=200)
        assert [(c.name, c.arguments) for c in result.calls] == [("greet", {"name": "Bob"})]
        assert result.finish_reason == "tool_calls" and [e.kind for e in events] == ["call", "done"]
    # only the answered call, then a guess the request does not ask for: a text answer, as without parallel
    model = prefers_call(f"<tool_call>\n{CALL}", "It is 5.")
    result, events = turn(index, None, model=model, parallel=True, messages=ANSWERED, max_tokens=200)
    assert (result.calls, result.content, result.finish_reason) == ([], "It is 5.", "stop")
    assert result.decision == "declined a call: add with these arguments was already called and answered"
    assert [e.kind for e in events] == ["text"] * len("It is 5.") + ["done"]
    assert result.completion_tokens == len("It is 5.")
    # the answered call written twice: the second is a repeat of the first, the turn answers in text
    twice = f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{CALL}\n</tool_call>"
    result, _ = turn(index, None, model=FirstOf(ScriptModel(twice, fallback=Tokenizer().encode("I")[0]),
                                                ScriptModel("It is 5.")), parallel=True, messages=ANSWERED,
                     max_tokens=200)
    assert (result.calls, result.content) == ([], "It is 5.")




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
    idx = open_index(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments",
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
    idx = open_index(compile_index(fns, VOCAB, CompileOptions(parameters_key="arguments",
                                                               opening="<tool_call>\n"))[0], VOCAB.token_bytes)
    result, events = turn(idx, '<tool_call>\n{"name": "tag", "arguments": {"tags": ["x", "x"]}}', functions=fns,
                          tool_choice="required")
    assert (result.content, result.calls, result.finish_reason) == (None, [], "content_filter")
    assert result.refusal == ("the call fails the check after generation: arguments do not match tag's schema: "
                              "['x', 'x'] has non-unique elements")
    assert [e.kind for e in events] == ["done"]


NOW = {"name": "now", "description": "The time.", "parameters": {"type": "object", "properties": {}}}


def test_an_answered_call_without_arguments_is_not_made_again(index):
    # a call of a function without parameters, its arguments left out or empty in the conversation (a
    # messages file, a client that writes ""): the prompt shows it as {} and the model writes {} again; before,
    # None and "" never matched {}, so the loop went on
    functions = parse_catalog([ADD, NOW], "now")
    options = CompileOptions(parameters_key="arguments", opening="<tool_call>\n")
    now_index = open_index(compile_index(functions, VOCAB, options)[0], VOCAB.token_bytes)
    script = '<tool_call>\n{"name": "now", "arguments": {}}'
    for arguments in ("", None, "{}", {}):
        call = {"type": "function", "function": {"name": "now"}}
        if arguments is not None:
            call["function"]["arguments"] = arguments
        messages = [{"role": "user", "content": "What time is it?"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "content": "12:00"}]
        result, _ = turn(now_index, None, model=prefers_call(script, "It is noon."), functions=functions,
                         messages=messages)
        assert (result.calls, result.content) == ([], "It is noon."), arguments
        assert result.decision == "declined a call: now with these arguments was already called and answered"


def _decode_two_prompts(row, other_ids, under_other, under_own):
    """Drive ``row`` (a TurnDecoding over a two-token prompt) as the batch does, with ``under_other`` answering
    while the row's tokens start with ``other_ids`` and ``under_own`` otherwise; returns (every token fed, in
    order, what truncations left; the truncations)."""
    fed, truncations = [], []
    while not row.take_forced():
        if row.truncate_to is not None:
            truncations.append(row.truncate_to)
            fed, row.truncate_to = fed[:row.truncate_to], None
        fed += row.pending
        model = under_other if fed[:2] == other_ids else under_own
        if row.choose(model(fed[2:])):
            break
    return fed, truncations


def test_a_call_decided_under_auto_is_decoded_under_the_call_prompt_and_a_decline_goes_back(index):
    """``call_ids`` (the "plain" format's "required" message): the first token decides under the turn's prompt
    ("#a"), the row keeps the token the two prompts share ("#") and feeds the rest of the call prompt ("r"); the
    call is the one the model writes there. A declined call goes back to "#a" and the model's text there."""
    from callmaybe.runtime.policy.relevance import Relevance

    plain = open_index(compile_index(FUNCTIONS, VOCAB, CompileOptions(parameters_key="parameters"))[0],
                       VOCAB.token_bytes)
    tok = Tokenizer()
    auto_ids, call_ids = tok.encode("#a"), tok.encode("#r")
    under_auto = prefers_call(CALL.replace("arguments", "parameters"), "Hi.")  # add(2, 3), or "Hi." when declined
    under_call = ScriptModel(CALL.replace("arguments", "parameters").replace("3", "4"))  # add(2, 4)

    def decode(confirm=None):
        vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, tok, "plain")
        req = TurnRequest([{"role": "user", "content": ASKED}], FUNCTIONS, tool_choice="auto")
        row = TurnDecoding(req, vocab, auto_ids, auto_ids, plain, None, None, lambda e: None, confirm=confirm,
                           call_ids=call_ids)
        fed, truncations = _decode_two_prompts(row, call_ids, under_call, under_auto)
        return row.result(), tok.decode(fed), truncations

    result, fed, truncations = decode()
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 4})]
    assert fed.startswith('#r{"name": "add"') and truncations == [1]
    assert result.prompt_tokens == 2 and result.decision.startswith("called: p(call) 1.000")
    doubt = Relevance(0.3, -0.85, False, "the model doubts it", 1)
    result, fed, truncations = decode(confirm=lambda fn, asked, arguments: doubt)
    assert (result.calls, result.content, result.decision) == ([], "Hi.", "declined a call: the model doubts it")
    assert fed == "#aHi." and truncations == [1, 1]
    same, _ = turn(plain, None, call_format="plain", model=under_auto)  # without call_ids: under the turn's prompt
    assert [(c.name, c.arguments) for c in same.calls] == [("add", {"a": 2, "b": 3})]


class WrapperTokenizer(Tokenizer):
    """The test tokenizer with a chat template that wraps a tool result in ``<r>\\n`` ... ``\\n</r>`` (as Qwen's
    wraps it in ``<tool_response>``), rendered in Python."""

    chat_template = "roles, and <r> around a tool result"

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=True, tokenize=False):
        def content(m):
            return f"<r>\n{m['content']}\n</r>" if m["role"] == "tool" else str(m.get("content") or "")
        return "".join(f"#{m['role']}\n{content(m)}\n" for m in messages) + ("#assistant\n" if add_generation_prompt
                                                                             else "")


def test_a_text_answer_after_a_tool_result_leaves_out_the_results_wrapper(index):
    """The model opens its answer with a copy of the template's wrapper of the tool result ("<r>", as
    Qwen2.5-Coder-1.5B opened "<tool_response> Added 'call mom' ..."): the copy of the opening is left out (held
    back while the answer may still be it) and the wrapper's closing ends the answer (a stop text)."""
    from callmaybe.runtime.decoding.prompt import result_wrapper

    tok = WrapperTokenizer()
    assert result_wrapper(tok, FUNCTIONS, ANSWERED, "tools") == ("<r>", "</r>")
    assert result_wrapper(tok, FUNCTIONS, ANSWERED[:1], "tools") == ("", "")  # no tool result last
    copier = ScriptModel("<r>\nIt is 5.\n</r> and more")

    def decode(messages):
        vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, tok, "tools")
        req = TurnRequest(messages, FUNCTIONS, tool_choice="auto")
        row = TurnDecoding(req, vocab, PROMPT, PROMPT, index, None, None, lambda e: None)
        generated = []
        while not row.take_forced():
            generated += row.pending
            if row.choose(copier(generated[len(PROMPT):])):
                break
        return row.result()

    result = decode(ANSWERED)
    assert (result.content, result.calls, result.finish_reason) == ("It is 5.\n", [], "stop")
    before = decode([*ANSWERED, {"role": "user", "content": "And now?"}])  # no tool result last: no wrapper
    assert before.content == "<r>\nIt is 5.\n</r> and more"
    copier = ScriptModel("<r")  # the answer ends while it may still be the opening: sent as it is
    assert decode(ANSWERED).content == "<r"
    copier = ScriptModel("<b>5</b>")  # it leaves the opening's way: all of it is sent
    assert decode(ANSWERED).content == "<b>5</b>"


def test_a_call_that_passes_each_check_narrowly_is_declined_as_a_whole(index):
    """The first token's, the verdict's and the confirmation's log-odds are summed; a first call under auto
    whose sum is below ``combined_min`` (default COMBINED_LOG_ODDS_MIN) answers in text, though each passed."""
    from callmaybe.runtime.policy.decision import COMBINED_LOG_ODDS_MIN
    from callmaybe.runtime.policy.decision import decide
    from callmaybe.runtime.policy.relevance import Relevance

    script = f"<tool_call>\n{CALL}"
    model = prefers_call(script, "Hi.")

    def mild(generated):  # the call marker only somewhat likelier than text at the first token
        logits = model(generated)
        if not generated:
            logits[OPEN] = 6.0
        return logits

    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, Tokenizer(), "tools")
    first = decide(mild([]), vocab.call_starts, allowed=vocab.free).log_odds
    assert 0.4 < first < 0.6
    judge = lambda functions, asked: Relevance(0.65, 0.6, True, "the model says yes", 1)  # noqa: E731

    def confirm(log_odds):  # the confirmation keeps the call on its own
        return lambda fn, asked, arguments: Relevance(0.67, log_odds, True, "the model confirms it", 1)

    narrow = COMBINED_LOG_ODDS_MIN - first - 0.6 - 0.25  # the sum falls 0.25 short
    result, _ = turn(index, None, model=mild, judge=judge, confirm=confirm(narrow))
    assert (result.calls, result.content) == ([], "Hi.")
    assert result.decision == (f"declined a call: the model's three log-odds for the call of add sum to "
                               f"{COMBINED_LOG_ODDS_MIN - 0.25:+.2f} < {COMBINED_LOG_ODDS_MIN:+.2f} (each passed "
                               "its own threshold)")
    result, _ = turn(index, None, model=mild, judge=judge, confirm=confirm(narrow + 0.5))  # 0.25 over
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    result, _ = turn(index, None, model=mild, confirm=confirm(narrow))  # no verdict asked: no sum
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]


# -- a call written as text inside a text answer (runtime/answering/shape.py) ------------------------------------

def _model(*scripts: str) -> FirstOf:
    """A model that writes ``scripts[0]`` and, where the turn does not let it, falls back on the next script
    (each script's second choice is the first token where the next one leaves it, EOS where it ends there)."""
    tok = Tokenizer()
    models = []
    for a, b in zip(scripts, scripts[1:]):
        at = next(i for i, (x, y) in enumerate(zip(a + "\0", b + "\0")) if x != y)
        models.append(ScriptModel(a, fallback=tok.encode(b[at:])[0] if b[at:] else EOS))
    return FirstOf(*models, ScriptModel(scripts[-1]))


def test_a_call_written_as_text_after_some_words_is_decoded_as_a_call(index):
    """Under "auto" the answer "I will add them." goes on with the call in a code fence: the answer keeps its
    words (sent), the fence and the JSON are never sent, and the call is decoded under the grammar after the
    forced call marker ("tools" format) or where the JSON began ("plain")."""
    result, events = turn(index, "I will add them.\n```json\n" + CALL + "\n```")
    assert (result.content, result.finish_reason) == ("I will add them.\n", "tool_calls")
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]
    assert "".join(e.data for e in events if e.kind == "text") == "I will add them.\n"
    assert [e.kind for e in events][-2:] == ["call", "done"]
    plain = open_index(compile_index(FUNCTIONS, VOCAB, CompileOptions(parameters_key="parameters"))[0],
                       VOCAB.token_bytes)
    result, _ = turn(plain, "I will add them. " + CALL.replace("arguments", "parameters"), call_format="plain")
    assert (result.content, result.finish_reason) == ("I will add them. ", "tool_calls")
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})]


def test_a_call_written_as_text_after_a_decline_ends_the_answer_before_it(index):
    """The verdict doubts the call the first token wants: the text answer (SHAPE_RETRIES: no other token is
    tried there) ends before the call the model writes as text; the JSON is never sent. Under "none" the JSON
    is the model's text and stays."""
    from callmaybe.runtime.answering.turns import SHAPE_RETRIES
    from callmaybe.runtime.policy.relevance import Relevance

    doubt = Relevance(0.2, -1.4, False, "the model doubts it", 1)
    model = FirstOf(ScriptModel(CALL, fallback=Tokenizer().encode("S")[0]), ScriptModel("Sure.\n" + CALL))
    result, events = turn(index, None, model=model, judge=lambda functions, asked: doubt)
    assert SHAPE_RETRIES == 0
    assert (result.content, result.calls, result.finish_reason) == ("Sure.\n", [], "stop")
    assert "".join(e.data for e in events if e.kind == "text") == "Sure.\n"
    assert result.completion_tokens == len("Sure.\n")
    assert result.decision.startswith("answered in text: p(call) 1.000")
    result, _ = turn(index, "Sure.\n" + CALL, tool_choice="none")
    assert (result.content, result.calls) == ("Sure.\n" + CALL, [])


def test_a_declined_call_written_as_text_goes_back_to_the_words_before_it(index):
    """Under "auto" a call written as text is decoded and checked; declined, the answer goes back before it and
    the model writes on without it (the token that began it and every call opening left out there); when it
    writes the call again, the answer ends before that one."""
    from callmaybe.runtime.policy.relevance import Relevance

    doubt = Relevance(0.2, -1.4, False, "the model doubts the call", 1)
    confirm = lambda fn, asked, arguments: doubt  # noqa: E731
    result, events = turn(index, None, model=_model("Sure.\n" + CALL, "Sure.\nNo call needed."), confirm=confirm)
    assert (result.content, result.calls) == ("Sure.\nNo call needed.", [])
    assert result.decision == "declined a call: the model doubts the call"
    assert "".join(e.data for e in events if e.kind == "text") == "Sure.\nNo call needed."
    assert result.completion_tokens == len("Sure.\nNo call needed.")
    result, events = turn(index, None, model=_model("Sure.\n" + CALL, "Sure.\n " + CALL, "Sure.\n x"),
                          confirm=confirm)
    assert (result.content, result.calls, result.finish_reason) == ("Sure.\n ", [], "stop")
    assert "".join(e.data for e in events if e.kind == "text") == "Sure.\n "


def test_a_declined_turn_answers_under_the_prompt_without_the_catalog(index):
    """``text_ids`` (the chat without the catalog, "#t"): a call the verdict doubts, or one declined once decoded,
    is answered in text under it: the row keeps the token the prompts share ("#") and feeds the rest ("t"); the
    model there answers the request ("Canberra.") instead of the text it would write beside its catalog
    ("Use add."). A call the model writes as text later is not taken: the turn declined."""
    from callmaybe.runtime.policy.relevance import Relevance

    tok = Tokenizer()
    auto_ids, text_ids = tok.encode("#a"), tok.encode("#t")
    under_auto = prefers_call(CALL, "Use add.")
    under_text = _model("Canberra.\n" + CALL, "Canberra.")
    doubt = Relevance(0.3, -0.85, False, "the model doubts it", 1)

    def decode(**checks):
        vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, tok, "tools")
        req = TurnRequest([{"role": "user", "content": ASKED}], FUNCTIONS, tool_choice="auto")
        row = TurnDecoding(req, vocab, auto_ids, auto_ids, index, None, None, lambda e: None, text_ids=text_ids,
                           **checks)
        fed, truncations = _decode_two_prompts(row, text_ids, under_text, under_auto)
        return row.result(), tok.decode(fed), truncations

    result, fed, truncations = decode(judge=lambda functions, asked: doubt)
    assert (result.calls, result.content, fed, truncations) == ([], "Canberra.\n", '#tCanberra.\n{"name": "add', [1])
    assert result.decision.startswith("answered in text: p(call) 1.000") and result.prompt_tokens == 2
    result, fed, truncations = decode(confirm=lambda fn, asked, arguments: doubt)
    assert (result.calls, result.content, result.decision) == ([], "Canberra.\n", "declined a call: the model doubts it")
    assert fed.startswith("#tCanberra.\n") and truncations == [1]
    result, fed, _ = decode()  # no check doubts it: the call, under the turn's prompt
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"a": 2, "b": 3})] and fed.startswith("#a")


def test_after_a_tool_result_a_declined_turn_answers_beside_the_catalog(index):
    """The model repeats the call the tool answered: it is declined and the text follows the turn's own prompt
    ("#a": "It is 5."), not ``text_ids`` ("#t", where the model would write "Other."), without ``result_check``."""
    result, fed, _ = _after_result_turn(index, "Other.", None)
    assert (result.calls, result.content) == ([], "It is 5.")
    assert result.decision == "declined a call: add with these arguments was already called and answered"
    assert fed == "#aIt is 5."


def _after_result_turn(index, under_text, check, events=None, under_auto=None, max_tokens=None):
    """A turn after the tool result "5" whose model repeats the answered call under "#a" (then writes "It is 5.";
    or does what ``under_auto`` says) and writes ``under_text`` under ``text_ids`` "#t", with ``result_check``
    ``check``: (result, every token fed, as text; the truncations)."""
    tok = Tokenizer()
    messages = [{"role": "user", "content": ASKED},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "5"}]
    auto_ids, text_ids = tok.encode("#a"), tok.encode("#t")
    vocab = Vocab(VOCAB.token_bytes, VOCAB.eos_ids, VOCAB.vocab_size, tok, "tools")
    extra = {"max_tokens": max_tokens} if max_tokens is not None else {}
    row = TurnDecoding(TurnRequest(messages, FUNCTIONS, tool_choice="auto", **extra), vocab, auto_ids, auto_ids, index, None,
                       None, (events.append if events is not None else lambda e: None), text_ids=text_ids,
                       result_check=check)
    under_auto = under_auto or prefers_call(CALL, "It is 5.")
    fed, truncations = _decode_two_prompts(row, text_ids, ScriptModel(under_text), under_auto)
    return row.result(), tok.decode(fed), truncations


def test_after_a_tool_result_an_answer_without_the_catalog_stands_when_it_uses_the_result(index):
    """With ``result_check``, the declined repeat answers under ``text_ids`` ("#t"); the answer is held back
    until it ends, the check reads the prompt and the answer's tokens, and, when they use the result, the answer
    is sent as written there."""
    from callmaybe.runtime.policy.relevance import Relevance

    asked, events = [], []

    def check(with_results, answer):
        asked.append((Tokenizer().decode(with_results), Tokenizer().decode(answer)))
        return Relevance(0.99, 6.5, True, "uses it", 2)

    result, fed, truncations = _after_result_turn(index, "Five.", check, events)
    assert (result.calls, result.content, fed, truncations) == ([], "Five.", "#tFive.", [1])
    assert asked == [("#t", "Five.")]
    assert result.decision == ("declined a call: add with these arguments was already called and answered; "
                               "uses it")
    texts = [e.data for e in events if e.kind == "text"]
    assert texts == ["Five."]  # held back whole, then sent at once
    assert result.completion_tokens == len("Five.")


def test_after_a_tool_result_an_answer_that_does_not_use_it_is_written_again_beside_the_catalog(index):
    """The check says the answer without the catalog ("Sorry.") does not use the result: nothing of it was sent,
    the row keeps the token the prompts share ("#"), feeds "a" and the answer is the one beside the catalog,
    held back in turn and checked under the prompt without the catalog: its PMI beats the first's, it stands."""
    events, asked = [], []

    def check(with_results, answer):
        asked.append((Tokenizer().decode(with_results), Tokenizer().decode(answer)))
        return _pmi(with_results, answer, {"Sorry.": 0.4, "It is 5.": 7.0})

    result, fed, truncations = _after_result_turn(index, "Sorry.", check, events)
    assert (result.calls, result.content, fed, truncations) == ([], "It is 5.", "#aIt is 5.", [1, 1])
    assert asked == [("#t", "Sorry."), ("#t", "It is 5.")]
    assert [e.data for e in events if e.kind == "text"] == ["It is 5."]  # held back whole; nothing of "Sorry."
    assert result.decision == ("declined a call: add with these arguments was already called and answered; "
                               "PMI +0.40; the answer written beside the catalog stands (PMI +7.00 nats >= +0.40)")
    assert result.completion_tokens == len("It is 5.")


def _pmi(with_results, answer, by_text, threshold=5.0):
    """A Relevance as ``result_use`` gives it for ``answer`` (token ids), with the PMI ``by_text[its text]``."""
    from callmaybe.runtime.policy.relevance import Relevance

    pmi = by_text[Tokenizer().decode(answer)]
    return Relevance(0.5, pmi, pmi >= threshold, f"PMI {pmi:+.2f}", 2)


def test_after_a_tool_result_the_first_answer_comes_back_when_the_second_uses_the_result_less(index):
    """The break test's kind: the answer written again beside the catalog is worse (empty, "<", invented): its PMI
    with the results is below the first's, and the first answer, which had ended, is the turn's answer; only it
    is sent. With max_tokens 3 both are cut ("length") and the first's finish reason is the turn's."""
    events = []
    check = partial(_pmi, by_text={"Sorry.": 3.0, "It is 5.": 0.0, "Sor": 2.0, "It ": 1.0})
    result, fed, truncations = _after_result_turn(index, "Sorry.", check, events)
    assert (result.calls, result.content, result.finish_reason, fed, truncations) == (
        [], "Sorry.", "stop", "#aIt is 5.", [1, 1])
    assert [e.data for e in events if e.kind == "text"] == ["Sorry."]
    assert result.decision == ("declined a call: add with these arguments was already called and answered; "
                               "PMI +3.00; the first answer stands (the one written beside the catalog: PMI +0.00 "
                               "nats < +3.00)")
    assert result.completion_tokens == len("Sorry.") and result.prompt_tokens == 2
    result, _, _ = _after_result_turn(index, "Sorry.", check, max_tokens=3)
    assert (result.content, result.finish_reason, result.completion_tokens) == ("Sor", "length", 3)


def test_a_first_answer_checked_at_its_first_result_tokens_comes_back_and_goes_on(index):
    """A first answer longer than RESULT_TOKENS that loses nothing to the second comes back mid-way: the row
    keeps the token the prompts share ("#"), feeds "t" and the first answer's tokens again, and the answer goes on
    to its end, no longer held back."""
    from callmaybe.runtime.policy.result_use import RESULT_TOKENS

    long = "The sum of two and three is five, as the tool said."
    events = []
    check = partial(_pmi, by_text={long[:RESULT_TOKENS]: 4.0, "It is 5.": 1.0})
    result, fed, truncations = _after_result_turn(index, long, check, events)
    assert (result.content, result.finish_reason, truncations) == (long, "stop", [1, 1, 1])
    assert fed == "#t" + long
    texts = [e.data for e in events if e.kind == "text"]
    assert texts[0] == long[:RESULT_TOKENS] and "".join(texts) == long
    assert result.decision.endswith("the first answer stands (the one written beside the catalog: PMI +1.00 nats "
                                    "< +4.00)")


def test_after_a_tool_result_a_text_answer_the_first_token_chose_is_on_trial_too(index):
    """The model answers in text at the first token (no call): that answer, too, is written without the catalog
    and kept when it uses the result, else written again beside it."""
    from callmaybe.runtime.policy.relevance import Relevance

    for keep, content, fed_text in ((True, "Five.", "#tFive."), (False, "It is 5.", "#aIt is 5.")):
        result, fed, _ = _after_result_turn(index, "Five.", lambda w, a, keep=keep: Relevance(0.5, 0.0, keep, "c", 2),
                                            under_auto=ScriptModel("It is 5."))
        assert (result.calls, result.content, fed) == ([], content, fed_text)
        assert result.decision.startswith("answered in text: p(call) ") and result.decision.endswith(
            "; c" if keep else "; c; the answer written beside the catalog stands (PMI +0.00 nats >= +0.00)")
    # beside the catalog again, the answer the first token chose may still turn into a call (a new one)
    result, fed, _ = _after_result_turn(index, "Five.", lambda w, a: Relevance(0.5, 0.0, False, "c", 2),
                                        under_auto=ScriptModel(f"Then: <tool_call>\n{GREET_BOB}\n</tool_call>"))
    assert (result.content, [c.name for c in result.calls]) == ("Then: ", ["greet"])


def test_a_long_answer_after_a_tool_result_is_checked_at_its_first_result_tokens(index):
    """An answer longer than RESULT_TOKENS is checked once, on its first RESULT_TOKENS tokens; what was held
    back goes out then and the rest streams."""
    from callmaybe.runtime.policy.relevance import Relevance
    from callmaybe.runtime.policy.result_use import RESULT_TOKENS

    long = "The sum of two and three is five, as the tool said."
    asked, events = [], []

    def check(with_results, answer):
        asked.append(Tokenizer().decode(answer))
        return Relevance(0.99, 9.0, True, "uses it", 2)

    result, fed, _ = _after_result_turn(index, long, check, events)
    assert result.content == long and fed == "#t" + long
    assert asked == [long[:RESULT_TOKENS]]
    texts = [e.data for e in events if e.kind == "text"]
    assert texts[0] == long[:RESULT_TOKENS] and "".join(texts) == long


def test_emptied_results_empties_the_tool_messages_after_the_last_user_message():
    from callmaybe.runtime.policy.result_use import emptied_results

    messages = [{"role": "user", "content": "a"}, {"role": "tool", "content": "old"},
                {"role": "user", "content": "b"}, {"role": "assistant", "content": None},
                {"role": "tool", "tool_call_id": "1", "content": "new"}, {"role": "tool", "content": "newer"}]
    assert emptied_results(messages) == [
        {"role": "user", "content": "a"}, {"role": "tool", "content": "old"},
        {"role": "user", "content": "b"}, {"role": "assistant", "content": None},
        {"role": "tool", "tool_call_id": "1", "content": ""}, {"role": "tool", "content": ""}]
    assert messages[4]["content"] == "new"  # a copy


def test_a_json_object_whose_name_is_no_function_stays_in_the_answer(index):
    """A text answer with a JSON object the user asked for ({"name": "Bob"}, no function of the catalog) is the
    model's text, after a decline too (the break test's "example JSON object for a fictional patient")."""
    from callmaybe.runtime.policy.relevance import Relevance

    doubt = Relevance(0.2, -1.4, False, "the model doubts it", 1)
    text = 'Sure: {"name": "Bob", "age": 3}'
    model = FirstOf(ScriptModel(CALL, fallback=Tokenizer().encode("S")[0]), ScriptModel(text))
    result, events = turn(index, None, model=model, judge=lambda functions, asked: doubt)
    assert (result.content, result.calls, result.finish_reason) == (text, [], "stop")
    assert "".join(e.data for e in events if e.kind == "text") == text
