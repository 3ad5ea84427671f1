"""Code review template: a patch adds two functions to a module; one line of it has a planted
defect (an AST mutation of rl/envs/repos/mine.py: flipped comparison, off-by-one, swapped
arguments, flipped and/or). The policy reports the file and line (`report` tool); graded by
location (rl/envs/grading/grade_review.py: the mutated statement's line span).

The hidden tests exercise both added functions: the gate runs them to check the defect is real
(they fail with it and pass with the reference, the module without the defect).
"""

from __future__ import annotations

from rl.envs.grading.grade_review import REVIEW_OPS, answer_span, unified_diff
from rl.envs.repos.mine import bug_sites
from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt

# name -> (source, [(call, expected)]): correct code, and cases that catch its mutants.
FUNCTIONS = {
    "window_sums": (
        '''
        def window_sums(xs, k):
            """Sums of every length-k window of xs, left to right."""
            return [sum(xs[i:i + k]) for i in range(len(xs) - k + 1)]
        ''',
        [("window_sums([1, 2, 3, 4], 2)", [3, 5, 7]), ("window_sums([5, 6], 2)", [11])]
        + [("window_sums([4, 1, 2], 1)", [4, 1, 2]), ("window_sums([1, 2], 3)", [])],
    ),
    "count_between": (
        '''
        def count_between(xs, lo, hi):
            """How many x in xs have lo <= x < hi."""
            return sum(1 for x in xs if lo <= x and x < hi)
        ''',
        [("count_between([1, 2, 3, 4, 5], 2, 4)", 2), ("count_between([2, 4], 2, 4)", 1)]
        + [("count_between([0, 9], 2, 4)", 0)],
    ),
    "pairs": (
        '''
        def pairs(xs):
            """Consecutive non-overlapping pairs of xs; an odd last item is dropped."""
            return [(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        ''',
        [("pairs([1, 2, 3, 4, 5, 6])", [(1, 2), (3, 4), (5, 6)]), ("pairs([1, 2, 3])", [(1, 2)])]
        + [("pairs([])", [])],
    ),
    "percent": (
        '''
        def percent(part, whole):
            """part as a rounded percentage of whole (0 when whole is 0)."""
            if whole == 0:
                return 0
            return round(100 * part / whole)
        ''',
        [("percent(1, 4)", 25), ("percent(0, 0)", 0), ("percent(3, 3)", 100)],
    ),
    "last_index": (
        '''
        def last_index(xs, value):
            """Index of the last occurrence of value in xs, or -1."""
            for i in range(len(xs) - 1, -1, -1):
                if xs[i] == value:
                    return i
            return -1
        ''',
        [("last_index([1, 2, 1], 1)", 2), ("last_index([3], 3)", 0)]
        + [("last_index([1, 2], 5)", -1), ("last_index([4, 5, 6], 6)", 2)],
    ),
}
BASE = '''
def running_max(xs):
    """Running maximum of xs."""
    out, best = [], None
    for x in xs:
        best = x if best is None or x > best else best
        out.append(best)
    return out
'''


def review_patch(rng, pkg, difficulty):
    files = base_repo(rng, pkg, difficulty)
    path = f"{pkg}/seq.py"
    names = rng.sample(sorted(FUNCTIONS), 2)
    before = dedent(BASE)
    after = before + "".join("\n\n" + dedent(FUNCTIONS[n][0]) for n in names)
    target = rng.choice(names)
    sites = [s for s in bug_sites(path, after) if s.op in REVIEW_OPS and s.symbol == target]
    site = rng.choice(sites)
    patched = site.apply(after)
    files[path] = patched
    files["tests/test_seq.py"] = (
        f"from {pkg}.seq import running_max\n\n\ndef test_running_max():\n"
        "    assert running_max([1, 3, 2]) == [1, 3, 3]\n"
    )
    tests = [f"from {pkg}.seq import {', '.join(sorted(names))}, running_max\n"]
    for n in names:
        for i, (call, expected) in enumerate(FUNCTIONS[n][1]):
            tests.append(f"\n\ndef test_{n}_{i}():\n    assert {call} == {expected!r}\n")
    tests.append(
        "\n\ndef test_running_max_kept():\n    assert running_max([2, 1, 5]) == [2, 2, 5]\n"
    )
    diff = unified_diff(path, before, patched)
    prompt = pick_prompt(
        difficulty,
        (
            f"Review this patch to {path} (it is applied in the repo). One line of it has a "
            "bug: report that file and line with the report tool, then submit.",
            "review the patch below (already applied); report the buggy line, then submit",
            "one line of this patch is wrong. report it",
        ),
    )
    prompt += f"\n\n```diff\n{diff}```"
    lo, hi = answer_span(patched, site.span[0])
    meta = {
        "grader": "review",
        "review": {"path": path, "lines": [lo, hi], "op": site.op},
        "review_base": {path: before},
        "tools": ["report"],
    }
    return files, prompt, {"test_seq_hidden.py": "".join(tests)}, {path: after}, meta
