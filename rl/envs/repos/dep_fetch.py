"""Fetching a repository's declared test dependencies into the read-only cache every sandbox of
it mounts (how a sandbox sees them: rl/envs/isolation/dep_cache.py).

`add` installs a package only when (a) a test module failed to import it in the setup agent's runs
("No module named 'pytz'") and (b) the project declares it as a test dependency: a test
requirements file, tox's deps, a test/dev extra, tests_require, a poetry or PEP 735 dev group.
Nothing else is ever installed: pip runs on the host (the sandboxes have no network) with
`--no-deps` (none of the package's own dependencies) and `--only-binary :all:` (wheels only, so no
package's build code runs here), into a temporary folder renamed to its key when complete. The
spec records the pins pip resolved (`name==version`), which name the folder.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from rl.envs.isolation.dep_cache import (
    COMPLETE,
    HOOK,
    MissingTestDeps,
    cache_root,
    host_dir,
    key,
    normalize,
)

REQUIREMENT_FILES = re.compile(
    r"(^|/)(test[_-]?requirements|requirements[_-]?(test|tests|testing|dev))\.(txt|in)$"
    r"|(^|/)requirements/(test|tests|testing|dev)\.(txt|in)$"
)
TEST_EXTRAS = ("test", "tests", "testing", "dev")
FETCH_TIMEOUT_S = 300.0


class FetchError(RuntimeError):
    """pip could not fetch a declared test dependency (no network, no wheel, no such release)."""


def missing_modules(text: str) -> set[str]:
    """Top-level modules a test run failed to import ("No module named 'a.b'" -> "a")."""
    return {m.split(".")[0] for m in re.findall(r"No module named '([\w.]+)'", text)}


def declared_test_requirements(files: dict[str, str]) -> list[Requirement]:
    """Every test requirement the project declares whose marker holds here (see the docstring)."""
    raw: list[str] = []
    for path, text in sorted(files.items()):
        if REQUIREMENT_FILES.search(path):
            raw += _requirement_lines(text)
    raw += _tox_deps(files.get("tox.ini", ""))
    raw += _setup_cfg(files.get("setup.cfg", ""))
    raw += _setup_py(files.get("setup.py", ""))
    raw += _pyproject(files.get("pyproject.toml", ""))
    out, seen = [], set()
    for line in raw:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue  # a poetry version spec or a URL: not a plain requirement
        if req.url or (req.marker is not None and not req.marker.evaluate()):
            continue  # a URL is no release of the index: not fetched
        req = Requirement(f"{req.name}{req.specifier}")  # extras bring dependencies: not taken
        if str(req) not in seen:
            seen.add(str(req))
            out.append(req)
    return out


def module_of(req: Requirement) -> str:
    """The module a distribution is imported as, by its name (`python-dateutil`'s `dateutil` is
    not guessed: such a dependency is not installed)."""
    return req.name.lower().replace("-", "_")


def needed(declared: Iterable[Requirement], modules: set[str]) -> list[str]:
    """The declared requirements whose distribution name is a module that failed to import."""
    return sorted({str(r) for r in declared if module_of(r) in modules})


def fetch(requirements: list[str], root: Path | None = None, log=print) -> list[str]:
    """Installs `requirements` (wheels only, no dependencies) into the cache; returns the pins,
    which name the folder. FetchError (one line) when pip cannot."""
    root = root or cache_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
    try:
        argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        argv += [
            "--no-deps",
            "--only-binary",
            ":all:",
            "--no-compile",
            "--target",
            str(tmp / "lib"),
        ]
        try:
            r = subprocess.run(
                argv + list(requirements), capture_output=True, text=True, timeout=FETCH_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise FetchError(
                f"pip did not fetch {requirements} in {FETCH_TIMEOUT_S:.0f} s"
            ) from None
        if r.returncode:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
            raise FetchError(f"pip could not fetch {requirements}: {last}")
        pins = normalize(_installed_pins(tmp / "lib"))
        log(f"test dependencies: {requirements} -> {pins} (key {key(pins)})")
        return _commit(tmp, root, pins)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure(pins: list[str], root: Path | None = None, allow_network: bool = False) -> str | None:
    """The folder of a recorded pin set: found in the cache, else fetched (allow_network), else
    MissingTestDeps (a pool task rebuilt on a machine without it fails closed)."""
    try:
        return host_dir(pins, root)
    except MissingTestDeps:
        if not allow_network:
            raise
    got = fetch(pins, root, log=lambda *_: None)
    if got != normalize(pins):
        raise FetchError(f"pip resolved {pins} to {got}")
    return host_dir(pins, root)


def _commit(tmp: Path, root: Path, pins: list[str]) -> list[str]:
    """Hook, marker, read-only modes, then the rename that makes the folder visible whole."""
    (tmp / "hook").mkdir()
    (tmp / "hook" / "sitecustomize.py").write_text(HOOK)
    (tmp / COMPLETE).write_text("\n".join(pins) + "\n")
    for dirpath, dirnames, filenames in os.walk(tmp):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o555)
    os.chmod(tmp, 0o555)
    final = root / key(pins)
    try:
        os.rename(tmp, final)
    except OSError:  # another add fetched the same set first: keep theirs
        if not (final / COMPLETE).is_file():
            raise
        _make_writable(tmp)
    return pins


def _make_writable(top: Path) -> None:
    for dirpath, _, _ in os.walk(top):
        os.chmod(dirpath, 0o755)


def _installed_pins(lib: Path) -> list[str]:
    return [f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions(path=[str(lib)])]


def _requirement_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            out.append(line)
    return out


def _ini(text: str) -> configparser.ConfigParser:
    """tox.ini / setup.cfg as parsed sections; an unreadable file reads as empty."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return configparser.ConfigParser(interpolation=None)
    return parser


def _tox_deps(text: str) -> list[str]:
    parser, out = _ini(text), []
    for section in parser.sections():
        if section == "testenv" or section.startswith("testenv:"):
            deps = parser.get(section, "deps", fallback="")
            out += [re.sub(r"^[\w{},.\-]+:\s+", "", d) for d in _requirement_lines(deps)]
    return out


def _setup_cfg(text: str) -> list[str]:
    parser = _ini(text)
    out = _requirement_lines(parser.get("options", "tests_require", fallback=""))
    for extra in TEST_EXTRAS:
        out += _requirement_lines(parser.get("options.extras_require", extra, fallback=""))
    return out


def _setup_py(text: str) -> list[str]:
    """tests_require=[...] and a test extra's list in extras_require={...} (literal lists only)."""
    out = []
    for block in re.findall(r"tests_require\s*=\s*\[([^\]]*)\]", text):
        out += re.findall(r"[\"']([^\"']+)[\"']", block)
    for extra in TEST_EXTRAS:
        for block in re.findall(rf"[\"']{extra}[\"']\s*:\s*\[([^\]]*)\]", text):
            out += re.findall(r"[\"']([^\"']+)[\"']", block)
    return out


def _pyproject(text: str) -> list[str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    out = []
    optional = data.get("project", {}).get("optional-dependencies", {})
    for extra in TEST_EXTRAS:
        out += [str(r) for r in optional.get(extra, [])]
    for group, reqs in data.get("dependency-groups", {}).items():  # PEP 735
        if group in TEST_EXTRAS:
            out += [r for r in reqs if isinstance(r, str)]
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [poetry.get("dev-dependencies", {})]
    tables += [
        g.get("dependencies", {}) for n, g in poetry.get("group", {}).items() if n in TEST_EXTRAS
    ]
    for table in tables:
        out += [name for name in table if name.lower() != "python"]  # the version is poetry's
    return out
