"""Where a user's repository comes from, as files: a package index release (`NAME==VERSION`, the
sdist fetched by pip's own `pip download`), a git checkout (the files git tracks, at HEAD or a
named ref) or a git URL (cloned into the cache).

    fetch_sdist("shelf==0.1.0", cache)          # -> cache/shelf-0.1.0/shelf-0.1.0.tar.gz
    git_tree("path/to/checkout", ref="v1.2")    # -> (commit, {path: text})
    clone("https://host/org/proj.git", cache)   # -> cache/git/proj (a checkout)

pip is run as a subprocess (`python -m pip download --no-deps --no-binary :all:`): its index, proxy
and credentials settings (pip.conf, PIP_INDEX_URL, PIP_FIND_LINKS, ...) apply unchanged, and
nothing here talks to an index itself. A release already in the cache is not fetched again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
GIT_URL = re.compile(r"(?:git\+)?(https?://|ssh://|git@|file://)\S+")
FETCH_TIMEOUT_S = 300.0


class FetchError(ValueError):
    """The source could not be fetched: one line naming what and why."""


def is_requirement(text: str) -> bool:
    return REQUIREMENT.fullmatch(text) is not None


def _normal(name: str) -> str:
    """PEP 503 normal form: Foo_Bar.baz -> foo-bar-baz (also how sdists name their folder)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def cached_sdist(folder: Path) -> Path | None:
    found = (
        sorted(p for p in folder.iterdir() if p.name.endswith(ARCHIVES)) if folder.is_dir() else []
    )
    return found[0] if found else None


def fetch_sdist(requirement: str, cache: Path, run=None) -> Path:
    """The sdist of `requirement` (NAME==VERSION) in `cache`, downloaded by pip when not there yet.
    `run`: subprocess.run, looked up at call time (a test replaces it to stay offline)."""
    run = run or subprocess.run
    m = REQUIREMENT.fullmatch(requirement)
    if m is None:
        raise FetchError(f"{requirement!r} is not NAME==VERSION")
    folder = Path(cache) / f"{_normal(m.group(1))}-{m.group(2)}"
    hit = cached_sdist(folder)
    if hit is not None:
        return hit
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    argv += ["--disable-pip-version-check", "-q", requirement, "-d", str(staging)]
    try:
        try:
            r = run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise FetchError(
                f"pip download {requirement} took over {FETCH_TIMEOUT_S:.0f} s (is the index "
                "reachable?)"
            ) from None
        got = cached_sdist(staging)
        if r.returncode != 0 or got is None:
            why = _first_error(r.stderr or r.stdout) if r.returncode else "it saved no sdist"
            raise FetchError(f"pip download {requirement} failed: {why}")
        os.replace(staging, folder)  # the release appears whole or not at all
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cached_sdist(folder)


def _first_error(text: str) -> str:
    """pip's first specific error line (the cause: the last lines are hints, and a failed build
    step reports a generic error before its subprocess's own), else its last line."""
    generic = ("subprocess-exited-with-error", "metadata-generation-failed")
    for line in text.splitlines():
        line = line.strip()
        if line.lower().startswith("error:") and not line.endswith(generic):
            return line[:300]
    return _last_line(text)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _git(args: list[str], cwd: str | os.PathLike | None = None, what: str = "") -> str:
    try:
        r = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S
        )
    except FileNotFoundError:
        raise FetchError("git is not installed (needed for a git checkout or URL)") from None
    except subprocess.TimeoutExpired:
        raise FetchError(f"git {args[0]} {what} took over {FETCH_TIMEOUT_S:.0f} s") from None
    if r.returncode != 0:
        raise FetchError(f"git {args[0]} {what}: {_last_line(r.stderr or r.stdout)}")
    return r.stdout


def is_checkout(path: Path) -> bool:
    return (path / ".git").exists()


def git_tree(path: str | os.PathLike, ref: str = "HEAD") -> tuple[str, dict[str, str]]:
    """(commit, path -> text) of what git tracks at `ref` in a checkout: untracked files (a venv,
    build products, local notes) and uncommitted edits are not part of it, so the environment is
    reproducible from the commit."""
    commit = _git(["rev-parse", "--verify", f"{ref}^{{commit}}"], path, f"{ref} in {path}").strip()
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "tree.tar"
        _git(["archive", "--format=tar", "-o", str(archive), commit], path, f"of {path}")
        with tarfile.open(archive) as t:
            t.extractall(Path(tmp) / "tree", filter="data")
        from rl.envs.repos.spec import read_tree

        return commit, read_tree(Path(tmp) / "tree")


def clone(url: str, cache: Path) -> Path:
    """A checkout of `url` (git+ prefix allowed) in cache/git/NAME, cloned once (shallow)."""
    url = url.removeprefix("git+")
    name = re.sub(r"\.git$", "", url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]) or "repo"
    target = Path(cache) / "git" / name
    if is_checkout(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{name}-"))
    try:
        _git(["clone", "-q", url, str(staging / name)], what=url)
        os.replace(staging / name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
