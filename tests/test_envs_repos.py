"""Real repositories as environments (rl/envs/repos), search tools, snapshots.

The real path (setup agent -> gate -> mined task -> task gate, oracle, no-op, cheats) runs on the
smallest vendored project (roman: 9 tests); the committed suite is checked without a sandbox."""

import ast
import dataclasses
import json
import pathlib

import pytest

from data.chat import tool_call_text
from data.tokenizers import ByteTokenizer
from rl.envs import CodingEnv, OraclePolicy, generate_task, run_episode, verify_task
from rl.envs.agent.snapshot import branch, snapshot
from rl.envs.grading.harden import harden_suite, iter_tests
from rl.envs.grading.tasks import apply_solution, grade_in
from rl.envs.isolation.sandbox import Sandbox
from rl.envs.repos import mine as M
from rl.envs.repos.projects import PROJECTS, load_spec, project_files, suite_tasks
from rl.envs.repos.setup import setup_repo
from rl.envs.repos.spec import EnvSpec, admit, hidden_rel, read_tree

TOK = ByteTokenizer()
END = TOK.special_id("end")


def turn(name, args):
    return TOK.encode(tool_call_text(name, args), allow_special=True) + [END]


def submit_only(context):
    return turn("submit", {})


def test_roman_setup_gate_mine_oracle_noop_and_cheats():
    files = project_files("roman")
    admission = setup_repo("roman", files, TOK)
    assert admission.admitted, admission.reason
    spec = admission.spec
    # the scripted agent repaired its way to a working command: src layout linked, tox's
    # zope-testrunner missing offline -> pytest, src/tests.py passed explicitly
    assert spec.setup == ["ln -s src/roman roman"]
    assert spec.test_command == "python3 -m pytest -q src/tests.py"
    assert spec.test_files == ["src/tests.py"]
    assert len(spec.baseline) == 9 and all(spec.baseline.values())  # as the committed spec says
    assert spec.baseline == load_spec("roman").baseline
    site = next(s for s in M.candidate_sites(files, spec) if s.op == "flip_comparison")
    f2p = M.fail_to_pass(site, files, spec)
    assert f2p and set(f2p) <= spec.passing()
    recipe = M.Recipe(M.site_id("roman", site), "roman", "bugfix", site, f2p)
    recipe.prompt = M.statement(recipe, files, spec)
    task = M.build_task(recipe, files, spec)
    assert "roman/" not in task.prompt and f"`{site.symbol}`" in task.prompt
    assert verify_task(task).accepted  # fails before, passes with the reference fix
    assert M.cheats_fail(task) is None
    solved = run_episode(CodingEnv(TOK), task, OraclePolicy(TOK, task))
    noop = run_episode(CodingEnv(TOK), task, submit_only)
    assert solved.all_pass and not noop.all_pass and noop.tests_passed < noop.tests_total


SHELF = pathlib.Path(__file__).parent / "envs_fixtures" / "shelf"  # unittest style, src layout
INHERITED = "tests/test_eviction.py::LRUBehaviour::test_length_never_exceeds_capacity"


@pytest.fixture(scope="module")
def shelf_task():
    """shelf as shipped (test classes not named Test*, the contract's tests inherited from a
    mixin in tests/__init__.py) through the setup agent and the gate, and one mined task."""
    files = read_tree(SHELF)
    admission = setup_repo("shelf", files, TOK)
    assert admission.admitted, admission.reason
    spec = admission.spec
    site = next(
        s
        for s in M.candidate_sites(files, spec)
        if s.op == "flip_comparison" and "len(self._data) > self.capacity" in s.apply(files[s.path])
    )
    f2p = M.fail_to_pass(site, files, spec)
    recipe = M.Recipe(M.site_id("shelf", site), "shelf", "bugfix", site, f2p)
    recipe.prompt = M.statement(recipe, files, spec)
    return spec, M.build_task(recipe, files, spec)


def test_unittest_repository_with_mixin_tests_is_admitted_and_mined_as_shipped(shelf_task):
    spec, task = shelf_task
    assert spec.setup == ["ln -s src/shelf shelf"]
    assert spec.test_files == ["tests/test_eviction.py", "tests/test_stats.py"]
    # 2 classes x (6 inherited from the mixin + 1 own) + 3 = 17, under the names as written
    assert len(spec.baseline) == 17 and all(spec.baseline.values()), spec.baseline
    assert "tests/test_eviction.py::FIFOBehaviour::test_put_overwrites" in spec.baseline
    # ">=" -> ">" lets the cache grow past capacity: the inherited test fails in both classes
    assert INHERITED in task.meta["f2p"]
    assert INHERITED.replace("LRU", "FIFO") in task.meta["f2p"]
    # the inherited fail->pass test is dropped from the visible class by shadowing it
    assert "test_length_never_exceeds_capacity = None" in task.files["tests/test_eviction.py"]
    assert verify_task(task).accepted  # the unchanged repo fails, the reference passes
    assert M.cheats_fail(task) is None


def _grade(task, edits):
    with Sandbox.from_files(task.files) as box:
        for command in task.setup:
            assert box.run(command, 60).ok
        apply_solution(box, edits)
        return grade_in(box, task, timeout_s=60)


TRIVIAL_MIXIN = "class CacheContract:\n    cache_class = None\n\n" + "".join(
    f"    def test_{n}(self):\n        pass\n\n"
    for n in ("get_returns_what_was_put", "length_never_exceeds_capacity", "put_overwrites")
)
SKIP_ALL = "\nimport unittest\nunittest.TestCase.setUp = lambda self: self.skipTest('later')\n"
ALWAYS_EQUAL = (
    "\nclass _Any:\n    def __eq__(self, other):\n        return True\n\n\n"
    "BoundedCache.get = lambda self, key, default=None: _Any()\n"
    "BoundedCache.__len__ = lambda self: 0\n"
)


def test_shelf_edits_to_the_mixin_a_skip_or_always_equal_values_are_not_paid(shelf_task):
    spec, task = shelf_task
    (path,) = task.solution
    fixed = _grade(task, {"tests/__init__.py": TRIVIAL_MIXIN, **task.solution})
    assert fixed.all_pass and not fixed.tampered, fixed.output  # the grader's mixin is the original
    unfixed = _grade(task, {})
    assert not unfixed.all_pass and not unfixed.tampered, unfixed.output
    cheats = {
        "trivial mixin": {"tests/__init__.py": TRIVIAL_MIXIN},
        "skip every test": {
            "src/shelf/__init__.py": task.files["src/shelf/__init__.py"] + SKIP_ALL
        },
        "always-equal values": {path: task.files[path] + ALWAYS_EQUAL},
    }
    for name, edits in cheats.items():
        grade = _grade(task, edits)
        assert not grade.all_pass and grade.passed <= unfixed.passed, (name, grade.output)


STYLES = {
    "tests/__init__.py": (
        "class Contract:\n    def test_a(self):\n        assert f() == 1\n"
        "    def test_b(self):\n        pass\n"
    ),
    "tests/base.py": (
        "import unittest\nfrom . import Contract\n\n\n"
        "class Base(Contract, unittest.TestCase):\n    def test_c(self):\n        pass\n"
    ),
    "tests/test_styles.py": (
        "from tests.base import Base\nfrom . import Contract\n\n\n"
        "class Checks(Base):\n    test_b = None\n\n    def test_a(self):\n        pass\n\n\n"
        "class TestPlain(Contract):\n    pass\n\n\n"
        "class TestOff(Contract):\n    __test__ = False\n\n\n"
        "class TestInit:\n    def __init__(self):\n        pass\n\n"
        "    def test_never(self):\n        pass\n"
    ),
}


def test_hardening_keys_on_what_pytest_collects():
    # Inherited tests through a helper module and the tests package, an override, a test removed
    # by `test_b = None`, an imported unittest class (pytest collects it under its import name),
    # and classes pytest skips (__test__ = False, an __init__).
    layout, support = harden_suite(STYLES)
    h = layout["tests/test_styles.py"]
    assert sorted(h.origin.values()) == [
        "Base::test_a", "Base::test_b", "Base::test_c",
        "Checks::test_a", "Checks::test_c",
        "TestPlain::test_a", "TestPlain::test_b",
    ]  # fmt: skip
    assert all(k.split("::")[1] not in ("test_a", "test_b", "test_c") for k in h.real)
    # the mixin's canaries reach every class that inherits it; its expected value is sealed
    for cls in ("Base", "Checks", "TestPlain"):
        assert sum(c.startswith(cls + "::") for c in h.canaries) >= 2, h.canaries
    assert "== 1" not in support["tests/__init__.py"] and 1 in h.sealed.values()
    # test_a keeps one fresh name in the mixin and in Checks, so Checks' override still wins
    fresh = {v: k.split("::")[1] for k, v in h.origin.items()}
    assert fresh["Checks::test_a"] == fresh["Base::test_a"]
    assert f"def {fresh['Checks::test_a']}(self):\n        pass" in h.source


def test_one_test_name_in_two_modules_is_a_real_test_in_each():
    # parse's suite defines test_fixed in two files: both share one fresh name suite-wide, and
    # each file must still count its own (before the fix only the last file parsed did, so the
    # reference solution's report named "tests that do not exist": every parse task unsolvable)
    body = "def test_fixed():\n    assert 1 + 1 == 2\n\n\ndef test_{}():\n    assert True\n"
    modules = {f"tests/test_{m}.py": body.format(m) for m in ("a", "b")}
    layout, _ = harden_suite(modules)
    for rel in modules:
        assert sorted(layout[rel].origin.values()) == sorted(["test_fixed", f"test_{rel[-4]}"])
    fresh_a = {v: k for k, v in layout["tests/test_a.py"].origin.items()}
    fresh_b = {v: k for k, v in layout["tests/test_b.py"].origin.items()}
    assert fresh_a["test_fixed"] == fresh_b["test_fixed"]  # one fresh name, real in both


def test_tests_from_the_projects_own_code_are_rejected_with_the_whole_reason():
    files = {
        "lib/__init__.py": "class Contract:\n    def test_x(self):\n        assert 1 == 1\n",
        "tests/test_a.py": (
            "import unittest\nfrom lib import Contract\n\n\n"
            "class Checks(Contract, unittest.TestCase):\n    def test_y(self):\n        pass\n"
        ),
    }
    spec = EnvSpec("contract", [], "python3 -m pytest -q", ["tests/test_a.py"])
    admission = admit(files, spec)
    assert not admission.admitted
    reason = admission.reason
    assert "tests/test_a.py (" in reason and "class Checks inherits from Contract" in reason
    assert "what to change" in reason and len(reason) > 200 and "\n" not in reason


def test_repository_without_tests_is_rejected_with_the_reason():
    admission = setup_repo("empty", {"lib.py": "X = 1\n"}, TOK)
    assert not admission.admitted
    # the proposal names no test command, and the agent's note says why
    assert "'test_command' must be a non-empty string" in admission.reason
    assert "does not run the tests" in admission.reason


def test_mutation_operators_and_test_removal():
    src = (
        "def f(xs, k):\n"
        '    """Doc."""\n'
        "    if k < 0:\n"
        "        k = 0\n"
        "    return max(xs[1:], k) and g(xs, k + 1)\n"
    )
    sites = M.bug_sites("m.py", src)
    by_op = {}
    for s in sites:
        by_op.setdefault(s.op, []).append(s.apply(src))
    assert "    if k <= 0:\n" in by_op["flip_comparison"][0]
    assert "    pass\n" in by_op["drop_branch"][0] and "k = 0" not in by_op["drop_branch"][0]
    assert any("max(k, xs[1:])" in t for t in by_op["swap_args"])
    assert any("xs[2:]" in t for t in by_op["off_by_one"])
    assert any("k + 2" in t for t in by_op["off_by_one"])
    assert any(" or g(" in t for t in by_op["flip_bool_op"])
    for texts in by_op.values():
        for text in texts:
            ast.parse(text)  # every mutant compiles
            assert text.count("\n") <= src.count("\n")  # a one-spot change
    (removal,) = M.removal_sites("m.py", src)
    assert removal.apply(src) == 'def f(xs, k):\n    """Doc."""\n    raise NotImplementedError\n'
    tests = (
        "import pytest\n\n\n@pytest.mark.x\ndef test_a():\n    assert 1\n\n\n"
        "class TestB:\n    def test_c(self):\n        assert 1\n"
    )
    out = M.drop_tests(tests, {"test_a", "TestB::test_c"})
    assert "test_a" not in out and "test_c" not in out and "class TestB" in out
    assert "@pytest.mark.x" not in out
    ast.parse(out)


def test_committed_suite_is_held_out_terse_and_rebuilds_without_a_sandbox():
    tasks = suite_tasks()
    assert len(tasks) >= 50
    projects = {t.meta["project"] for t in tasks}
    assert len(projects) >= 3 and projects <= set(PROJECTS)
    assert {t.kind for t in tasks} == {"bugfix", "feature"}
    for t in tasks:
        assert len(t.prompt) < 400 and ".py" not in t.prompt  # what is wrong, not the file
        assert t.meta["tools"] == ["search", "code_search"]
        (path,) = t.solution
        assert t.files[path] != t.solution[path]  # the bug is in the repo the agent gets
        visible = set()  # graded ids of the tests the agent can see
        for p in load_spec(t.meta["project"]).test_files:
            visible |= {f"{hidden_rel(p)}::{k}" for k, _ in iter_tests(ast.parse(t.files[p]))}
        assert t.meta["f2p"] and not visible & set(t.meta["f2p"])  # fail->pass tests hidden
    assert len({t.id for t in tasks}) == len(tasks)


def test_search_tools_through_the_protocol():
    task = generate_task("boundary", 3, 2)
    with_search = dataclasses.replace(task, meta={**task.meta, "tools": ["search", "code_search"]})
    env = CodingEnv(TOK)
    prompt = TOK.decode(env.reset(with_search))
    assert "- search {pattern" in prompt and "- code_search {query" in prompt
    obs, done = env.step(turn("search", {"pattern": r"BULK_\w+ ="}))
    text = TOK.decode(obs)
    pkg = task.meta["package"]
    assert f"{pkg}/pricing.py:1: BULK_THRESHOLD =" in text and f"{pkg}/pricing.py:2:" in text
    obs, _ = env.step(turn("code_search", {"query": "order total discount", "k": 1}))
    assert f"{pkg}/pricing.py:" in TOK.decode(obs) and "def order_total" in TOK.decode(obs)
    obs, _ = env.step(turn("search", {"pattern": "(unclosed"}))
    assert "error: bad regex" in TOK.decode(obs)
    assert env.record().malformed_calls == 0
    env.close()
    plain = CodingEnv(TOK)  # a task that does not switch them on: unknown tools, prompt unchanged
    assert "- search" not in TOK.decode(plain.reset(task))
    plain.step(turn("search", {"pattern": "x"}))
    assert plain.record().malformed_calls == 1
    plain.close()


@pytest.mark.parametrize("k", [2])
def test_snapshot_branches_equal_a_fresh_rollout(k):
    task = generate_task("off_by_one", 11, 1)
    fresh = run_episode(CodingEnv(TOK), task, OraclePolicy(TOK, task))
    script = OraclePolicy(TOK, task)._turns
    env = CodingEnv(TOK)
    context = env.reset(task)
    prefix = 2  # list_files + the fix; the rest (run_tests, submit) runs in each branch
    for emitted in script[:prefix]:
        obs, done = env.step(emitted)
        context = context + emitted + obs
    with snapshot(env) as snap:
        branches = branch(snap, k, lambda: CodingEnv(TOK))
        env.close()
        for b in branches:
            for emitted in script[prefix:]:
                obs, done = b.step(emitted)
            rec = b.record()
            assert rec.tokens == fresh.tokens and rec.mask == fresh.mask
            assert (rec.tests_passed, rec.tests_total, rec.done_reason) == (
                fresh.tests_passed,
                fresh.tests_total,
                "submit",
            )
            assert done and rec.all_pass


def test_repos_suite_in_eval_oracle_one_empty_zero():
    from eval import agentic

    tasks = suite_tasks(("roman",), limit=2)
    for solves, want in ((lambda i, s: True, 1.0), (lambda i, s: False, 0.0)):
        policy = agentic.ScriptedPolicy(TOK, tasks, solves, max_turns=8)
        metrics, _ = agentic.summarize(agentic.run_suite(policy, tasks, 1), [1])
        assert metrics["pass_rate"] == want
        assert metrics["repo_bugfix/pass_rate"] == want  # the per-family report


# ---------------------------------------------------------------- python -m rl.envs.repos add


def _leftovers(*dirs):
    """Temporary files the add command must not leave behind (staging, half-written specs)."""
    return [p for d in dirs if d.exists() for p in d.rglob(".*")]


def test_add_a_folder_keeps_the_spec_and_writes_a_gated_pool(tmp_path):
    from rl.envs.grading.tasks import load_tasks
    from rl.envs.repos.add import add, main

    specs, out, lines = tmp_path / "specs", tmp_path / "pool" / "tasks.jsonl", []
    spec = add(str(SHELF), specs=specs, out=out, tasks=1, tries=8, timeout_s=60, log=lines.append)
    assert spec.name == "shelf" and len(spec.baseline) == 17
    assert any(line.startswith("proposal: ") and "ln -s src/shelf shelf" in line for line in lines)
    assert EnvSpec.from_json((specs / "shelf.json").read_text()) == spec
    # mined and gated (reference passes, unchanged repo fails, cheats fail), with the src-layout
    # repository's review and DevOps tasks (its setup link re-made by the DevOps grader)
    tasks = {t.meta.get("grader") or t.kind: t for t in load_tasks(out)}
    assert sorted(tasks) == ["bugfix", "devops", "review"], tasks
    assert all(t.setup == ["ln -s src/shelf shelf"] for t in tasks.values())
    devops = [t for t in load_tasks(out) if t.meta.get("grader") == "devops"]
    assert sorted(t.meta["devops"]["check"] for t in devops) == [
        "make test",
        "python3 -m pytest -q",
    ]
    assert all(
        t.meta["devops"]["products"] == ["shelf"] and t.meta["devops"]["baseline"] for t in devops
    )
    assert not _leftovers(specs, out.parent) and not (specs / "shelf.rejected.json").exists()
    # the companion command: a held-out suite from the kept spec, other sites than the pool's
    suite = tmp_path / "suite" / "tasks.jsonl"
    argv = ["suite", "--specs", str(specs / "shelf.json"), "--out", str(suite), "--per-repo", "1"]
    assert main([*argv, "--tries", "8", "--no-families", "--exclude", str(out)]) == 0
    (held,) = load_tasks(suite)
    assert held.meta["project"] == "shelf" and held.id not in {t.id for t in load_tasks(out)}


def test_add_an_sdist_names_the_project_without_its_version(tmp_path):
    import tarfile

    from rl.envs.repos.add import add

    sdist = tmp_path / "shelf-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        t.add(SHELF, arcname="shelf-0.1.0")
    specs, out = tmp_path / "specs", tmp_path / "pool" / "tasks.jsonl"
    spec = add(str(sdist), specs=specs, out=out, tasks=0, timeout_s=60, log=lambda _: None)
    assert spec.name == "shelf" and (specs / "shelf.json").exists() and out.read_text() == ""
    assert spec.baseline == EnvSpec.from_json((specs / "shelf.json").read_text()).baseline


def test_add_bad_inputs_get_one_line_errors_and_leave_no_spec(tmp_path, capsys):
    from rl.envs.repos.add import main

    no_tests, broken, hangs = (tmp_path / n for n in ("no_tests", "broken", "hangs"))
    for folder, files in (
        (no_tests, {"lib.py": "X = 1\n"}),
        (broken, {"lib.py": "X = 1\n", "setup.py": "setup(\n", "test_lib.py": "import lib\n"}),
        (hangs, {"test_slow.py": "import time\n\n\ndef test_wait():\n    time.sleep(600)\n"}),
    ):
        folder.mkdir()
        for rel, text in files.items():
            (folder / rel).write_text(text)
    (tmp_path / "notes.txt").write_text("x")
    specs = tmp_path / "specs"
    expect = {
        str(tmp_path / "missing"): "does not exist",
        str(tmp_path / "notes.txt"): "is not a folder, a git checkout or an sdist archive",
        str(no_tests): "has no tests",
        str(broken): "setup.py does not parse (line 1: '(' was never closed)",
        str(hangs): "did not finish in 5 s: the tests hang",
    }
    for path, message in expect.items():
        code = main(["add", path, "--specs", str(specs), "--timeout", "5", "--tasks", "0"])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and message in err, err
        assert err.count("\n") == 1, err  # one line
    # only the hanging project got as far as a proposal: kept with its reason, no spec
    assert sorted(p.name for p in specs.iterdir()) == ["hangs.rejected.json"]
    assert "did not finish" in json.loads((specs / "hangs.rejected.json").read_text())["reason"]
