"""Catalog -> regex -> byte-level DFA -> token index file, offline. Never imports torch or the runtime."""
