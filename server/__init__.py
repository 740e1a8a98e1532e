"""The HTTP server (``callmaybe serve``): an OpenAI-compatible chat completions API over the engine.

:mod:`.app` holds the routes, :mod:`.protocol` turns request bodies into turn requests and turn events into
responses and stream chunks, :mod:`.tools` caches an index per tool list, :mod:`.limits` bounds the compiles
per minute, :mod:`.errors` shapes every error. It imports the runtime and core, never the compiler: the
compile function reaches it inside the runtime, handed over by ``cli.py``.
"""
