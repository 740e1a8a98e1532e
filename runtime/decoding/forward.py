"""One forward pass of the model over a list of token ids after a cache, keeping only the logits asked for."""

from __future__ import annotations

import time

import torch

from .profile import Profile


def forward(model, ids: list[int], past, profile: Profile | None = None, phase: str = "",
            keep: int | list[int] = 1, allowed: torch.Tensor | None = None):
    """Run ``model`` on ``ids`` after ``past``; returns (the logits of the last position, shape (vocab_size,),
    in the model's dtype and on its device; the cache). Only the last position's logits are computed
    (``logits_to_keep=1``): the output layer is 151,936 x 1,536 for Qwen, a large share of a prefill's work.
    ``keep`` > 1 : the logits of the last ``keep`` positions, shape (keep, vocab_size); a list (a verify pass,
    :meth:`Decoding.verify`): the logits of those indices of ``ids``, shape (len(keep), vocab_size). With
    ``profile``, the pass's seconds and ``len(ids)`` tokens are added to its ``phase``. ``allowed`` (int64
    (k,), sorted; :meth:`~.decoder.Decoding.needed_ids`): the only logits the caller reads; a model that takes them
    (``takes_logits_ids``) computes those alone and -inf elsewhere."""
    t0 = time.perf_counter()
    device = getattr(model, "device", None)
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    to_keep = torch.tensor(keep, dtype=torch.long, device=device) if isinstance(keep, list) else keep
    extra = {"logits_ids": allowed} if allowed is not None and getattr(model, "takes_logits_ids", False) else {}
    with torch.inference_mode():
        out = model(input_ids=input_ids, cache=past, use_cache=True, logits_to_keep=to_keep, **extra)
    if profile is not None:
        profile.add(phase, time.perf_counter() - t0, len(ids))
    if isinstance(keep, list):
        return out.logits[0], out.cache
    return (out.logits[0, -1] if keep == 1 else out.logits[0, -keep:]), out.cache
