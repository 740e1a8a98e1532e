"""Regexes and automata: JSON's lexical regexes, regex -> byte DFA, products and joins,
long counts as counters, grammar nodes and the automata of arrays, objects and formats."""
