"""The answer policy: call or answer (first token, relevance verdict), which optional values
the request grounds (evidence, reformat, restate) and how a parallel turn is settled."""
