"""The token index: every vocabulary token walked from every automaton state over a token
trie, the rows of allowed tokens made once per distinct row, and the counters' arrays."""
