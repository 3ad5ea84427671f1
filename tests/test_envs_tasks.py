"""Task generator reproducibility, JSONL + files round trip, the verification gate, hardening."""

import json
import pathlib

import pytest

from rl.envs import (
    TEMPLATES,
    Task,
    generate_task,
    generate_tasks,
    load_tasks,
    save_tasks,
    verify_tasks,
)
from rl.envs.grading.harden import harden_module
from rl.envs.grading.tasks import grade_repo


def test_generator_is_reproducible_by_seed_and_covers_every_kind():
    a, b = generate_tasks(20, seed=3), generate_tasks(20, seed=3)
    assert a == b
    assert generate_tasks(20, seed=4) != a
    assert {t.kind for t in a} == {"bugfix", "feature", "refactor", "tests", "docs", "migration"}
    assert len({t.id for t in a}) == len(a)
    for task in a:
        assert len(task.prompt) < 120 and task.hidden_tests and task.solution  # terse prompts
        assert not set(task.hidden_tests) & set(task.files)  # hidden means hidden


def test_difficulty_grows_the_repo_and_vagues_the_prompt():
    easy, hard = generate_task("rename", 5, 1), generate_task("rename", 5, 3)
    assert len(hard.files) > len(easy.files)
    assert "core.py" in easy.prompt and "core.py" not in hard.prompt
    with pytest.raises(ValueError, match="unknown task template 'nope'"):
        generate_task("nope", 0)
    with pytest.raises(ValueError, match="difficulty must be 1, 2 or 3"):
        generate_task("rename", 0, 4)


def test_package_override_renames_the_package_and_keeps_the_task(tmp_path):
    base, renamed = (
        generate_task("boundary", 7, 2),
        generate_task("boundary", 7, 2, package="zorbu"),
    )
    old = base.meta["package"]
    swap = lambda d: {k.replace(old, "zorbu"): v.replace(old, "zorbu") for k, v in d.items()}
    assert (
        renamed.prompt == base.prompt.replace(old, "zorbu") and renamed.meta["package"] == "zorbu"
    )
    assert renamed.files == swap(base.files) and renamed.solution == swap(base.solution)
    assert renamed.hidden_tests == swap(base.hidden_tests)
    accepted, rejected = verify_tasks([renamed])  # its reference solution passes its hidden tests
    assert rejected == [] and len(accepted) == 1
    for bad in ("Zorbu", "zor-bu", "1zorbu"):
        with pytest.raises(ValueError, match="expected a lowercase Python identifier"):
            generate_task("boundary", 7, 2, package=bad)


def test_jsonl_round_trip(tmp_path):
    tasks = generate_tasks(len(TEMPLATES), seed=11)
    tasks[0].solution["README.md"] = None  # a deletion survives the round trip
    tasks[1].setup = ['python3 -c \'open("gen.txt", "w").write("x")\'']
    save_tasks(tasks, tmp_path / "set" / "tasks.jsonl")
    assert load_tasks(tmp_path / "set" / "tasks.jsonl") == tasks
    row = json.loads((tmp_path / "set" / "tasks.jsonl").read_text().splitlines()[0])
    assert (tmp_path / "set" / row["repo"]).is_dir() and row["solution_deletes"] == ["README.md"]


def test_load_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"id": "a", "prompt": "p", "repo": "r", "hidden_tests": "h", "solution": "s"}\n'
    )
    with pytest.raises(ValueError, match=r"t.jsonl:1: field 'repo' names .*not a directory"):
        load_tasks(path)
    path.write_text('\n{"id": "a", "prompt": ""}\n')
    with pytest.raises(ValueError, match=r"t.jsonl:2: field 'prompt' must be a non-empty string"):
        load_tasks(path)
    path.write_text("{oops\n")
    with pytest.raises(ValueError, match=r"t.jsonl:1: not valid JSON"):
        load_tasks(path)


MODULE = {"calc.py": "def double(x):\n    return x + x\n"}
HIDDEN = {
    "test_calc.py": "from calc import double, triple\n\n"
    "def test_double():\n    assert double(4) == 8\n\n"
    "def test_triple():\n    assert triple(2) == 6\n"
}
GOOD = {"calc.py": MODULE["calc.py"] + "\n\ndef triple(x):\n    return 3 * x\n"}


def test_gate_accepts_good_and_rejects_bad_tasks_with_reasons():
    tasks = [
        Task("good", "add triple()", MODULE, HIDDEN, GOOD, setup=["python3 -c 'import calc'"]),
        Task("already-passing", "add triple()", GOOD, HIDDEN, GOOD),
        Task(
            "reference-fails",
            "add triple()",
            MODULE,
            HIDDEN,
            {"calc.py": MODULE["calc.py"] + "\n\ndef triple(x):\n    return 2 * x\n"},
        ),
        Task("setup-fails", "add triple()", MODULE, HIDDEN, GOOD, setup=["true", "exit 3"]),
        Task("no-tests", "add triple()", MODULE, {"test_calc.py": "x = 1\n"}, GOOD),
        generate_task("off_by_one", 2, 2),
        generate_task("write_tests", 2, 1),
    ]
    accepted, rejected = verify_tasks(tasks)
    assert [t.id for t in accepted] == ["good", "off_by_one-s2-d2", "write_tests-s2-d1"]
    reasons = {v.task_id: v.reason for v in rejected}
    assert reasons["already-passing"] == "hidden tests already pass on the untouched repo (2/2)"
    assert reasons["reference-fails"].startswith("reference solution fails hidden tests (1/2)")
    assert reasons["setup-fails"].startswith("setup command 1 ('exit 3') ended exit:3")
    assert reasons["no-tests"].startswith("no hidden tests ran")
    assert accepted[0].meta["hidden_test_count"] == 2


def test_uncollectable_hidden_file_still_counts_its_tests(tmp_path):
    (tmp_path / "calc.py").write_text("raise ImportError('agent broke it')\n")
    task = Task("t", "p", {}, HIDDEN, {}, meta={"hidden_test_count": 2})
    grade = grade_repo(task, str(tmp_path), timeout_s=20)
    assert (grade.passed, grade.total, grade.fraction, grade.all_pass) == (0, 2, 0.0, False)


@pytest.mark.long  # ~32 s: every template x difficulty through the sandboxed gate
def test_every_template_and_difficulty_passes_the_gate():
    tasks = [generate_task(name, seed=0, difficulty=d) for name in TEMPLATES for d in (1, 2, 3)]
    accepted, rejected = verify_tasks(tasks)
    assert rejected == [] and len(accepted) == 3 * len(TEMPLATES)


def test_task_root_conftest_serves_hidden_tests_even_if_agent_rewrote_it(tmp_path):
    conftest = "import pytest\n\n@pytest.fixture\ndef answer():\n    return 42\n"
    task = Task(
        "c",
        "p",
        {"conftest.py": conftest},
        {"test_a.py": "def test_a(answer):\n    assert answer == 42\n"},
        {},
    )
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef answer():\n    return 0\n"
    )
    grade = grade_repo(task, str(tmp_path), timeout_s=20)
    assert (grade.passed, grade.total) == (1, 1), grade.output


def test_cli_make_then_verify_round_trip(tmp_path, capsys):
    from rl.envs.__main__ import main

    assert (
        main(["make", "--n", "2", "--seed", "5", "--difficulties", "1", "--out", str(tmp_path)])
        == 0
    )
    assert "2/2 tasks accepted" in capsys.readouterr().out
    saved = load_tasks(tmp_path / "tasks.jsonl")
    assert [t.id for t in saved] == [t.id for t in generate_tasks(2, seed=5, difficulties=(1,))]
    assert all(t.meta["hidden_test_count"] > 0 for t in saved)
    (tmp_path / saved[0].id / "solution" / next(iter(saved[0].solution))).write_text("broken(\n")
    assert main(["verify", str(tmp_path / "tasks.jsonl")]) == 1
    out = capsys.readouterr().out
    assert (
        f"REJECTED {saved[0].id}: reference solution fails hidden tests" in out
        and "1/2 tasks accepted" in out
    )


def test_hand_written_task_set_loads_verifies_and_is_solvable():
    from data.tokenizers import ByteTokenizer
    from rl.envs import CodingEnv, OraclePolicy, run_episode

    path = pathlib.Path(__file__).parent / "envs_fixtures" / "custom" / "tasks.jsonl"
    [task] = load_tasks(path)
    assert task.solution["notes.txt"] is None and task.setup == ['python3 -c "import fizz"']
    accepted, rejected = verify_tasks([task])
    assert rejected == [] and task.meta["hidden_test_count"] == 2
    tok = ByteTokenizer()
    record = run_episode(CodingEnv(tok), task, OraclePolicy(tok, task))
    assert record.all_pass and record.tool_calls == 5  # list, write, rm, run_tests, submit


def test_hardening_seals_literal_expected_values_and_keeps_fixtures():
    # The expected value of `assert ... == <literal>` stays on the host (not in the file the sandbox
    # reads); a fixture named test_* is not a test, so it keeps its name (tests request it by name).
    source = (
        "import pytest\n\n\n@pytest.fixture\ndef test_data():\n    return 21\n\n\n"
        "def test_double(test_data):\n    assert test_data * 2 == 424242\n"
    )
    hardened = harden_module(source)
    assert "424242" not in hardened.source and list(hardened.sealed.values()) == [424242]
    assert "def test_data(" in hardened.source and len(hardened.real) == 1
