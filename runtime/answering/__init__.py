"""Answering requests: a turn decoded with the policy's checks, the engine that batches
turns, the run loop (Answerer) and the one loading path (Runtime) of run, eval, serve."""
