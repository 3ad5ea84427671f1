"""rl/envs parses Python source through one lock (rl/envs/grading/ast_parse.py): CPython 3.11's
AST constructor keeps its recursion depth in interpreter-wide state, so a tree converted while
another thread converts one fails with SystemError (cpython gh-106905); sampler threads grade
episodes side by side, and a real-repository run lost an episode to it."""

import ast
import gc
import pathlib
import sys
import threading

import pytest

from rl.envs.grading.ast_parse import parse_python

ROOT = pathlib.Path(__file__).resolve().parents[1]
# ~2.4k AST nodes: converting them allocates enough objects for a garbage collection mid-tree.
SOURCE = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]" for i in range(400))


def errors_when_another_thread_parses_mid_tree(parse) -> list[str]:
    """Parses SOURCE on this thread; at its first garbage collection (inside the tree's
    conversion: gc.collect() first empties the youngest generation) a gc callback hands over to a
    second thread that parses SOURCE too, and waits up to 0.5 s for it. -> SystemErrors raised."""
    this = threading.current_thread()
    handed_over, other_done, errors = threading.Event(), threading.Event(), []

    def other():
        handed_over.wait()
        try:
            parse(SOURCE)
        except SystemError as e:
            errors.append(str(e))
        other_done.set()

    def hand_over(phase, info):
        if phase == "start" and threading.current_thread() is this and not handed_over.is_set():
            handed_over.set()
            other_done.wait(timeout=0.5)  # the lock holds the other thread back: time out

    thread = threading.Thread(target=other)
    thread.start()
    gc.collect()
    gc.callbacks.append(hand_over)
    try:
        parse(SOURCE)
    except SystemError as e:
        errors.append(str(e))
    finally:
        gc.callbacks.remove(hand_over)
        handed_over.set()
        thread.join()
    return errors


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the race is CPython 3.11's")
def test_plain_ast_parse_fails_when_another_thread_parses_mid_tree():
    # The harness below reproduces the bug: without the lock the first parse fails.
    errors = errors_when_another_thread_parses_mid_tree(ast.parse)
    assert any("recursion depth mismatch" in e for e in errors), errors


def test_parse_python_survives_another_thread_parsing_mid_tree():
    assert errors_when_another_thread_parses_mid_tree(parse_python) == []
    assert ast.dump(parse_python(SOURCE)) == ast.dump(ast.parse(SOURCE))


def test_nothing_in_rl_calls_ast_parse_directly():
    # Any direct call would reopen the race; code inside string templates (run in a sandbox's own
    # process) is not a call and is not counted.
    direct = []
    for path in sorted((ROOT / "rl").rglob("*.py")):
        if path.name == "ast_parse.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            func = getattr(node, "func", None)
            if isinstance(node, ast.Call) and isinstance(func, ast.Attribute):
                if func.attr == "parse" and getattr(func.value, "id", None) == "ast":
                    direct.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not direct, f"call rl.envs.grading.ast_parse.parse_python instead: {direct}"
