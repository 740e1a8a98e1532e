"""Decoding one call under an index: masks and next states (plain or counted), the matcher,
greedy decoding with the KV cache, batched rows, prompts, sampling, and calls parsed."""
