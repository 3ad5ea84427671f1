"""Tool protocol: strict parsing on token ids, truncation, and each tool's behaviour."""

import json
import re

import pytest

from data.chat import tool_call_text
from data.tokenizers import ByteTokenizer
from rl.envs import Limits, Sandbox
from rl.envs.agent.tools import (
    DURATIONS_SECTION_BODY,
    Malformed,
    ToolCall,
    execute,
    mask_durations,
    parse_turn,
    truncate_to_budget,
)

TOK = ByteTokenizer()
END = TOK.special_id("end")


def turn(text):
    return TOK.encode(text, allow_special=True) + [END]


def raw_call(body):
    return f"<|tool_call|>{body}<|/tool_call|>"


def test_well_formed_calls_parse_in_order_with_token_counts():
    text = (
        "I'll look first. "
        + tool_call_text("read_file", {"path": "a.py", "start_line": 2})
        + " then "
        + tool_call_text("run", {"command": "ls", "timeout_s": 1.5})
    )
    parsed = parse_turn(TOK, turn(text))
    assert parsed.terminated and not parsed.malformed
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("read_file", {"path": "a.py", "start_line": 2}),
        ("run", {"command": "ls", "timeout_s": 1.5}),
    ]
    first = tool_call_text("read_file", {"path": "a.py", "start_line": 2})
    assert parsed.calls[0].n_tokens == len(TOK.encode(first, allow_special=True))


@pytest.mark.parametrize(
    "body, why",
    [
        ('{"name": "read_file", "arguments": {"path": "a.py"', "not valid JSON"),
        ('{"name": "rm_rf", "arguments": {}}', "unknown tool"),
        (
            '{"name": "read_file", "arguments": {"path": "a.py"}, "extra": 1}',
            'exactly "name" and "arguments"',
        ),
        ('{"name": "read_file", "arguments": {"file": "a.py"}}', "unknown argument"),
        ('{"name": "read_file", "arguments": {}}', "missing required argument 'path'"),
        ('{"name": "read_file", "arguments": {"path": 3}}', "must be str"),
        ('{"name": "read_file", "arguments": {"path": "a", "start_line": true}}', "must be int"),
        (
            '{"name": "run", "arguments": {"command": "ls", "timeout_s": NaN}}',
            "non-standard JSON constant",
        ),
        ('{"name": "submit", "arguments": []}', "arguments must be an object"),
        ('["submit"]', 'exactly "name" and "arguments"'),
        (
            '{"name": "run", "arguments": {"command": "ls", "command": "rm -rf ."}}',
            "duplicate key(s) ['command']",
        ),
    ],
)
def test_malformed_calls_are_reported_with_reason(body, why):
    parsed = parse_turn(TOK, turn("ok " + raw_call(body)))
    assert not parsed.calls and len(parsed.malformed) == 1
    assert why in parsed.malformed[0].detail


def test_structural_errors():
    unclosed = parse_turn(
        TOK, turn("<|tool_call|>" + json.dumps({"name": "submit", "arguments": {}}))
    )
    assert [type(i) for i in unclosed.items] == [Malformed] and "never closed" in unclosed.items[
        0
    ].detail
    stray = parse_turn(TOK, turn("done<|/tool_call|>"))
    assert "without a matching" in stray.malformed[0].detail
    role = parse_turn(TOK, turn("<|user|>hi"))
    assert "unexpected control token <|user|>" in role.malformed[0].detail
    inner = parse_turn(
        TOK, turn('<|tool_call|>{"name": "submit", <|end|>"arguments": {}}<|/tool_call|>')
    )
    assert [m.detail for m in inner.malformed] == ["control token inside tool call JSON"]
    no_end = parse_turn(TOK, TOK.encode(tool_call_text("submit", {}), allow_special=True))
    assert not no_end.terminated and len(no_end.calls) == 1
    eos = parse_turn(
        TOK, TOK.encode(tool_call_text("submit", {}), allow_special=True) + [TOK.eos_id]
    )
    assert eos.terminated


def test_tool_call_text_inside_plain_bytes_is_not_a_call():
    # The model quoting the syntax as ordinary bytes (not special ids) must not trigger a tool.
    ids = TOK.encode("the format is " + tool_call_text("submit", {}), allow_special=False) + [END]
    assert parse_turn(TOK, ids).items == []


def test_truncation_keeps_head_and_tail_within_budget():
    """The environment's observation trim is data/chat.py's (tests/test_tool_trim.py)."""
    text = "".join(f"line {i}\n" for i in range(1000))
    ids = truncate_to_budget(TOK, text, 200)
    out = TOK.decode(ids)
    assert len(ids) <= 200 and out.startswith("line 0\n") and out.endswith("line 999\n")
    assert "characters cut ...]" in out
    assert truncate_to_budget(TOK, "short", 200) == TOK.encode("short")
    cut = TOK.decode(truncate_to_budget(TOK, "é" * 500, 101))  # cuts fall between characters
    assert "characters cut" in cut and "\ufffd" not in cut
    huge = "a" * 50_000_000 + "END"  # tokenizing this whole would take GBs
    ids = truncate_to_budget(TOK, huge, 100)
    out = TOK.decode(ids)
    assert len(ids) <= 100 and out.endswith("END")
    head, tail = out.split("\n[... ")[0], out.split(" characters cut ...]\n")[1]
    assert f"[... {len(huge) - len(head) - len(tail)} characters cut ...]" in out


@pytest.fixture
def box():
    with Sandbox.from_files(
        {"a.py": "one\ntwo\nthree\n", "pkg/b.py": "x = 1\nx = 1\n"},
        limits=Limits(output_bytes=2000),
    ) as sb:
        yield sb


def call(box, name, command_timeout_s=5, **arguments):
    return execute(
        box,
        ToolCall(name, arguments, 0),
        test_command="python3 -m pytest -q",
        command_timeout_s=command_timeout_s,
        test_timeout_s=20,
    )


def test_tools_read_write_edit_list(box):
    assert call(box, "list_files").text.splitlines() == ["a.py", "pkg/b.py"]
    assert call(box, "read_file", path="a.py", start_line=2, end_line=3).text == "two\nthree\n"
    assert call(box, "read_file", path="a.py", start_line=3).text == "three\n"
    assert not call(box, "read_file", path="a.py", start_line=0).ok
    missing = call(box, "read_file", path="pkg/missing.py")
    # the path as the policy wrote it, never the sandbox's host path (it differs per episode)
    assert not missing.ok and missing.text == "error: pkg/missing.py: No such file or directory"
    assert call(box, "edit", path="pkg/c.py", old="x", new="y").text == (
        "error: pkg/c.py: No such file or directory"
    )
    out = call(box, "edit", path="pkg/b.py", old="x = 1\n", new="x = 2\n")
    assert not out.ok and "found 2 times" in out.text  # exact, unique match only
    assert call(box, "edit", path="a.py", old="two", new="TWO").ok
    assert box.read_text("a.py") == "one\nTWO\nthree\n"
    assert call(box, "write_file", path="new/c.py", content="y = 3\n").ok
    assert call(box, "run", command="python3 -c 'import new.c as c; print(c.y)'").text.endswith(
        "3\n"
    )
    escape = call(box, "write_file", path="../outside.py", content="")
    assert not escape.ok and "outside the repository" in escape.text
    assert call(box, "submit").submitted


def test_run_and_run_tests_report_status(box):
    box.write_text("test_a.py", "def test_ok():\n    assert 1\n\ndef test_bad():\n    assert 0\n")
    out = call(box, "run_tests")
    assert not out.ok and out.text.startswith("[exit:1]") and "1 failed, 1 passed" in out.text
    out = call(box, "run_tests", path="test_a.py::test_ok")
    assert out.ok and "1 passed" in out.text
    out = call(
        box, "run", command_timeout_s=1, command="sleep 10", timeout_s=100
    )  # capped at the env's command timeout
    assert out.text.startswith("[timeout]")


@pytest.mark.parametrize(
    "raw, masked",
    [
        ("1 failed, 1 passed in 0.05s\n", "1 failed, 1 passed in X.XXs\n"),
        ("=== 2 passed in 65.12s (0:01:05) ===", "=== 2 passed in X.XXs ==="),
        ("no tests ran in 0.02s", "no tests ran in X.XXs"),
        ("Ran 3 tests in 0.001s", "Ran 3 tests in X.XXs"),  # unittest
        (
            "0.12s call     t.py::x\n  0.00s setup    t.py::x",
            "X.XXs call     t.py::x\n  X.XXs setup    t.py::x",
        ),
        ("PASSED t.py::x (0.03s)", "PASSED t.py::x (X.XXs)"),
        (  # rows, their order and the hidden count vary: the section's body is one fixed line
            "== slowest 3 durations ==\n0.03s call     t.py::x\n\n"
            "(5 durations < 0.005s hidden.  Use -vv to show these durations.)\n== 1 passed ==",
            "== slowest 3 durations ==\n(durations omitted: they differ between runs)\n"
            "== 1 passed ==",
        ),
        ("sleep 2s; echo 1.5s in 3s", "sleep 2s; echo 1.5s in 3s"),  # not a runner's duration
    ],
)
def test_mask_durations(raw, masked):
    assert mask_durations(raw) == masked


def test_test_output_is_deterministic(box):
    """Two runs of the same tests print different wall times; the observations are identical."""
    box.write_text(
        "test_t.py",
        "import random, time\n\n"
        "def test_slow():\n    time.sleep(random.uniform(0.01, 0.2))\n\n"
        "def test_bad():\n    assert 0\n",
    )
    outs = [call(box, "run_tests").text for _ in range(2)]
    durs = [
        call(box, "run", command="python3 -m pytest -q --durations=0 -vv").text for _ in range(2)
    ]
    assert outs[0] == outs[1] and durs[0] == durs[1]
    assert "1 failed, 1 passed in X.XXs" in outs[0]
    assert "slowest durations =" in durs[0] and DURATIONS_SECTION_BODY in durs[0]
    assert "1 failed, 1 passed in X.XXs" in durs[0] and "test_t.py:7: AssertionError" in durs[0]
    assert not re.search(r"\d\.\d+s", outs[0] + durs[0]), outs[0] + durs[0]
