"""callmaybe beyond one process, on Ray (an optional extra: ``pip install 'callmaybe[ray]'``).

``cluster`` connects to Ray (or says in one line how to install it); ``pool`` drives a pool of actors that
answers every item exactly once, whatever actor dies; ``workers`` is such an actor (the model and the index
loaded once); ``batch`` answers ``run`` and ``eval`` through it; ``shared_index`` compiles a new tool list once
per cluster; ``serve`` is the Ray Serve deployment of the HTTP API. Nothing here imports the compiler:
``cli.py`` hands the compile function in, as it does to the runtime.
"""
