"""A repository's declared test dependencies: read from the project, fetched by pip (from a local
wheel here: no network), mounted read-only in every sandbox after site-packages, fail closed."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

import pytest

from rl.envs.grading.tasks import Task, grade_in, grade_repo
from rl.envs.isolation import dep_cache as D
from rl.envs.isolation.sandbox import Sandbox
from rl.envs.repos import dep_fetch as F


def _wheel(where, name="rlfakedep", version="0.1", source="VALUE = 1\n"):
    """A minimal pure-Python wheel (one module), written with zipfile."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": source,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for rel, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{rel},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    path = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)
    return path


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """pip offline, from a folder holding rlfakedep 0.1; the cache in tmp_path."""
    index = tmp_path / "index"
    index.mkdir()
    _wheel(index)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv(D.CACHE_ENV, str(tmp_path / "cache"))
    return index


def _entry(root, modules: dict[str, str], pins=("rlfakedep==0.1",)) -> list[str]:
    """A cache entry made by hand (what fetch commits, without pip): lib/ holds `modules`."""
    tmp = root / ".tmp"
    (tmp / "lib").mkdir(parents=True)
    for name, text in modules.items():
        (tmp / "lib" / name).write_text(text)
    return F._commit(tmp, root, list(pins))


def test_declared_test_requirements_are_read_where_projects_declare_them():
    files = {
        # funcy's: pins with markers; only the ones whose marker holds here count
        "test_requirements.txt": "pytest==6.2.5; python_version>='3.6'\n"
        "pytest==3.9.3; python_version<='3.5'\nwhatever==0.7\n",
        # iso8601's: a poetry dev group (versions are poetry's syntax: the name is what counts)
        "pyproject.toml": '[tool.poetry.dependencies]\npython = ">=3.7"\n'
        '[tool.poetry.group.dev.dependencies]\npytz = "*"\nmypy = "*"\n',
        "tox.ini": "[testenv]\ndeps =\n    -rtest_requirements.txt\n    py38: toolz>=0.10\n",
        "setup.cfg": "[options.extras_require]\ntests =\n    hypothesis\ndocs =\n    sphinx\n",
    }
    declared = {str(r) for r in F.declared_test_requirements(files)}
    assert declared == {"pytest==6.2.5", "whatever==0.7", "pytz", "mypy", "toolz>=0.10",
                        "hypothesis"}  # fmt: skip
    assert "sphinx" not in declared  # a docs extra is no test dependency
    reqs = F.declared_test_requirements(files)
    # only a declared requirement that a test failed to import; never one nobody asked for
    assert F.needed(reqs, {"whatever", "pytz", "hypothesmith"}) == ["pytz", "whatever==0.7"]
    assert F.needed(reqs, {"hypothesmith"}) == []
    text = "E   ModuleNotFoundError: No module named 'pytz.tzinfo'\nNo module named 'whatever'"
    assert F.missing_modules(text) == {"pytz", "whatever"}


def test_fetch_installs_the_wheel_read_only_under_its_pins_and_a_missing_set_fails_closed(
    local_index, tmp_path
):
    root = tmp_path / "cache"
    with pytest.raises(D.MissingTestDeps, match=r"rlfakedep==0.1.*not in .*rl.envs.repos deps"):
        F.ensure(["rlfakedep==0.1"], root)  # not fetched yet, network not allowed
    pins = F.fetch(["rlfakedep"], root, log=lambda _: None)  # unpinned: pip resolves the version
    assert pins == ["rlfakedep==0.1"]
    folder = D.host_dir(pins, root)
    assert folder == str(root / D.key(pins))
    assert (root / D.key(pins) / "lib" / "rlfakedep.py").read_text() == "VALUE = 1\n"
    assert not os.stat(folder).st_mode & 0o222  # read-only by mode too (the rlimit backend)
    assert F.ensure(pins, root) == folder  # found: pip not run again
    other = tmp_path / "other"  # another machine's cache: re-fetched only when allowed
    assert F.ensure(pins, other, allow_network=True) == str(other / D.key(pins))
    with pytest.raises(F.FetchError, match="pip could not fetch"):
        F.fetch(["nosuchdep==9"], root, log=lambda _: None)
    assert sorted(p.name for p in root.iterdir()) == [D.key(pins)]  # nothing half-written


def test_bad_sets_are_refused():
    with pytest.raises(ValueError, match="not pins"):
        D.key(["rlfakedep>=0.1"])  # a key must name one content
    with pytest.raises(ValueError, match="list of pins"):
        D.host_dir("rlfakedep==0.1")


@pytest.mark.needs_bwrap
def test_the_mount_is_read_only_and_after_site_packages(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(D.CACHE_ENV, str(root))
    # the set also carries a `pytest` module: it must never shadow the interpreter's own
    pins = _entry(root, {"rlfakedep.py": "VALUE = 1\n", "pytest.py": "raise SystemExit(9)\n"})
    probe = (
        'python3 -c "import sys, pytest, rlfakedep; p = sys.path; '
        "print(rlfakedep.__file__, pytest.__file__, rlfakedep.VALUE); "
        "print(p.index('/rl_test_deps/lib') > max(i for i, x in enumerate(p) "
        "if x.endswith('-packages')))\""
    )
    with Sandbox(None, test_deps=pins) as box:
        r = box.run(probe, 30)
        assert r.ok, r.output
        dep_file, pytest_file, value = r.output.split("\n")[0].split()
        assert dep_file == "/rl_test_deps/lib/rlfakedep.py" and value == "1"
        assert pytest_file.endswith("-packages/pytest/__init__.py")
        assert r.output.split("\n")[1] == "True"
        # the policy's code cannot write into the dependency folder
        for command in (
            "echo 'VALUE = 2' > /rl_test_deps/lib/rlfakedep.py",
            "echo x > /rl_test_deps/lib/evil.py",
            "rm /rl_test_deps/lib/rlfakedep.py",
        ):
            w = box.run(command, 10)
            assert w.exit_code != 0 and "Read-only file system" in w.output, (command, w.output)
    lib = root / D.key(pins) / "lib"
    assert sorted(p.name for p in lib.iterdir()) == ["pytest.py", "rlfakedep.py"]
    assert (lib / "rlfakedep.py").read_text() == "VALUE = 1\n"


def _task(pins, repo_code: str) -> Task:
    hidden = (
        "import pytest\nimport rlfakedep\nfrom mod import f\n\n\n"
        "def test_dep():\n    assert rlfakedep.VALUE == 1\n    assert f() == 3\n\n\n"
        "def test_pytest_is_the_real_one():\n    assert hasattr(pytest, 'raises')\n"
    )
    return Task(
        id="uses-dep",
        prompt="",
        files={"mod.py": repo_code},
        hidden_tests={"test_mod.py": hidden},
        solution={},
        meta={"test_deps": list(pins)},
    )


@pytest.mark.needs_bwrap
def test_grading_imports_the_dependency_and_the_policy_cannot_change_it(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(D.CACHE_ENV, str(root))
    pins = _entry(root, {"rlfakedep.py": "VALUE = 1\n", "pytest.py": "raise SystemExit(9)\n"})
    # the policy's code tries, at import inside the grader's child, to rewrite the dependency
    evil = (
        "try:\n    open('/rl_test_deps/lib/rlfakedep.py', 'w').write('VALUE = 2\\n')\n"
        "except OSError:\n    pass\n\n\ndef f():\n    return 3\n"
    )
    task = _task(pins, evil)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mod.py").write_text(evil)
    grade = grade_repo(task, str(repo), timeout_s=60)
    assert (grade.passed, grade.total, grade.tampered) == (2, 2, False), grade.output
    assert (root / D.key(pins) / "lib" / "rlfakedep.py").read_text() == "VALUE = 1\n"
    # a sandbox opened without the task's set cannot grade it (a forgotten call site)
    with Sandbox.from_files(task.files) as box, pytest.raises(ValueError, match="test_deps"):
        grade_in(box, task)
    # a machine without the set refuses before anything runs, naming the set
    monkeypatch.setenv(D.CACHE_ENV, str(tmp_path / "empty"))
    with pytest.raises(D.MissingTestDeps, match=r"\['rlfakedep==0.1'\] \(key "):
        grade_repo(task, str(repo), timeout_s=60)


def _project(where, declared: str):
    where.mkdir()
    (where / "usesdep.py").write_text("def f():\n    return 3\n")
    (where / "test_usesdep.py").write_text(
        "import rlfakedep\nfrom usesdep import f\n\n\n"
        "def test_f():\n    assert f() == 3 * rlfakedep.VALUE\n"
    )
    if declared:
        (where / "test_requirements.txt").write_text(declared)
    return where


@pytest.mark.needs_bwrap
def test_add_installs_a_declared_test_dependency_and_nothing_undeclared(local_index, tmp_path):
    from rl.envs.repos.add import AddError, add

    specs, logs = tmp_path / "specs", []
    spec = add(
        str(_project(tmp_path / "usesdep", "pytest\nrlfakedep==0.1\n")),
        specs=specs,
        out=tmp_path / "pool.jsonl",
        tasks=0,
        timeout_s=30,
        log=logs.append,
    )
    assert spec.test_deps == ["rlfakedep==0.1"] and spec.baseline == {
        "test_usesdep.py::test_f": True
    }
    assert '"rlfakedep==0.1"' in (specs / "usesdep.json").read_text()  # the spec records the set
    # the same project declaring nothing: rlfakedep is not installed, the reason names it
    with pytest.raises(AddError, match="the tests import rlfakedep, which is not installed"):
        add(str(_project(tmp_path / "nodecl", "")), specs=specs, tasks=0, timeout_s=30,
            log=logs.append)  # fmt: skip
    assert any("not declared as test dependencies: ['rlfakedep']" in line for line in logs)


def test_a_task_file_needing_a_set_this_machine_lacks_is_refused_before_rl_starts(
    tmp_path, monkeypatch
):
    import dataclasses

    from configs import rl as rl_config
    from model.errors import ConfigError
    from rl.envs import generate_tasks, save_tasks
    from rl.envs.grading.tasks import require_test_deps
    from rl.sampling.rl_tasks import file_pool, rl_task

    monkeypatch.setenv(D.CACHE_ENV, str(tmp_path / "cache"))
    tasks = generate_tasks(3, seed=5)
    tasks[2] = dataclasses.replace(
        tasks[2], meta={**tasks[2].meta, "test_deps": ["rlfakedep==0.1"]}
    )
    require_test_deps(tasks[:2])  # no set named: nothing to check
    with pytest.raises(D.MissingTestDeps, match=r"^1 tasks \(e.g. .*\): test dependencies"):
        require_test_deps(tasks)
    save_tasks(tasks, tmp_path / "pool.jsonl")
    config = rl_config.get_config()
    config.rl.task, config.rl.pool_size = "coding", 3
    config.rl.coding.tasks = str(tmp_path / "pool.jsonl")
    file_pool.cache_clear()
    with pytest.raises(ConfigError, match=r"pool.jsonl: 1 tasks .*\['rlfakedep==0.1'\]"):
        rl_task("coding").resolve(config)
    _entry(tmp_path / "cache", {"rlfakedep.py": "VALUE = 1\n"})  # fetched: now it starts
    rl_task("coding").resolve(config)


def test_a_project_whose_set_is_not_cached_stops_trace_and_pool_jobs_at_start(
    tmp_path, monkeypatch
):
    from rl.envs.repos.vendored import require_test_deps

    monkeypatch.setenv(D.CACHE_ENV, str(tmp_path / "empty"))
    require_test_deps(["addict", "roman"])  # no set declared: nothing to check
    with pytest.raises(D.MissingTestDeps, match=r"^funcy: test dependencies \['whatever==0.7'\]"):
        require_test_deps(["addict", "funcy"])
