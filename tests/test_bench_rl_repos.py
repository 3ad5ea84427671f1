"""bench/bench_rl_repos.py's task sets (chosen in bench/rl_stages.py), without a model: the RL
pool, the held-out sites and the held-out repositories are disjoint the way issue 52 asks (the
whole path is tests/test_bench_tiny_rl.py's -m long smoke run)."""

from bench import rl_stages as b
from rl.envs.repos import holdout


def test_pool_sites_and_repositories_are_disjoint():
    pool, sets = b.select(6, 6)
    held = set(holdout.HELD_OUT_REPOS)
    projects = lambda ds: {d["project"] for d in ds}  # noqa: E731
    assert pool and not projects(pool) & held
    assert len(sets["sites"]) == 6 and not projects(sets["sites"]) & held
    assert len(sets["repos"]) == 6 and projects(sets["repos"]) <= held
    assert not {d["id"] for d in pool} & {d["id"] for s in sets.values() for d in s}
    assert {d["family"] for d in pool} == set(b.KINDS)  # the expert's kinds: no review, DevOps
    # round robin: the first 3 held-out sites come from 3 different training projects
    assert len(projects(sets["sites"][:3])) == 3
    (task,) = b.build(sets["repos"][:1])  # a line builds into its task
    assert task.id == sets["repos"][0]["id"] and task.solution


def test_interleave_takes_projects_in_turn():
    items = [{"project": p, "id": f"{p}{i}"} for p, i in ("a0", "a1", "a2", "b0", "c0", "c1")]
    assert [d["id"] for d in b.interleave(items, 5)] == ["a0", "b0", "c0", "a1", "c1"]
