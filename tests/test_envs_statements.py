"""Statements of mined real-repository tasks (rl/envs/repos/mine.py): they name the function or
method that holds the change, read as whole sentences, and come in full/terse/vague variants."""

import ast
import functools
import re
import statistics

from rl.envs.repos import mine as M
from rl.envs.repos.projects import family_counts, family_tasks, suite_tasks


@functools.cache
def _suite():
    """The vendored suite's tasks, mined once for this module (each build costs ~10 s)."""
    return suite_tasks()


def enclosing_symbol(source: str, line: int) -> str:
    """The qualified name of the innermost top-level function or method spanning `line`,
    found independently of mine.functions (walks classes and functions by line range)."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.lineno <= line <= node.end_lineno:
            return node.name
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= node.end_lineno:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.lineno <= line <= item.end_lineno:
                    return f"{node.name}.{item.name}"
    raise AssertionError(f"line {line} is in no function")


def test_statements_name_the_mutated_function_class_qualified_in_whole_sentences():
    tasks = _suite()  # real tasks mined from the four vendored projects
    assert len(tasks) >= 50
    qualified = 0
    for t in tasks:
        (path,) = t.solution
        changed = [  # the first line the mutation touches, found by diffing the two files
            i + 1
            for i, (a, b) in enumerate(
                zip(t.solution[path].splitlines(), t.files[path].splitlines())
            )
            if a != b
        ][0]
        symbol = enclosing_symbol(t.solution[path], changed)
        qualified += "." in symbol
        variants = t.meta["statements"]
        assert variants["full"] == t.prompt
        assert f"`{symbol}`" in t.prompt and f"`{symbol}`" in variants["terse"], (symbol, t.prompt)
        for text in variants.values():
            assert not re.search(r"\bshould (the|a|an)\b", text, re.I), text
            assert text[0].isupper() or text[0] == "`", text  # a sentence, not a fragment
            assert text.endswith("."), text
            assert "  " not in text and ".py" not in text
        # the under-specified variant is the symptom only: an internal symbol is not named
        if symbol.split(".")[-1].startswith("_"):
            assert symbol not in variants["vague"], variants["vague"]
    assert qualified >= 10  # methods are named with their class (Parser._handle_field, ...)


def test_terse_variant_median_is_at_most_cursorbench_median():
    lengths = {k: [len(t.meta["statements"][k]) for t in _suite()] for k in ("full", "terse")}
    assert statistics.median(lengths["terse"]) <= 390
    assert statistics.median(lengths["terse"]) < statistics.median(lengths["full"])


def test_docstring_statements_are_grammatical_and_use_the_whole_first_paragraph():
    src = (
        "class Cache:\n"
        "    def size(self):\n"
        '        """The current size of the cache."""\n'
        "        return len(self._d)\n\n"
        "    def get(self, key):\n"
        '        """Returns the value stored under key,\n        or None when it is missing.\n\n'
        '        More detail that is not the summary.\n        """\n'
        "        return self._d.get(key)\n"
    )
    noun = M._doc_sentence(src, "Cache.size")
    verb = M._doc_sentence(src, "Cache.get")
    assert noun == 'Its documentation describes it as "The current size of the cache."'
    assert verb == "It should return the value stored under key, or None when it is missing."


def test_suite_counts_every_family():
    counts = family_counts(_suite() + family_tasks())
    assert set(counts) == {"bugfix", "feature", "review", "devops"}
    assert all(n > 0 for n in counts.values())
    assert sum(counts.values()) == len(_suite()) + len(family_tasks())
