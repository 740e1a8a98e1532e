"""callmaybe: function calling with small language models whose output is valid by construction.

Data flow: ``compiler/`` turns a catalog of function schemas into an index file (regex -> byte-level DFA ->
token table); ``runtime/`` loads that index and a model and decodes calls under its masks; ``cli.py`` parses
flags. Shared, torch-free and regex-free modules: ``catalog``, ``vocabulary``, ``indexfile``, ``errors``.
"""

__version__ = "0.1.0"
