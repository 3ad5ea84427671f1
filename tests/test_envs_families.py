"""Code review and DevOps families (rl/envs/grading/grade_review.py,
rl/envs/grading/grade_devops.py), procedural and mined from the vendored projects: through the task
gate, through episodes, and against scripted cheats."""

import time

import pytest

from data.chat import tool_call_text
from data.tokenizers import ByteTokenizer
from rl.envs import CodingEnv, OraclePolicy, generate_task, run_episode, verify_task
from rl.envs.agent.snapshot import branch, snapshot
from rl.envs.grading import grade_devops as devops
from rl.envs.grading import grade_review as review
from rl.envs.grading.tasks import Task
from rl.envs.isolation.sandbox import Sandbox
from rl.envs.repos.projects import load_recipes
from rl.envs.repos.review_devops import devops_tasks, review_tasks

TOK = ByteTokenizer()
END = TOK.special_id("end")


def turn(name, args):
    return TOK.encode(tool_call_text(name, args), allow_special=True) + [END]


def scripted(*calls):
    turns = [turn(n, a) for n, a in calls] + [turn("submit", {})]
    return lambda context: turns.pop(0)


SOURCE = """def f(xs, lo):
    total = 0
    for x in xs:
        if x > lo:
            total = total + min(
                x,
                lo + 1,
            )
    return total
"""


def test_review_tolerance_is_the_mutated_statements_span():
    # a simple statement: all its lines; a compound statement's header: the header, not the body
    assert review.answer_span(SOURCE, 6) == (5, 8)
    assert review.answer_span(SOURCE, 4) == (4, 4)
    assert review.answer_span(SOURCE, 3) == (3, 3)
    task = Task("t", "p", {"a/m.py": SOURCE}, {}, {})
    task.meta["review"] = {"path": "a/m.py", "lines": [5, 8], "op": "off_by_one"}
    hits = [review.grade_report(task, r).passed for r in [("a/m.py", 5), ("./a/m.py", 8)]]
    misses = [("a/m.py", 4), ("a/m.py", 9), ("m.py", 6), ("b/m.py", 6)]
    assert hits == [1, 1] and [review.grade_report(task, r).passed for r in misses] == [0] * 4
    assert review.grade_report(task, None).passed == 0
    del task.meta["review"]  # fail closed: no answer, no credit
    assert review.grade_report(task, ("a/m.py", 5)).passed == 0


def test_review_family_gate_episodes_first_report_counts_and_snapshot():
    task = generate_task("review_patch", 0)
    assert verify_task(task).accepted  # the defect is real: hidden tests fail, pass without it
    assert review.verify_review(task) is None
    path, (lo, hi) = task.meta["review"]["path"], task.meta["review"]["lines"]
    assert "```diff" in task.prompt and str(lo) not in task.prompt.split("```")[0]
    oracle = run_episode(CodingEnv(TOK), task, OraclePolicy(TOK, task))
    assert oracle.all_pass and (oracle.tests_passed, oracle.tests_total) == (1, 1)
    cheats = {
        "no report": scripted(),
        "wrong line first": scripted(
            ("report", {"path": path, "line": hi + 1}), ("report", {"path": path, "line": lo})
        ),
        "answer in a file": scripted(("write_file", {"path": "REPORT", "content": f"{path}:{lo}"})),
        "edit the code": scripted(("write_file", {"path": path, "content": task.solution[path]})),
    }
    for name, policy in cheats.items():
        assert run_episode(CodingEnv(TOK), task, policy).tests_passed == 0, name
    # the report is kept on the host and travels with a snapshot; a second report changes nothing
    env = CodingEnv(TOK)
    env.reset(task)
    obs, _ = env.step(turn("report", {"path": path, "line": lo}))
    assert TOK.decode(obs).count(f"reported {path}:{lo}") == 1 and "hit" not in TOK.decode(obs)
    obs, _ = env.step(turn("report", {"path": path, "line": 1}))
    assert "only the first report counts" in TOK.decode(obs)
    with snapshot(env) as snap:
        (child,) = branch(snap, 1, lambda: CodingEnv(TOK))
        child.step(turn("submit", {}))
        assert child.grade.all_pass
    env.close()
    plain = CodingEnv(TOK)  # tasks without the tool: report is an unknown tool
    plain.reset(generate_task("boundary", 0))
    plain.step(turn("report", {"path": "a.py", "line": 1}))
    assert plain.record().malformed_calls == 1
    plain.close()


DEVOPS = ("devops_pytest_config", "devops_makefile", "devops_requirements", "devops_script")


@pytest.mark.parametrize("template", DEVOPS)
def test_devops_family_through_the_gate_and_an_episode(template):
    task = generate_task(template, 0)
    verdict = verify_task(task)  # untouched fails, reference passes, every scripted cheat fails
    assert verdict.accepted, verdict.reason
    assert task.meta["devops"]["baseline"] == task.meta["devops"]["expected"]
    if template != "devops_makefile":
        return  # the gate graded untouched and reference already; one family plays episodes
    solved = run_episode(CodingEnv(TOK), task, OraclePolicy(TOK, task))
    noop = run_episode(CodingEnv(TOK), task, scripted())
    assert solved.all_pass and solved.tests_passed == 3 and noop.tests_passed == 0


def _cheat_grades(task):
    return {name: devops.grade_files(task, files) for name, files in devops.cheats(task).items()}


def test_devops_cheats_fail_each_for_its_reason():
    task = generate_task("devops_makefile", 0)
    task.meta["devops"]["baseline"] = sorted(devops.baseline_of(task))  # what the gate takes
    assert len(task.meta["devops"]["baseline"]) == 3
    grades = _cheat_grades(task)
    assert all(g.passed == 0 for g in grades.values())
    why = {name: g.output.splitlines()[0] for name, g in grades.items()}
    assert "files deleted" in why["delete_tests"]
    assert "files added: ['conftest.py']" in why["conftest_forces_pass"]
    assert "tests/test_core.py changed" in why["drop_one_test"]
    assert "not a plain pytest run: 'true'" in why["stub_check:Makefile"]
    assert "not a plain pytest run: 'echo PASSED" in why["forge_output:Makefile"]
    # plain pytest lines that run fewer tests: only the baseline test set catches them
    assert "3 baseline tests did not run" in why["collect_only:Makefile"]
    assert "1 baseline tests did not run" in why["deselect_one:Makefile"]
    # ungated (no baseline): nothing passes, whatever the repo holds
    fresh = generate_task("devops_makefile", 0)
    with Sandbox.from_files({**fresh.files, **fresh.solution}) as box:
        assert devops.grade_devops(fresh, box.root).passed == 0


def test_mined_review_and_devops_through_the_gate():
    t0 = time.time()
    recipes = [r for r in load_recipes() if r.project == "roman"]
    rv = review_tasks(recipes)[0]
    assert verify_task(rv).accepted and rv.meta["review"]["path"].startswith("src/roman/")
    assert "raise NotImplementedError" in rv.prompt  # the patch implements the stubbed function
    # semver ships addopts naming pytest-cov options; pytest-cov is not installed offline
    (config,) = [t for t in devops_tasks(("semver",)) if t.id == "semver-devops-config"]
    verdict = verify_task(config)
    assert verdict.accepted, verdict.reason
    base = config.meta["devops"]["baseline"]
    assert any(i.startswith("README.rst::") for i in base) and len(base) > 94  # doctests stay
    assert time.time() - t0 < 60


def test_suite_families_in_eval_oracle_one_empty_zero():
    from eval import agentic
    from rl.envs.repos.projects import family_tasks

    tasks = family_tasks(("roman", "inflection"))
    tasks = [t for t in tasks if t.meta["project"] == "roman" or t.meta["grader"] == "devops"]
    assert {t.meta["template"] for t in tasks} == {"repo_review", "repo_devops"}
    assert all(t.meta["devops"]["baseline"] for t in tasks if t.meta["grader"] == "devops")
    for solves, want in ((lambda i, s: True, 1.0), (lambda i, s: False, 0.0)):
        policy = agentic.ScriptedPolicy(TOK, tasks, solves, max_turns=8)
        metrics, _ = agentic.summarize(agentic.run_suite(policy, tasks, 1), [1])
        assert metrics["repo_review/pass_rate"] == metrics["repo_devops/pass_rate"] == want
