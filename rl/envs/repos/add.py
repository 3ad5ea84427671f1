"""Your own repository as an environment: setup agent -> proposal -> gate -> spec -> task pool.

    python -m rl.envs.repos add path/to/project            # a folder or a git checkout
    python -m rl.envs.repos add dist/project-1.0.tar.gz    # an sdist (.tar.gz, .tgz, .zip, ...)
        [--name NAME] [--specs DIR] [--out POOL.jsonl] [--tasks 10] [--tries 30] [--timeout 120]

It prints the setup agent's proposal (setup commands, test command, test files, notes), then the
gate's verdict. The spec goes to DIR/NAME.json when admitted; a rejected proposal is kept with its
reason in DIR/NAME.rejected.json (either replaces the other: the cache holds one verdict per name).
An admitted repository is then mined (rl/envs/repos/mine.py) and each task must pass the task gate
and the scripted cheats before it is written to POOL.jsonl (rl/envs/grading/tasks.py's format).
Files are written whole or not at all (a temporary name, then a rename).

Bad input stops with one line saying what is wrong and what to do: a path that does not exist, a
file that is not an archive, a folder without tests, a setup.py that does not parse, tests that do
not finish within --timeout (they hang, or wait on the network).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from rl.envs.grading.harden import is_test_module
from rl.envs.repos.spec import EnvSpec, admit, read_tree
from rl.envs.repos.vendored import ROOT

SPECS = ROOT / "data/repos/specs/added"
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")


class AddError(ValueError):
    """Bad input: the message is one line, naming what is wrong."""


def load_source(path: str) -> tuple[str, dict[str, str]]:
    """(project name, its text files) from a folder, a git checkout or an sdist archive."""
    p = Path(path)
    if not p.exists():
        raise AddError(f"{path} does not exist (give a folder, a git checkout or an sdist archive)")
    if p.is_dir():
        return _name(p.resolve().name), read_tree(p)
    if not path.endswith(ARCHIVES):
        raise AddError(f"{path} is not a folder or an sdist archive ({', '.join(ARCHIVES)})")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if path.endswith(".zip"):
                with zipfile.ZipFile(p) as z:
                    z.extractall(tmp)  # zipfile drops absolute paths and ".." itself
            else:
                with tarfile.open(p) as t:
                    t.extractall(tmp, filter="data")  # no links out, no absolute paths
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
            raise AddError(f"{path}: cannot unpack the archive ({e})") from None
        entries = list(Path(tmp).iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() else Path(tmp)
        name = top.name if top != Path(tmp) else p.name.split(".")[0]
        return _name(name), read_tree(top)


def _name(folder: str) -> str:
    """shelf-0.1.0 -> shelf (an sdist's folder carries its version)."""
    return re.sub(r"-\d[\w.]*$", "", folder) or folder


def check_files(where: str, files: dict[str, str]) -> None:
    """Problems the setup agent cannot repair, found before anything runs."""
    if not any(is_test_module(f) or f.endswith("tests.py") for f in files):
        raise AddError(
            f"{where} has no tests (no test_*.py, *_test.py or tests.py): the grader runs the "
            "project's own tests, add some"
        )
    if "setup.py" in files:
        try:
            ast.parse(files["setup.py"], filename="setup.py")
        except SyntaxError as e:
            raise AddError(
                f"{where}/setup.py does not parse (line {e.lineno}: {e.msg}): fix or remove it"
            ) from None


def propose(name: str, files: dict[str, str], timeout_s: float, log=print):
    """Runs the scripted setup agent; returns (env, proposal or None)."""
    from data.tokenizers import ByteTokenizer
    from rl.envs.agent.env import run_episode
    from rl.envs.repos.setup import ScriptedSetupPolicy, SetupEnv, setup_task

    tok = ByteTokenizer()
    env = SetupEnv(tok, command_timeout_s=timeout_s, test_timeout_s=timeout_s)
    run_episode(env, setup_task(name, files), ScriptedSetupPolicy(tok, test_timeout_s=timeout_s))
    shown = env.proposal or env.raw
    log(f"proposal: {json.dumps(shown, indent=1) if shown is not None else '(none written)'}")
    return env, env.proposal


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
    """Mined tasks that pass the task gate and whose cheats fail, saved to `out`; their count."""
    from rl.envs.grading.tasks import save_tasks
    from rl.envs.grading.verify import verify_task
    from rl.envs.repos import mine as M

    kept = []
    for recipe in M.mine(files, spec, tasks, tries, log=log):
        task = M.build_task(recipe, files, spec)
        verdict = verify_task(task)
        cheat = M.cheats_fail(task) if verdict.accepted else None
        if verdict.accepted and cheat is None:
            kept.append(task)
        else:
            log(f"{task.id}: left out: {verdict.reason if cheat is None else cheat + ' passes'}")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=".staging-"))
    try:  # task folders by renames, then the JSONL that names them (last, whole)
        save_tasks(kept, staging / out.name)
        for item in staging.iterdir():
            target = out.parent / item.name
            if target.is_dir():
                shutil.rmtree(target)
            if item.name != out.name:
                os.replace(item, target)
        os.replace(staging / out.name, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
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
) -> EnvSpec:
    """The whole path; returns the admitted spec, or raises AddError (one line)."""
    found, files = load_source(path)
    name = name or found
    check_files(path.rstrip("/"), files)
    env, proposal = propose(name, files, timeout_s, log)
    if proposal is None:
        rejected = {"name": name, "source": path, "reason": env.problem, "proposal": env.raw}
        keep_verdict(specs, name, None, rejected)
        raise AddError(f"{name}: rejected: {env.problem}")
    spec = EnvSpec(name, proposal["setup"], proposal["test_command"], proposal["test_files"])
    spec.source, spec.notes = path, proposal["notes"]
    admission = admit(files, spec)
    log(f"gate: {'admitted' if admission.admitted else 'REJECTED'}: {admission.reason}")
    if not admission.admitted:
        rejected = {"name": name, "source": path, "reason": admission.reason, "proposal": proposal}
        kept = keep_verdict(specs, name, None, rejected)
        raise AddError(f"{name}: rejected by the gate (kept in {kept}): {admission.reason}")
    spec = admission.spec
    log(f"spec: {keep_verdict(specs, name, spec, None)} ({len(spec.baseline)} tests)")
    out = out or Path("added") / name / "tasks.jsonl"
    count = mine_pool(files, spec, out, tasks, tries, log)
    log(f"pool: {count} tasks -> {out}")
    return spec


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.envs.repos")
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("add", help="a folder, git checkout or sdist -> spec + task pool")
    a.add_argument("path")
    a.add_argument("--name", default="")
    a.add_argument("--specs", default=str(SPECS), help="spec cache folder")
    a.add_argument("--out", default="", help="pool JSONL (default added/NAME/tasks.jsonl)")
    a.add_argument("--tasks", type=int, default=10)
    a.add_argument("--tries", type=int, default=30)
    a.add_argument("--timeout", type=float, default=120.0, help="seconds for a test run")
    args = parser.parse_args(argv)
    try:
        out = Path(args.out) if args.out else None
        add(args.path, args.name, Path(args.specs), out, args.tasks, args.tries, args.timeout)
    except AddError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
