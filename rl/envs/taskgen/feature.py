"""Feature templates: add a function from a one-line spec; add keyword options."""

from __future__ import annotations

from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt

FEATURES = {
    "slugify": (
        "slugify(text)",
        "lowercase, words joined by '-', drop anything not a-z0-9",
        """
                import re


                def slugify(text):
                    words = re.findall(r"[a-z0-9]+", text.lower())
                    return "-".join(words)
                """,
        """
                def test_basic():
                    assert slugify("Hello World") == "hello-world"


                def test_punctuation():
                    assert slugify("  A, b!! C ") == "a-b-c"


                def test_empty():
                    assert slugify("") == ""
                """,
    ),
    "chunked": (
        "chunked(xs, n)",
        "split a list into lists of n (last may be shorter)",
        """
                def chunked(xs, n):
                    if n < 1:
                        raise ValueError("n must be >= 1")
                    return [list(xs[i:i + n]) for i in range(0, len(xs), n)]
                """,
        """
                import pytest


                def test_even():
                    assert chunked([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


                def test_ragged():
                    assert chunked([1, 2, 3], 2) == [[1, 2], [3]]


                def test_bad_n():
                    with pytest.raises(ValueError):
                        chunked([1], 0)
                """,
    ),
    "rle_encode": (
        "rle_encode(s)",
        "run-length encode a string into (char, count) pairs",
        """
                   def rle_encode(s):
                       out = []
                       for ch in s:
                           if out and out[-1][0] == ch:
                               out[-1] = (ch, out[-1][1] + 1)
                           else:
                               out.append((ch, 1))
                       return out
                   """,
        """
                   def test_runs():
                       assert rle_encode("aaab") == [("a", 3), ("b", 1)]


                   def test_empty():
                       assert rle_encode("") == []
                   """,
    ),
}


def add_function(rng, pkg, difficulty):
    name = rng.choice(sorted(FEATURES))
    signature, spec, impl, tests = FEATURES[name]
    files = base_repo(rng, pkg, difficulty)
    existing = dedent("""
        def normalize_space(text):
            return " ".join(text.split())
        """)
    files[f"{pkg}/text.py"] = existing
    hidden = {f"test_{name}_hidden.py": f"from {pkg}.text import {name}\n\n\n" + dedent(tests)}
    solution = {f"{pkg}/text.py": existing + "\n\n" + dedent(impl)}
    prompt = pick_prompt(
        difficulty,
        (
            f"add {signature} to {pkg}/text.py: {spec}",
            f"need a {name} helper in text.py ({spec})",
            f"add {signature}: {spec}",
        ),
    )
    return files, prompt, hidden, solution


def add_option(rng, pkg, difficulty):
    field = rng.choice(("price", "weight", "rank"))
    files = base_repo(rng, pkg, difficulty)
    old = dedent(f'''
        def sort_records(records):
            """Records (dicts) sorted by their "{field}" field, ascending."""
            return sorted(records, key=lambda r: r["{field}"])
        ''')
    new = dedent(f'''
        def sort_records(records, reverse=False, limit=None):
            """Records (dicts) sorted by their "{field}" field; optionally descending and truncated."""
            out = sorted(records, key=lambda r: r["{field}"], reverse=reverse)
            return out if limit is None else out[:limit]
        ''')  # noqa: E501
    files[f"{pkg}/records.py"] = old
    hidden = {
        "test_records_hidden.py": dedent(f'''
        from {pkg}.records import sort_records

        ROWS = [{{"{field}": 3}}, {{"{field}": 1}}, {{"{field}": 2}}]


        def test_default_ascending():
            assert [r["{field}"] for r in sort_records(ROWS)] == [1, 2, 3]


        def test_reverse():
            assert [r["{field}"] for r in sort_records(ROWS, reverse=True)] == [3, 2, 1]


        def test_limit():
            assert [r["{field}"] for r in sort_records(ROWS, reverse=True, limit=2)] == [3, 2]
        ''')
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"sort_records in {pkg}/records.py: add reverse=False and limit=None options",
            "sort_records needs reverse and limit options",
            "let sort_records do descending + top-n",
        ),
    )
    return files, prompt, hidden, {f"{pkg}/records.py": new}
