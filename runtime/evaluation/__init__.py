"""Evaluation: data sets with expected answers (the public set, BFCL) answered and scored
by their rules (eval)."""
