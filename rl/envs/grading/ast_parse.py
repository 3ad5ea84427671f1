"""`parse_python`: ast.parse behind one process-wide lock, for every parse of Python source in
rl/envs.

Why: CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state
(Python/Python-ast.c, `ast_state.recursion_depth`), reset at the start of each conversion and
checked at its end. A conversion can pause mid-tree whenever it runs Python code (a garbage
collection's finalizer or `gc.callbacks`) and another thread may then convert a tree of its own;
the first one then fails with `SystemError: AST constructor recursion depth mismatch` (cpython
gh-106905). The RL samplers grade episodes on several threads at once, and a real-repository run
lost a held-out episode to exactly this (the same interleaving does not fail on Python 3.12.1).
A reentrant lock: a parse nested in the same thread (a GC callback that parses) must not deadlock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source, filename), never converting two trees at once in this process."""
    with _LOCK:
        return ast.parse(source, filename=filename)
