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
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from rl.envs.grading.harden import is_test_module
from rl.envs.repos import fetch as F
from rl.envs.repos.chat_policy import SetupModelError, add_model_arguments, model_policy
from rl.envs.repos.setup import PROBLEM
from rl.envs.repos.spec import EnvSpec, admit, read_tree
from rl.envs.repos.suites import mine_tasks, save_whole
from rl.envs.repos.vendored import ROOT

SPECS = ROOT / "data/repos/specs/added"
ARCHIVES = F.ARCHIVES


class AddError(ValueError):
    """Bad input: the message is one line, naming what is wrong."""


def default_cache() -> Path:
    """Downloads and clones: $XDG_CACHE_HOME/composer-jax/repos (~/.cache/... by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "composer-jax" / "repos"


def load_source(path: str, cache: Path | None = None, log=print) -> tuple[str, dict[str, str], str]:
    """(project name, its text files, a source string that loads the same files again) from a
    folder, a git checkout (the files git tracks; PATH@REF for another ref), a git URL[@REF], an
    sdist archive, or NAME==VERSION (the sdist fetched by pip into `cache`)."""
    cache = cache or default_cache()
    try:
        if F.is_requirement(path):
            sdist = F.fetch_sdist(path, cache)
            log(f"fetched: {path} -> {sdist}")
            name, files = _unpack(str(sdist))
            return name, files, str(sdist)
        url, ref = _split_ref(path)
        if F.GIT_URL.fullmatch(url):
            return _from_checkout(F.clone(url, cache), ref, log)
        p = Path(path)
        if not p.exists() and ref and F.is_checkout(Path(url)):
            return _from_checkout(Path(url), ref, log)
        if not p.exists():
            raise AddError(
                f"{path} does not exist (give a folder, a git checkout, an sdist archive or "
                "NAME==VERSION)"
            )
        if p.is_dir():
            if F.is_checkout(p):
                return _from_checkout(p, "HEAD", log)
            return _name(p.resolve().name), read_tree(p), str(p.resolve())
        name, files = _unpack(path)
        return name, files, str(p.resolve())
    except F.FetchError as e:
        raise AddError(str(e)) from None


def _split_ref(path: str) -> tuple[str, str]:
    """ "where@REF" -> (where, REF); an @ inside a host part (git@host:org/x) is no ref."""
    head, at, ref = path.rpartition("@")
    if at and head and ref and "/" not in ref and ":" not in ref:
        return head, ref
    return path, ""


def _from_checkout(where: Path, ref: str, log) -> tuple[str, dict[str, str], str]:
    commit, files = F.git_tree(where, ref or "HEAD")
    log(f"git checkout {where} at {commit[:12]}: the files git tracks (uncommitted edits left out)")
    return _name(where.resolve().name), files, f"{where.resolve()}@{commit}"


def _unpack(path: str) -> tuple[str, dict[str, str]]:
    p = Path(path)
    if not path.endswith(ARCHIVES):
        raise AddError(
            f"{path} is not a folder, a git checkout or an sdist archive ({', '.join(ARCHIVES)})"
        )
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


def propose(name: str, files: dict[str, str], timeout_s: float, log=print, policy=None):
    """Runs the setup agent (`policy(tok)` makes its policy; default scripted); returns (env,
    proposal or None)."""
    from data.tokenizers import ByteTokenizer
    from rl.envs.agent.env import run_episode
    from rl.envs.repos.setup import ScriptedSetupPolicy, SetupEnv, setup_task

    tok = ByteTokenizer()
    env = SetupEnv(tok, command_timeout_s=timeout_s, test_timeout_s=timeout_s)
    agent = policy(tok) if policy else ScriptedSetupPolicy(tok, test_timeout_s=timeout_s)
    try:
        run_episode(env, setup_task(name, files), agent)
    except SetupModelError as e:
        raise AddError(f"{name}: the setup model failed: {e}") from None
    if env.proposal is None and getattr(agent, "stopped", ""):
        env.problem += f" ({agent.stopped})"
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
) -> EnvSpec:
    """The whole path; returns the admitted spec, or raises AddError (one line). `policy(tok)`
    makes the setup agent's policy (default: the scripted one; rl/envs/repos/chat_policy.py for a
    model behind an OpenAI-compatible endpoint)."""
    found, files, source = load_source(path, cache, log)
    name = name or found
    check_files(path.rstrip("/"), files)
    env, proposal = propose(name, files, timeout_s, log, policy)
    if proposal is None:
        rejected = {"name": name, "source": source, "reason": env.problem, "proposal": env.raw}
        keep_verdict(specs, name, None, rejected)
        raise AddError(f"{name}: rejected: {env.problem}")
    spec = EnvSpec(name, proposal["setup"], proposal["test_command"], proposal["test_files"])
    spec.source, spec.notes = source, proposal["notes"]
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
    add_model_arguments(a)
    s = sub.add_parser("suite", help="a held-out suite (gated task file) from any set of specs")
    suites.add_arguments(s)
    args = parser.parse_args(argv)
    try:
        if args.command == "suite":
            suites.run(args)
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
        )
    except AddError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
