"""Held out by repository (rl/envs/repos/holdout.py): the splits, and the contamination check
that no held-out repository's source is in the pretraining corpus or the SFT traces."""

import json
import shutil

import pytest

from rl.envs.repos import holdout as H
from rl.envs.repos.projects import PROJECTS, load_recipes
from rl.envs.repos.vendored import project_files

ROMAN = "roman/src/roman/__init__.py"


def test_splits_by_repository_and_by_site():
    train, held = H.split_projects(PROJECTS, ("roman",))
    assert held == ["roman"] and "roman" not in train and set(train) | set(held) == set(PROJECTS)
    with pytest.raises(ValueError, match="not among"):
        H.split_projects(PROJECTS, ("nosuch",))
    recipes = load_recipes()
    by_site = frozenset(r.id for r in recipes[:5] if r.project != "roman")
    tr, ho = H.split_recipes(recipes, ("roman",), by_site)
    assert {r.project for r in tr}.isdisjoint({"roman"})  # every roman task is held out
    assert {r.id for r in ho} == by_site | {r.id for r in recipes if r.project == "roman"}
    assert len(tr) + len(ho) == len(recipes) and not {r.id for r in tr} & by_site


def foreign_source(traces_dir) -> list:
    """Contamination hits of every vendored project in traces_dir/*.jsonl, but the training
    repositories' source in the expert's traces on them (it reads their functions by design)."""
    expert = traces_dir / "repo_expert_traces.jsonl"
    with open(expert, encoding="utf-8") as f:
        worked = {json.loads(line)["project"] for line in f if line.strip()}
    assert worked and not worked & set(H.HELD_OUT_REPOS)  # the expert works no held-out repo
    index = H.held_out_index(PROJECTS)  # every vendored project, not only the held-out one
    assert ROMAN in index and len(index[ROMAN]) >= 50
    hits = H.contamination(index, H.trace_documents(str(traces_dir / "*.jsonl")))
    return [
        h
        for h in hits
        if not (h.document.startswith(f"{expert}:") and h.held_out_file.split("/")[0] in worked)
    ]


def test_committed_traces_hold_no_held_out_source():
    assert foreign_source(H.ROOT / "data/traces") == []


def test_a_training_repositorys_source_outside_the_expert_traces_is_found(tmp_path):
    _plant(tmp_path, project_files("toposort")["src/toposort.py"])
    assert [h.held_out_file for h in foreign_source(tmp_path)] == ["toposort/src/toposort.py"]


def _plant(tmp_path, text: str) -> str:
    """The committed traces copied to tmp_path, plus one record whose write_file call carries
    `text` JSON-encoded inside the tool call's arguments (as a real trace would hold it)."""
    for src in sorted(H.ROOT.glob("data/traces/*.jsonl")):
        shutil.copy(src, tmp_path / src.name)
    call = json.dumps({"name": "write_file", "arguments": {"path": "x.py", "content": text}})
    record = {"messages": [{"role": "assistant", "content": f"<|tool_call|>{call}<|/tool_call|>"}]}
    with open(tmp_path / "coding_traces.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    return str(tmp_path / "*.jsonl")


def test_a_planted_held_out_file_is_found_even_reindented(tmp_path):
    source = project_files("roman")["src/roman/__init__.py"]
    reindented = "\n\n".join("  " + line.replace("    ", "\t") for line in source.splitlines())
    pattern = _plant(tmp_path, reindented)
    index = H.held_out_index(("roman",))
    hits = H.contamination(index, H.trace_documents(pattern))
    assert [h.held_out_file for h in hits] == [ROMAN]
    assert hits[0].document.endswith(f"coding_traces.jsonl:line {_lines(tmp_path)}")
    assert hits[0].fraction > 0.9  # lines with backslashes may unescape differently
    # the whole check (corpus of one planted file + the clean traces) fails the same way
    planted = tmp_path / "corpus" / "copy.py"
    planted.parent.mkdir()
    planted.write_text(source)
    clean = str(H.ROOT / "data/traces/*.jsonl")
    hits = H.check(
        ("roman",), clean, [{"kind": "files", "paths": [str(planted)]}], log=lambda *_: None
    )
    assert [(h.held_out_file, h.document) for h in hits] == [(ROMAN, str(planted))]


def _lines(tmp_path) -> int:
    return sum(1 for _ in open(tmp_path / "coding_traces.jsonl", encoding="utf-8"))


def test_a_few_shared_lines_stay_under_the_threshold(tmp_path):
    source = project_files("roman")["src/roman/__init__.py"].splitlines()
    index = H.held_out_index(("roman",))
    excerpt = "\n".join(source[: len(source) // 8])  # an eighth of the file: below 25%
    hits = H.contamination(index, [("doc", excerpt)])
    assert hits == []
    half = "\n".join(source[: len(source) // 2])
    assert [h.held_out_file for h in H.contamination(index, [("doc", half)])] == [ROMAN]


def test_default_pretraining_corpus_holds_no_held_out_source():
    sources = H.pretraining_sources()
    assert {"kind": "stdlib"} in sources
    index = H.held_out_index()
    assert H.contamination(index, H.corpus_documents(sources)) == []


def test_training_pool_never_mines_a_held_out_repository(monkeypatch):
    from rl.envs.repos import projects

    seen = {}

    def fake_mine(per_project, tries, seed, skip, projects_, log=print):
        seen["projects"], seen["skip"] = list(projects_), skip
        return []

    monkeypatch.setattr(projects, "mine_projects", fake_mine)
    monkeypatch.setattr(projects, "gated", lambda recipes, workers, log: (recipes, []))
    projects.pool(2)
    train = ["inflection", "semver", "parse", "addict", "cachetools", "first", "isodate"]
    train += ["jmespath", "ordered-set", "toml", "validators", "webcolors", "xmltodict"]
    train += ["decorator", "funcy", "munch", "six", "voluptuous"]  # vendored by h50g's re-run
    train += ["toposort"]  # vendored by s28b's
    assert seen["projects"] == train  # roman, jsonpointer and schema held out whole
    assert seen["skip"] == {r.id for r in load_recipes()}  # the suite's sites held out too
    projects.pool(2, held_out=("parse",))
    assert "parse" not in seen["projects"] and "roman" in seen["projects"]
