"""Files installed read-only into the sandbox to grade one HumanEval completion (standard library
only; imports nothing of this package). See eval/humaneval.py for the design and its limits."""
