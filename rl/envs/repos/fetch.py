"""Where a user's repository comes from, as files: a package index release (`NAME==VERSION`, the
sdist fetched by pip's own `pip download`), a git checkout (the files git tracks, at HEAD or a
named ref) or a git URL (cloned into the cache).

    load_source("shelf==0.1.0")                 # -> (name, {path: text}, source that reloads it)
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
import zipfile
from pathlib import Path

from rl.envs.repos.spec import read_tree

REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
GIT_URL = re.compile(r"(?:git\+)?(https?://|ssh://|git@|file://)\S+")
FETCH_TIMEOUT_S = 300.0


class AddError(ValueError):
    """Bad input to `add` / `suite`: the message is one line, naming what is wrong."""


class FetchError(AddError):
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
        if is_requirement(path):
            sdist = fetch_sdist(path, cache)
            log(f"fetched: {path} -> {sdist}")
            name, files = _unpack(str(sdist))
            return name, files, str(sdist)
        url, ref = _split_ref(path)
        if GIT_URL.fullmatch(url):
            return _from_checkout(clone(url, cache), ref, log)
        p = Path(path)
        if not p.exists() and ref and is_checkout(Path(url)):
            return _from_checkout(Path(url), ref, log)
        if not p.exists():
            raise AddError(
                f"{path} does not exist (give a folder, a git checkout, an sdist archive or "
                "NAME==VERSION)"
            )
        if p.is_dir():
            if is_checkout(p):
                return _from_checkout(p, "HEAD", log)
            return _name(p.resolve().name), read_tree(p), str(p.resolve())
        name, files = _unpack(path)
        return name, files, str(p.resolve())
    except FetchError as e:
        raise AddError(str(e)) from None


def _split_ref(path: str) -> tuple[str, str]:
    """ "where@REF" -> (where, REF); an @ inside a host part (git@host:org/x) is no ref."""
    head, at, ref = path.rpartition("@")
    if at and head and ref and "/" not in ref and ":" not in ref:
        return head, ref
    return path, ""


def _from_checkout(where: Path, ref: str, log) -> tuple[str, dict[str, str], str]:
    commit, files = git_tree(where, ref or "HEAD")
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
