"""Your own repository as an environment: setup agent -> proposal -> gate -> spec -> task pool.

    python -m rl.envs.repos add path/to/project            # a folder, or a git checkout[@REF]
    python -m rl.envs.repos add dist/project-1.0.tar.gz    # an sdist (.tar.gz, .tgz, .zip, ...)
    python -m rl.envs.repos add project==1.0               # pip download of the sdist (cached)
        [--name NAME] [--specs DIR] [--out POOL.jsonl] [--tasks 10] [--tries 30] [--timeout 120]
        [--cache DIR] [--setup-model URL --setup-model-name NAME]
    python -m rl.envs.repos suite --specs DIR/a.json ... --out suite.jsonl   # see suites.py
    python -m rl.envs.repos deps whatever==0.7                # fetch a spec's test_deps (pins)

Declared test dependencies: when the setup agent's test runs fail to import a module that the
project declares as a test dependency (test_requirements.txt, tox deps, a test extra, a poetry dev
group: rl/envs/repos/dep_fetch.py), `add` installs exactly those with pip on the host (wheels, no
dependencies of theirs) into a read-only cache folder keyed by the pinned set, runs the setup agent
again with it mounted, and records the pins in the spec (`test_deps`); every sandbox of the
repository mounts it after site-packages (rl/envs/isolation/dep_cache.py). --no-fetch-deps: none.

Sources: rl/envs/repos/fetch.py. It prints the setup agent's proposal (setup commands, test
command, test files, notes), then the gate's verdict. The setup agent is the scripted one, or a
model behind an OpenAI-compatible endpoint (rl/envs/repos/chat_policy.py). The spec goes to
DIR/NAME.json when admitted; a rejected proposal is kept with its reason in DIR/NAME.rejected.json
(either replaces the other: the cache holds one verdict per name). An admitted repository is then
mined (rl/envs/repos/mine.py, with its review and DevOps tasks: rl/envs/repos/review_devops.py) and
each task must pass the task gate (bugfix/feature tasks: and the scripted cheats) before it is
written to POOL.jsonl (rl/envs/grading/tasks.py's format). Files are written whole or not at all
(a temporary name, then a rename).

Bad input stops with one line saying what is wrong and what to do: a path that does not exist, a
file that is not an archive, a release pip cannot fetch, a ref a checkout lacks, a folder without
tests, a setup.py that does not parse, a C extension that does not build, tests that need the
network, tests that do not finish within --timeout (they hang, or wait on the network).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.harden import is_test_module
from rl.envs.isolation.dep_cache import MissingTestDeps
from rl.envs.repos.chat_policy import SetupModelError, add_model_arguments, model_policy
from rl.envs.repos.dep_fetch import FetchError
from rl.envs.repos.fetch import AddError, default_cache, load_source
from rl.envs.repos.setup import PROBLEM
from rl.envs.repos.spec import EnvSpec, admit
from rl.envs.repos.suites import mine_tasks, save_whole
from rl.envs.repos.vendored import ROOT

SPECS = ROOT / "data/repos/specs/added"


def check_files(where: str, files: dict[str, str]) -> None:
    """Problems the setup agent cannot repair, found before anything runs."""
    if not any(is_test_module(f) or re.search(r"(^|/)(\w*tests|test)\.py$", f) for f in files):
        raise AddError(
            f"{where} has no tests (no test_*.py, *_test.py, tests.py or test.py): the grader "
            "runs the project's own tests, add some"
        )
    if "setup.py" in files:
        try:
            parse_python(files["setup.py"], filename="setup.py")
        except SyntaxError as e:
            raise AddError(
                f"{where}/setup.py does not parse (line {e.lineno}: {e.msg}): fix or remove it"
            ) from None


def propose(
    name: str, files: dict[str, str], timeout_s: float, log=print, policy=None, test_deps=()
):
    """Runs the setup agent (`policy(tok)` makes its policy; default scripted) in a sandbox that
    mounts `test_deps` (pins); returns (env, proposal or None)."""
    from data.tokenizers import ByteTokenizer
    from rl.envs.agent.env import run_episode
    from rl.envs.repos.setup import ScriptedSetupPolicy, SetupEnv, setup_task

    tok = ByteTokenizer()
    env = SetupEnv(tok, command_timeout_s=timeout_s, test_timeout_s=timeout_s)
    agent = policy(tok) if policy else ScriptedSetupPolicy(tok, test_timeout_s=timeout_s)
    try:
        run_episode(env, setup_task(name, files, list(test_deps)), agent)
    except SetupModelError as e:
        raise AddError(f"{name}: the setup model failed: {e}") from None
    if env.proposal is None and getattr(agent, "stopped", ""):
        env.problem += f" ({agent.stopped})"
    shown = env.proposal or env.raw
    log(f"proposal: {json.dumps(shown, indent=1) if shown is not None else '(none written)'}")
    return env, env.proposal


def fetch_test_deps(files, missing: set[str], root: Path | None, log=print) -> list[str]:
    """Pins of the declared test dependencies among `missing` (fetched into the cache), [] when
    none is declared or pip cannot fetch them (said in the log: the proposal stands as it is)."""
    from rl.envs.repos.dep_fetch import declared_test_requirements, fetch, module_of, needed

    declared = declared_test_requirements(files)
    wanted = needed(declared, missing)
    undeclared = sorted(missing - {module_of(r) for r in declared})
    if undeclared:
        log(f"test imports not installed and not declared as test dependencies: {undeclared}")
    if not wanted:
        return []
    try:
        return fetch(wanted, root, log)
    except FetchError as e:
        log(f"test dependencies not installed: {e}")
        return []


def write_whole(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def keep_verdict(specs: Path, name: str, spec: EnvSpec | None, rejected: dict | None) -> Path:
    """The spec (admitted) or the rejected proposal with its reason; the other file goes."""
    good, bad = specs / f"{name}.json", specs / f"{name}.rejected.json"
    keep, drop = (good, bad) if spec is not None else (bad, good)
    text = spec.to_json() if spec is not None else json.dumps(rejected, indent=1) + "\n"
    write_whole(keep, text)
    drop.unlink(missing_ok=True)
    return keep


def mine_pool(files, spec: EnvSpec, out: Path, tasks: int, tries: int, log=print) -> int:
    """Mined tasks (and the repository's review and DevOps tasks) that pass the task gate,
    saved whole to `out`; their count. tasks=0: the spec only, an empty pool."""
    kept = mine_tasks(files, spec, tasks, tries, log=log) if tasks else []
    save_whole(kept, out)
    return len(kept)


def add(
    path: str,
    name: str = "",
    specs: Path = SPECS,
    out: Path | None = None,
    tasks: int = 10,
    tries: int = 30,
    timeout_s: float = 120.0,
    log=print,
    cache: Path | None = None,
    policy=None,
    fetch_deps: bool = True,
    deps_cache: Path | None = None,
) -> EnvSpec:
    """The whole path; returns the admitted spec, or raises AddError (one line). `policy(tok)`
    makes the setup agent's policy (default: the scripted one; rl/envs/repos/chat_policy.py for a
    model behind an OpenAI-compatible endpoint). fetch_deps: install the declared test
    dependencies the tests failed to import (network on the host; rl/envs/repos/dep_fetch.py)
    into `deps_cache` (default rl.envs.isolation.dep_cache.cache_root())."""
    found, files, source = load_source(path, cache, log)
    name = name or found
    check_files(path.rstrip("/"), files)
    env, proposal = propose(name, files, timeout_s, log, policy)
    pins = fetch_test_deps(files, env.missing_modules, deps_cache, log) if fetch_deps else []
    if pins:  # the setup agent again, with the declared test dependencies its tests lacked
        env, proposal = propose(name, files, timeout_s, log, policy, pins)
    if proposal is None:
        rejected = {"name": name, "source": source, "reason": env.problem, "proposal": env.raw}
        keep_verdict(specs, name, None, rejected)
        raise AddError(f"{name}: rejected: {env.problem}")
    spec = EnvSpec(name, proposal["setup"], proposal["test_command"], proposal["test_files"])
    spec.source, spec.notes, spec.test_deps = source, proposal["notes"], pins
    admission = admit(files, spec)
    log(f"gate: {'admitted' if admission.admitted else 'REJECTED'}: {admission.reason}")
    if not admission.admitted:
        rejected = {
            "name": name,
            "source": source,
            "reason": admission.reason,
            "proposal": proposal,
        }
        kept = keep_verdict(specs, name, None, rejected)
        found = "".join(f"{n.removeprefix(PROBLEM)}; " for n in spec.notes if n.startswith(PROBLEM))
        raise AddError(f"{name}: {found}rejected by the gate (kept in {kept}): {admission.reason}")
    spec = admission.spec
    log(f"spec: {keep_verdict(specs, name, spec, None)} ({len(spec.baseline)} tests)")
    out = out or Path("added") / name / "tasks.jsonl"
    count = mine_pool(files, spec, out, tasks, tries, log)
    log(f"pool: {count} tasks -> {out}")
    return spec


def main(argv=None) -> int:
    from rl.envs.repos import suites

    parser = argparse.ArgumentParser(prog="python -m rl.envs.repos")
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add", help="a folder, git checkout, sdist or NAME==VERSION -> spec + pool")
    a.add_argument("path", help="folder | checkout[@REF] | git URL[@REF] | sdist | NAME==VERSION")
    a.add_argument("--name", default="")
    a.add_argument("--specs", default=str(SPECS), help="spec cache folder")
    a.add_argument("--out", default="", help="pool JSONL (default added/NAME/tasks.jsonl)")
    a.add_argument("--tasks", type=int, default=10)
    a.add_argument("--tries", type=int, default=30)
    a.add_argument("--timeout", type=float, default=120.0, help="seconds for a test run")
    a.add_argument(
        "--cache", default="", help=f"download / clone cache (default {default_cache()})"
    )
    a.add_argument(
        "--no-fetch-deps",
        action="store_true",
        help="install no declared test dependency (default: those the tests failed to import)",
    )
    add_model_arguments(a)
    d = sub.add_parser("deps", help="fetch a recorded test-dependency set (pins) into the cache")
    d.add_argument("pins", nargs="+", help="name==version, as a spec's test_deps records them")
    s = sub.add_parser("suite", help="a held-out suite (gated task file) from any set of specs")
    suites.add_arguments(s)
    args = parser.parse_args(argv)
    try:
        if args.command == "suite":
            suites.run(args)
            return 0
        if args.command == "deps":
            from rl.envs.repos.dep_fetch import ensure

            print(ensure(args.pins, allow_network=True))
            return 0
        out = Path(args.out) if args.out else None
        cache = Path(args.cache) if args.cache else None
        add(
            args.path,
            args.name,
            Path(args.specs),
            out,
            args.tasks,
            args.tries,
            args.timeout,
            cache=cache,
            policy=model_policy(args),
            fetch_deps=not args.no_fetch_deps,
        )
    except (AddError, MissingTestDeps, FetchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
