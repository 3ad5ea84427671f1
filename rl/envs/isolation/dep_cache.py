"""A repository's declared test dependencies, as every sandbox of that repository sees them.

Some projects' tests import a package this machine lacks (iso8601's pytz, funcy's `whatever`) and
that the project declares as a test dependency. `python -m rl.envs.repos add` fetches exactly those
(rl/envs/repos/dep_fetch.py: pip on the host, wheels only, none of their own dependencies) into a
cache folder named by the pinned requirement set (`key`); the spec and every task of the repository
record the set (`meta["test_deps"]`). Every sandbox opened with that set (`Sandbox(...,
test_deps=...)`) binds the folder read-only at MOUNT and puts its lib/ on sys.path AFTER
site-packages, so nothing there can shadow the interpreter's or the grader's own packages:

- commands (the policy's, the test command, DevOps checks): PYTHONPATH names MOUNT/hook, whose one
  file, a sitecustomize.py, takes its own folder off sys.path, appends MOUNT/lib, then runs the
  interpreter's own sitecustomize if there is one;
- the grader's child (`python3 -I`, which ignores PYTHONPATH) appends MOUNT/lib itself (the grader
  manifest's "deps").

Nothing in a sandbox can write there (bwrap's read-only bind; under the unisolated rlimit backend
the folder is the host's, read-only by mode only). A machine without the folder fails closed:
`host_dir` raises MissingTestDeps naming the set, its key and the command that fetches it.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

CACHE_ENV = "RL_TEST_DEPS_CACHE"  # overrides the cache folder (tests use a tmp dir)
MOUNT = "/rl_test_deps"  # where a sandbox sees its repository's folder (bwrap)
COMPLETE = "COMPLETE"  # written last by the fetch: the sorted set, one requirement a line
PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9._+!-]*")

# The one file of MOUNT/hook. It runs at interpreter start-up (site.py imports sitecustomize after
# site-packages are on sys.path), so the append lands after them.
HOOK = '''"""Appends the repository's declared test dependencies to sys.path (after site-packages),
then runs the interpreter's own sitecustomize, if any (rl/envs/isolation/dep_cache.py)."""
import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
_lib = os.path.join(os.path.dirname(_here), "lib")
if _lib not in sys.path:
    sys.path.append(_lib)
_self = sys.modules.pop("sitecustomize")
try:
    importlib.import_module("sitecustomize")
except ImportError:
    sys.modules["sitecustomize"] = _self
'''


class MissingTestDeps(RuntimeError):
    """The requirement set a task needs is not in this machine's cache (fail closed)."""


def cache_root() -> Path:
    """$RL_TEST_DEPS_CACHE, else $XDG_CACHE_HOME/composer-jax/test-deps (~/.cache/...)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "composer-jax" / "test-deps"


def normalize(requirements: Sequence[str]) -> list[str]:
    """The set, sorted; each must be a pin (`name==version`): the key must name one content."""
    if isinstance(requirements, str):
        raise ValueError(f"test_deps must be a list of pins, not the string {requirements!r}")
    out = sorted({r.strip() for r in requirements})
    bad = [r for r in out if not PIN.fullmatch(r)]
    if bad:
        raise ValueError(f"test_deps {bad} are not pins (name==version)")
    return out


def key(requirements: Sequence[str]) -> str:
    """Content address of the set: the first 16 hex digits of sha256 over the sorted pins."""
    return hashlib.sha256("\n".join(normalize(requirements)).encode()).hexdigest()[:16]


def host_dir(requirements: Sequence[str], root: Path | None = None) -> str | None:
    """The set's folder on this machine (None for no set), or MissingTestDeps (one line)."""
    if not requirements:
        return None
    pins = normalize(requirements)
    folder = (root or cache_root()) / key(pins)
    marker = folder / COMPLETE
    if not marker.is_file() or marker.read_text().split() != pins:
        raise MissingTestDeps(
            f"test dependencies {pins} (key {key(pins)}) are not in {folder.parent}: fetch them "
            f"with `python -m rl.envs.repos deps {' '.join(pins)}` (network), or set {CACHE_ENV}"
        )
    return str(folder)
