"""The output layer over a pass's kept positions, computing where it can only the logits a grammar lets each read.

A position whose mask is a short id row (:meth:`~.masks.Mask.is_sparse`: the next token is a digit, a name, a
key; about half of the chosen positions of the public set and of BFCL's) reads a few dozen logits of 151,936:
an output layer that can multiply by some of its rows (``takes_ids``/``masked``, :class:`..model.quant.Int8Linear`
for the quantized models) computes those alone, the same values bit for bit, and -inf stands in the others,
where the mask would have put it anyway. Reading Qwen2.5-1.5B's tied output layer is 233 MB of the 1,545 a
decode step reads; in a batch step bound by the multipliers, each such row saves two products of 151,936 x
1,536 (the output layer's two-level product). The values are exact because the int8 product's sums are
integers and its scaling is elementwise (:meth:`..model.quant.Int8Linear.at`).
"""

from __future__ import annotations

import torch


def logits(head, hidden: torch.Tensor, allowed: list[torch.Tensor | None]) -> torch.Tensor:
    """``head`` (the model's output layer) over ``hidden`` (R, hidden size): (R, vocabulary) logits in the
    head's dtype. ``allowed[r]`` (int64 (k,), sorted) names the only logits row ``r``'s reader reads (None: all
    of them): where the head ``takes_ids`` for those rows, they get the head's values in those columns and
    -inf elsewhere (the rows with ids share one product over the union of their ids), the others the whole
    head. Without such rows, or a head that cannot, ``head(hidden)``. Raises ValueError when ``allowed`` does
    not have R entries."""
    if len(allowed) != hidden.shape[0]:
        raise ValueError(f"logits: {len(allowed)} id rows for {hidden.shape[0]} hidden rows")
    sparse = [r for r, ids in enumerate(allowed) if ids is not None]
    takes = getattr(head, "takes_ids", None)
    if not sparse or takes is None or not takes(hidden.shape[0]):
        return head(hidden)  # (takes(R): each row takes the product it would in head(hidden), so bit for bit)
    ids = [allowed[r] for r in sparse]
    union = ids[0] if len(ids) == 1 else torch.unique(torch.cat(ids))
    part = head.masked(hidden[sparse], union.to(hidden.device))
    if len(sparse) == hidden.shape[0]:
        return part
    dense = [r for r, ids in enumerate(allowed) if ids is None]
    full = head(hidden[dense])
    out = torch.empty(hidden.shape[0], full.shape[1], dtype=full.dtype, device=full.device)
    out[dense] = full
    out[sparse] = part.to(full.dtype)
    return out
