"""eval/copy_rate.py against hand-computed counts: a transcript built token by token, where each
edit's old text is (or is not) in what was read and on the buggy line."""

from data.chat import tool_call_text
from data.tokenizers import ByteTokenizer
from eval.copy_rate import buggy_lines, copy_stats
from rl.envs.grading.tasks import Task

TOK = ByteTokenizer()
OLD = "def f(x):\n    y = x\n    return y + 2\n"
NEW = "def f(x):\n    y = x\n    return y + 1\n"
TASK = Task("t", "f is off by one", {"a.py": OLD}, {}, {"a.py": NEW})


def turn(name, args):
    ids = TOK.encode(tool_call_text(name, args), allow_special=True)
    return ids + [TOK.special_id("end")]


def record(parts):
    """parts: (ids, mask value) in order -> a record of task t."""
    tokens, mask = [], []
    for ids, m in parts:
        tokens += ids
        mask += [m] * len(ids)
    return {"task_id": "t", "tokens": tokens, "mask": mask}


def test_buggy_lines_are_the_replaced_ones():
    assert buggy_lines(TASK) == {"    return y + 2"}


def test_copy_rate_counts_edits_copied_from_the_reads_on_the_bug():
    prompt = TOK.encode("fix f: `    return y + 2` is wrong\n")  # the statement: not a read
    obs = TOK.encode(OLD)
    a = record(
        [
            (prompt, 0),
            (turn("edit", {"path": "a.py", "old": "    return y + 2", "new": "x"}), 1),  # no read
            (TOK.encode("error: ..."), 0),
            (turn("read_file", {"path": "a.py"}), 1),
            (obs, 0),
            (turn("edit", {"path": "a.py", "old": "    return y + 2\n", "new": "x"}), 1),  # copy
            (TOK.encode("edited a.py"), 0),
            (turn("edit", {"path": "a.py", "old": "    return y+2", "new": "x"}), 1),  # retyped
            (TOK.encode("error"), 0),
            (turn("edit", {"path": "a.py", "old": "    y = x", "new": "x"}), 1),  # copy, not bug
        ]
    )
    b = record([(prompt, 0), (TOK.encode("<no call>"), 1)])  # no edit at all
    s = copy_stats(TOK, [a, b], [TASK])
    # edits: 4; copied: the 2nd and the 4th (the 1st came before any read, the 3rd's text is
    # not in the file); on the bug: the 1st and 2nd (the 3rd is not the line as written)
    assert s == {"edits": 4, "edits_copied": 2, "edits_on_bug": 2, "copy_rate": 1 / 4}
    assert copy_stats(TOK, [b], [TASK])["copy_rate"] is None  # 0 edits: no rate


def test_unknown_task_is_named():
    import pytest

    with pytest.raises(ValueError, match="unknown task 'zz'"):
        copy_stats(TOK, [{"task_id": "zz", "tokens": [], "mask": []}], [TASK])


def test_first_search_names_the_statements_symbol_or_not():
    from eval.copy_rate import search_stats, statement_names

    task = Task("t", "There is a bug in `Dict._hook`: `parse()` fails", {"a.py": OLD}, {}, {})
    assert statement_names(task.prompt) == {"_hook", "parse"}
    prompt = TOK.encode(task.prompt)
    names = record(  # a read, then the first search names _hook; the second search is not read
        [
            (prompt, 0),
            (turn("read_file", {"path": "a.py"}), 1),
            (TOK.encode(OLD), 0),
            (turn("search", {"pattern": r"def _hook\b"}), 1),
            (TOK.encode("a.py:1"), 0),
            (turn("search", {"pattern": "munchify"}), 1),
        ]
    )
    other = record([(prompt, 0), (turn("code_search", {"query": "semver parse_version"}), 1)])
    none = record([(prompt, 0), (turn("run_tests", {}), 1)])  # no search: not counted
    s = search_stats(TOK, [names, other, none], [task])
    assert s == {"searches": 2, "searches_naming": 1, "search_name_rate": 1 / 2}
    assert search_stats(TOK, [none], [task])["search_name_rate"] is None
    unnamed = Task("t", "the total is wrong", {"a.py": OLD}, {}, {})  # nothing to copy
    assert search_stats(TOK, [names], [unnamed])["searches"] == 0
