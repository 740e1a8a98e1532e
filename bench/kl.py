"""How far each quantized dtype moves the model's next-token distributions from bfloat16 weights: the mean KL
divergence KL(P_bf16 || P_dtype) per position, over the prompts of the first ``--prompts`` BFCL simple cases
(callmaybe's own prompt: the chat template, the catalog's system message, the request), teacher-forced.

The method of issue 11 (its figures: weight-only int8 0.0016, rotated int8 0.0011, over 24 BFCL prompts). The
reference is the registry GGUF dequantized by transformers' GGUF loader into bfloat16, in memory (no checkpoint
written). ``int4-q6k-int8`` is the int4 model with the layers that the GGUF stores in Q6_K (requantized to int4
by the converter) taken from the int8 model instead: what keeping them in 8 bits would buy. Usage::

    python bench/kl.py [--prompts 24] [--dtypes int8,int4,int4-q6k-int8]

Memory: the bfloat16 model (3.1 GB, 5.7 GB while it loads) and each quantized one at once.
"""

from __future__ import annotations

import argparse
import os
import time

MODEL = "qwen2.5-coder-1.5b-instruct"


def prompts(n: int, tokenizer) -> list[list[int]]:
    """Token ids of callmaybe's prompt for each of the first ``n`` BFCL simple cases."""
    from pathlib import Path

    from callmaybe.runtime.evaluation import evaluation_cases
    from callmaybe.runtime.prompt import system_message

    shared = Path(os.environ.get("CALLMAYBE_SHARED", Path(__file__).resolve().parent.parent.parent / "shared"))
    out = []
    for case in evaluation_cases(shared / "data" / "bfcl_simple" / "cases.jsonl", n):
        messages = [{"role": "system", "content": system_message(case["functions"])},
                    {"role": "user", "content": case["prompt"]}]
        out.append(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                 return_dict=False))
    return out


def q6k_modules(gguf) -> list[str]:
    """transformers module names of the GGUF's Q6_K linear layers (``model.layers.3.mlp.down_proj``)."""
    from gguf import GGMLQuantizationType, GGUFReader

    from callmaybe.runtime.model.convert import hf_name

    names = []
    for t in GGUFReader(gguf).tensors:
        hf = hf_name(t.name)
        if t.tensor_type == GGMLQuantizationType.Q6_K and hf and t.name.startswith("blk."):
            names.append(hf[0])
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--dtypes", default="int8,int4,int4-q6k-int8")
    args = parser.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM

    from callmaybe.core.registry import gguf_path
    from callmaybe.runtime.model.load import load_model

    torch.set_num_threads(os.cpu_count() or 1)
    gguf = gguf_path(MODEL)
    t0 = time.perf_counter()
    ref = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16).eval()
    print(f"bfloat16 reference loaded in {time.perf_counter() - t0:.0f} s", flush=True)
    models = {}
    for dtype in [d for d in args.dtypes.split(",") if d]:
        if dtype == "int4-q6k-int8":
            continue
        models[dtype] = load_model(MODEL, dtype=dtype, device="cpu")
    tokenizer = next(iter(models.values())).tokenizer if models else None
    if "int4-q6k-int8" in args.dtypes.split(","):
        if not {"int8", "int4"} <= set(models):
            raise SystemExit("int4-q6k-int8 needs int8 and int4 in --dtypes")
        import copy

        mixed = copy.copy(models["int4"])
        mixed.model = copy.deepcopy(models["int4"].model)
        for name in q6k_modules(gguf):
            mixed.model.set_submodule(name, models["int8"].model.get_submodule(name))
        models["int4-q6k-int8"] = mixed
    ids_list = prompts(args.prompts, tokenizer)
    sums = {d: 0.0 for d in models}
    agree = {d: 0 for d in models}
    positions = 0
    with torch.inference_mode():
        for ids in ids_list:
            x = torch.tensor([ids])
            p = ref(input_ids=x).logits[0].float().log_softmax(-1)
            for dtype, lm in models.items():
                q = lm.model(input_ids=x).logits[0].float().log_softmax(-1)
                sums[dtype] += float((p.exp() * (p - q)).sum(-1).sum())
                agree[dtype] += int((p.argmax(-1) == q.argmax(-1)).sum())
            positions += len(ids)
    print(f"{len(ids_list)} prompts, {positions} positions; load average {os.getloadavg()[0]:.2f}")
    print(f"{'dtype':<16}{'mean KL':>10}{'top-1 agrees':>14}")
    for dtype in models:
        print(f"{dtype:<16}{sums[dtype] / positions:>10.5f}{agree[dtype] / positions:>14.4f}")


if __name__ == "__main__":
    main()
