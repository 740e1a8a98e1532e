"""A tokenizer over a tiny vocabulary for the decoding tests."""


class TinyTokenizer:
    """Greedy longest-match encoding over ``tokens`` (bytes, or None for a special token such as EOS)."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.ids = {t: i for i, t in enumerate(tokens) if t is not None}

    def encode(self, text, add_special_tokens=False):
        data, ids = text.encode(), []
        while data:
            best = max((t for t in self.ids if data.startswith(t)), key=len)
            ids.append(self.ids[best])
            data = data[len(best):]
        return ids

    def decode(self, ids):
        return b"".join(self.tokens[i] or b"" for i in ids).decode()
