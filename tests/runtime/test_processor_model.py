"""The LogitsProcessor gives model.generate the same call as our decoding loop (SmolLM2, greedy)."""

import torch
from transformers import LogitsProcessorList

from callmaybe.core.catalog import load_catalog
from callmaybe.compiler.build import runtime_compiler
from callmaybe.runtime.decoding.decoder import generate
from callmaybe.runtime.decoding.index import open_index
from callmaybe.runtime.decoding.processor import IndexLogitsProcessor
from callmaybe.runtime.decoding.prompt import prompt_ids
from callmaybe.runtime.answering.session import RunConfig, Runtime


def test_generate_with_processor_matches_our_loop(public_catalog_path):
    torch.set_num_threads(1)
    runtime = Runtime(RunConfig(model="smollm2-135m-instruct", dtype="float32"), runtime_compiler)
    loaded, vocabulary = runtime.loaded, runtime.vocabulary
    functions = load_catalog(public_catalog_path)
    index = open_index(runtime.index_for(functions), vocabulary.token_bytes)
    for request in ["What is the sum of 2 and 3?", "Reverse the string 'hello'"]:
        ids = prompt_ids(loaded.tokenizer, functions, request)
        ours = generate(loaded.model, loaded.tokenizer, index, ids, max_tokens=64)
        proc = IndexLogitsProcessor(index, prompt_length=len(ids), tokenizer=loaded.tokenizer, max_tokens=64)
        out = loaded.model.generate(torch.tensor([ids]), logits_processor=LogitsProcessorList([proc]),
                                    max_new_tokens=64, do_sample=False, pad_token_id=index.eos_ids[0])
        text = b"".join(vocabulary.token_bytes[t] or b"" for t in out[0, len(ids):].tolist()).decode()
        assert text == ours.text
