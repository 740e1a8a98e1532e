"""What the compiler and the runtime both need: errors, catalogs, call formats, the vocabulary's token bytes,
the index file format and where index files live, JSON and file helpers, messages, model pins.

Imports neither torch nor a regex engine, and neither side of callmaybe (checked by ``lint-imports``).
"""

__version__ = "0.1.0"
