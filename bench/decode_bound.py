"""The decode step against the memory-bandwidth bound: how long one greedy step of the model takes, against the
time this machine needs just to read the weights that step reads once.

1. Bandwidth, STREAM-like (McCalpin's STREAM, https://www.cs.virginia.edu/stream/): ``copy`` (``b[:] = a``,
   counted as STREAM counts it, 2 x the array's bytes: one read, one write) and ``read`` (a sum over the array:
   1 x its bytes, the access of a decode step, which reads weights and writes almost nothing), over float32
   arrays of ``--array-mb`` each (far past any cache), with torch's threads (``--threads``, default all
   cores); best of ``--repeats``.
2. Bytes read per step: every weight of the linear layers (int8 or int4 data and their scales), the output
   layer (a tied one is the embeddings' matrix: read whole every step), the norms; the token embedding's one
   row is left out. For llama.cpp, the same tensors of its GGUF file (``token_embd`` left out unless it is also
   the output layer).
3. Step time: the model's forward pass over one new token after a ``--context``-token prompt (its KV cache),
   median of ``--steps`` steps, no grammar (the model alone), per ``--dtypes``; llama.cpp's (when
   llama-cpp-python is installed) from ``Llama.eval`` of one token at the same context. A dtype written
   ``int8-torch`` runs with ``CALLMAYBE_KERNELS=torch`` (torch's int8 kernels instead of runtime/model/gemv.c),
   so that both are measured side by side in one run; the ``kernel`` column says which one ran.

Printed: bandwidth (GB/s), per system the bytes per step (MB), the bound (bytes / bandwidth, ms), the step
(ms) and step / bound (the issue's target: within 1.5x). Each system runs in its own child process, one after
the other (their memory apart). Usage::

    python bench/decode_bound.py [--dtypes int8,int8-torch,int4] [--llama] [--context 250] [--steps 20]

No timed unit tests: the figures go in docs/model.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODEL = "qwen2.5-coder-1.5b-instruct"


def bandwidth(array_mb: int, repeats: int) -> dict:
    """STREAM-like copy and read bandwidth, GB/s (10^9 bytes per second), best of ``repeats``."""
    import torch

    n = array_mb * (1 << 20) // 4
    a, b = torch.ones(n), torch.zeros(n)
    copy = read = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        b.copy_(a)
        copy = min(copy, time.perf_counter() - t0)
        t0 = time.perf_counter()
        a.sum()
        read = min(read, time.perf_counter() - t0)
    return {"copy_gbs": 2 * a.nbytes / copy / 1e9, "read_gbs": a.nbytes / read / 1e9}


def weight_bytes(model) -> int:
    """Bytes of ``model``'s tensors a decode step reads: all parameters and buffers once each (shared storage
    counted once), less the input embedding unless the output layer shares it, less buffers that are not
    weights (rotary frequencies)."""
    seen, total = set(), 0
    embed = model.get_input_embeddings()
    out = model.get_output_embeddings()
    embed_tensors = {t.data_ptr() for t in list(embed.parameters()) + list(embed.buffers())}
    out_tensors = {t.data_ptr() for t in list(out.parameters()) + list(out.buffers())} if out is not None else set()
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if "rotary" in name or t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        if t.data_ptr() in embed_tensors and t.data_ptr() not in out_tensors:
            continue
        total += t.numel() * t.element_size()
    return total


def child_callmaybe(dtype: str, context: int, steps: int) -> dict:
    import torch

    from callmaybe.runtime.model.load import load_model

    lm = load_model(MODEL, dtype=dtype, device="cpu")
    ids = torch.randint(1000, 20000, (1, context), generator=torch.Generator().manual_seed(0))
    times = []
    # The plain-torch decoder (int8, int4: runtime/model/llama.py) takes and returns ``cache``; transformers'
    # classes (float32, bfloat16) ``past_key_values``.
    plain = hasattr(lm.model, "get_decoder") and not hasattr(lm.model, "generation_config")
    key = "cache" if plain else "past_key_values"
    with torch.inference_mode():
        out = lm.model(input_ids=ids, use_cache=True)
        past, token = getattr(out, key), out.logits[:, -1:].argmax(-1)
        for _ in range(steps):
            t0 = time.perf_counter()
            out = lm.model(input_ids=token, use_cache=True, **{key: past})
            times.append(time.perf_counter() - t0)
            past, token = getattr(out, key), out.logits[:, -1:].argmax(-1)
    from callmaybe.runtime.model import native

    return {"bytes": weight_bytes(lm.model), "step_s": statistics.median(times),
            "kernel": "native" if native.kernel() is not None else "torch"}


def child_llama(context: int, steps: int, threads: int) -> dict:
    from gguf import GGUFReader
    from llama_cpp import Llama

    from callmaybe.core.registry import gguf_path

    path = gguf_path(MODEL)
    reader = GGUFReader(path)
    names = {t.name for t in reader.tensors}
    total = sum(int(t.n_bytes) for t in reader.tensors
                if t.name != "token_embd.weight" or "output.weight" not in names)
    del reader
    llm = Llama(model_path=str(path), n_ctx=context + steps + 8, n_threads=threads, n_gpu_layers=0,
                verbose=False)
    llm.eval(list(range(1000, 1000 + context)))
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        llm.eval([2000 + i])
        times.append(time.perf_counter() - t0)
    return {"bytes": total, "step_s": statistics.median(times)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="int8,int8-torch,int4",
                        help="callmaybe's dtypes, comma-separated; DTYPE-torch: with torch's int8 kernels")
    parser.add_argument("--llama", action="store_true", help="llama.cpp too (llama-cpp-python, the same GGUF)")
    parser.add_argument("--context", type=int, default=250, help="prompt tokens before the timed steps")
    parser.add_argument("--steps", type=int, default=20, help="timed decode steps (median)")
    parser.add_argument("--array-mb", type=int, default=512, help="MB of each bandwidth array")
    parser.add_argument("--repeats", type=int, default=5, help="bandwidth runs (best)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    if args.child:
        result = (child_llama(args.context, args.steps, args.threads) if args.child == "llama.cpp"
                  else child_callmaybe(args.child.removesuffix("-torch"), args.context, args.steps))
        print(json.dumps(result))
        return
    bw = bandwidth(args.array_mb, args.repeats)
    print(f"bandwidth ({args.threads} threads, {args.array_mb} MB arrays): copy {bw['copy_gbs']:.1f} GB/s, "
          f"read {bw['read_gbs']:.1f} GB/s; load average {os.getloadavg()[0]:.2f}")
    systems = [d for d in args.dtypes.split(",") if d] + (["llama.cpp"] if args.llama else [])
    print(f"{'system':<12}{'MB/step':>9}{'bound ms':>10}{'step ms':>9}{'x bound':>9}{'x read bound':>14}"
          f"{'kernel':>8}")
    for system in systems:
        env = dict(os.environ, **({"CALLMAYBE_KERNELS": "torch"} if system.endswith("-torch") else {}))
        proc = subprocess.run([sys.executable, __file__, "--child", system, "--context", str(args.context),
                               "--steps", str(args.steps), "--threads", str(args.threads)],
                              capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            said = proc.stderr.strip().splitlines()
            print(f"{system:<12}failed: {said[-1] if said else f'exit status {proc.returncode}'}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        bound = r["bytes"] / (bw["copy_gbs"] * 1e9)
        read_bound = r["bytes"] / (bw["read_gbs"] * 1e9)
        print(f"{system:<12}{r['bytes'] / 1e6:>9.0f}{bound * 1e3:>10.1f}{r['step_s'] * 1e3:>9.1f}"
              f"{r['step_s'] / bound:>9.2f}{r['step_s'] / read_bound:>14.2f}{r.get('kernel', 'ggml'):>8}")


if __name__ == "__main__":
    main()
