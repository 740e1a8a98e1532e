"""The HTTP server (``callmaybe serve``): OpenAI-compatible chat completions and Responses APIs over the engine.

:mod:`.app` holds the routes, :mod:`.protocol` turns request bodies into turn requests and turn events into
responses and stream chunks (:mod:`.responses` the same for the Responses API), :mod:`.tools` caches an index
per tool list, :mod:`.limits` bounds the compiles per minute, :mod:`.errors` shapes every error. It imports the
runtime and core, never the compiler: the compile function reaches it inside the runtime, handed over by
``cli.py``.
"""
