"""Picking a token from masked logits: greedy, or sampled at a temperature within a nucleus (top-p)."""

from __future__ import annotations

import torch

from .turn import SEED_MAX, SEED_MIN, Sampling


def generator(sampling: Sampling) -> torch.Generator | None:
    """A CPU generator seeded with ``sampling.seed`` (a random seed when None); None for greedy picking.
    Each seed in [:data:`SEED_MIN`, :data:`SEED_MAX`] gets its own 64-bit torch seed (its two's complement
    bits), so no two seeds share a draw. Raises ValueError for a seed outside that range."""
    if sampling.greedy:
        return None
    g = torch.Generator()
    if sampling.seed is None:
        g.seed()
    else:
        seed = int(sampling.seed)
        if not SEED_MIN <= seed <= SEED_MAX:
            raise ValueError(f"seed {seed} is outside the signed 64-bit range [{SEED_MIN}, {SEED_MAX}]")
        g.manual_seed(seed & (2**64 - 1))  # torch takes [0, 2**64): the two's complement bits
    return g


def pick(logits: torch.Tensor, sampling: Sampling, gen: torch.Generator | None) -> int:
    """A token id from ``logits`` (shape (vocab_size,), any float dtype; forbidden tokens at -inf).

    Greedy (temperature 0): the argmax. Otherwise softmax of ``logits / temperature`` (in float32, on the
    CPU), cut to the most likely tokens whose probabilities first reach ``top_p`` (the nucleus of Holtzman et
    al., "The Curious Case of Neural Text Degeneration", ICLR 2020; the most likely token always stays),
    renormalized and drawn with ``gen``, so one seed gives one sequence of picks.
    """
    if sampling.greedy or gen is None or sampling.top_p <= 0.0:  # top_p 0: the nucleus is the top token
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.detach().float().cpu() / sampling.temperature, dim=-1)
    if sampling.top_p < 1.0:
        ordered, order = torch.sort(probs, descending=True)
        before = torch.cumsum(ordered, dim=-1) - ordered  # the mass of the tokens ranked above each one
        ordered[before >= sampling.top_p] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, ordered)
    return int(torch.multinomial(probs, 1, generator=gen))
