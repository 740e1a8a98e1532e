"""Index + model -> calls: load an index, drive a :class:`~.decoding.matcher.Matcher` per call over any model's logits,
answer requests (``run``, ``interactive``, ``eval``). Never builds a regex and never imports the compiler: an
index it lacks is built by a compiler that ``cli.py`` hands it."""
