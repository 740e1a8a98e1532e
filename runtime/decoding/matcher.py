"""The Matcher: the state of one call being decoded over a loaded index.

Every decoding loop drives one: the greedy decoder (:mod:`.decoder`), the transformers ``LogitsProcessor``
(:mod:`.processor`) and restating (:mod:`..policy.restate`); nothing else steps states. Its usage loop, for any
model::

    matcher = Matcher(index, max_tokens=256, tokenizer=tokenizer)
    while not matcher.is_finished():
        forced = matcher.forced_tokens()        # text the grammar forces: append it without asking the model
        if forced:
            for token in forced:
                matcher.advance(token)
            continue
        logits = model(...)                     # float (vocab_size,) for the next position
        matcher.advance(int(matcher.apply(logits).argmax()))

A matcher is one row's state: a batch holds one matcher per row. ``is_complete`` (EOS allowed now) and
``is_finished`` (EOS taken, or nothing may follow) keep their meaning when an index holds a choice between a
text answer and a call, or several calls.

The token budget (``max_tokens``): the index stores, per state, the fewest tokens that complete the call.
When the tokens left come close to that number, :meth:`mask` keeps only tokens after which the call can still
be completed within what is left, so a call is always complete, valid JSON within ``max_tokens``.
"""

from __future__ import annotations

import torch

from ...core.errors import BudgetExhausted, TokenNotAllowed
from .masks import Mask, TokenIndex

__all__ = ["BudgetExhausted", "Matcher", "TokenNotAllowed"]


class Matcher:
    """The state of one call being decoded over ``index``.

    ``max_tokens``: the most tokens the call's text may take, forced ones included (None: unbounded); EOS
    comes on top of them.
    ``tokenizer``: anything with ``encode(text, add_special_tokens=False) -> list[int]`` over the index's
    vocabulary; without it :meth:`forced_tokens` is always empty and the model is asked at every step.
    Raises BudgetExhausted when even the shortest call needs more than ``max_tokens`` tokens.
    """

    __slots__ = ("index", "tokenizer", "state", "tokens", "finished", "_budget", "_history", "_eos")

    def __init__(self, index: TokenIndex, max_tokens: int | None = None, tokenizer=None):
        self.index = index
        self.tokenizer = tokenizer
        self.state = index.start
        self.tokens: list[int] = []  # every token advanced, EOS included
        self.finished = False  # EOS was advanced
        self._budget = max_tokens
        self._history: list[int] = []  # the state before each token
        self._eos = frozenset(index.eos_ids)
        if max_tokens is not None and index.min_tokens(self.state) > max_tokens:
            raise BudgetExhausted(f"a call needs at least {index.min_tokens(self.state)} tokens; "
                                  f"the token budget is {max_tokens}")

    @property
    def tokens_left(self) -> int | None:
        """Tokens the budget still allows (None: unbounded)."""
        return None if self._budget is None else self._budget - len(self.tokens)

    @property
    def data(self) -> bytes:
        """The call's bytes so far (EOS writes none)."""
        token_bytes = self.index.token_bytes
        return b"".join(token_bytes[t] for t in self.call_tokens())

    def call_tokens(self) -> list[int]:
        """:attr:`tokens` without a final EOS: the tokens that write the call."""
        return self.tokens[:-1] if self.finished else list(self.tokens)

    def is_complete(self) -> bool:
        """True when the text so far is a whole call (EOS is allowed now)."""
        return self.index.is_accepting(self.state)

    def is_finished(self) -> bool:
        """True once EOS was advanced, or when no byte may follow (the call is complete and closed)."""
        return self.finished or self.index.is_terminal(self.state)

    def forced_tokens(self) -> list[int]:
        """The tokens to append now without asking the model (see :meth:`TokenIndex.forced_tokens`), or []
        when nothing is forced, there is no tokenizer, or they would not leave room to complete the call."""
        if self.tokenizer is None or self.finished:
            return []
        ids, end = self.index.forced_tokens(self.state, self.tokenizer)
        left = self.tokens_left
        if not ids or (left is not None and len(ids) + self.index.min_tokens(end) > left):
            return []
        return list(ids)

    def mask(self) -> Mask:
        """The tokens allowed now: the state's stored :class:`Mask` (O(1)), narrowed to tokens that still fit
        the budget when it is tight. EOS is allowed only where the call is complete."""
        if self._budget is None:
            return self.index.mask(self.state)
        left = self._budget - len(self.tokens)
        if self.index.budget_is_loose(left):
            return self.index.mask(self.state)
        return self.index.budget_mask(self.state, left)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """A new tensor like ``logits`` (float, shape (n,)) with every token :meth:`mask` forbids at -inf."""
        return self.index.apply_mask(self.mask(), logits)

    def advance(self, token: int) -> None:
        """Take ``token``: EOS finishes the call, any other token moves to the state after its bytes.

        Raises TokenNotAllowed for a token :meth:`mask` does not allow: one the grammar forbids here, one
        after which the call could not be completed within the budget, any token once finished, an id out
        of range. The matcher is unchanged then.
        """
        if self.finished:
            raise TokenNotAllowed(f"token {token} after the end of the call")
        state = self.state
        if token in self._eos:
            if not self.index.is_accepting(state):
                raise TokenNotAllowed(f"EOS ({token}) before the call is complete")
            self.finished = True
        else:
            nxt = self.index.next_state(state, token)
            if nxt < 0:
                raise TokenNotAllowed(f"token {token} is not allowed in state {state}")
            if self._budget is not None and self.index.min_tokens(nxt) >= self._budget - len(self.tokens):
                raise TokenNotAllowed(f"token {token} leaves no room to complete the call within the token budget")
            self.state = nxt
        self._history.append(state)
        self.tokens.append(token)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` tokens (EOS counts as one). Raises ValueError when fewer were advanced."""
        if not 0 <= n <= len(self.tokens):
            raise ValueError(f"cannot roll back {n} tokens of {len(self.tokens)}")
        for _ in range(n):
            self.tokens.pop()
            self.state = self._history.pop()
            self.finished = False  # EOS can only be the last token

    def close_early(self) -> None:
        """Cut the budget to the shortest completion from here: the call closes as soon as it can (used when
        the model loops)."""
        self._budget = len(self.tokens) + self.index.min_tokens(self.state)
