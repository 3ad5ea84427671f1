"""train/malloc_env.py: the default launch re-executes once with glibc's huge-page tunable, and
never overrides a caller's own GLIBC_TUNABLES or the opt-out."""

import os
import subprocess
import sys

import pytest

from train import malloc_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = (
    "import os, sys; sys.path.insert(0, {root!r}); from train.malloc_env import "
    "reexec_with_hugepages; print('start', flush=True); reexec_with_hugepages(); "
    "print('tunables', os.environ.get('GLIBC_TUNABLES'))"
)


def _probe(**env_changes) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", malloc_env.OPT_OUT)}
    env.update(env_changes)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(root=ROOT)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.split("\n")[:-1]


def test_wanted_respects_the_callers_settings():
    assert not malloc_env.wanted({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert not malloc_env.wanted({malloc_env.OPT_OUT: "0"})


@pytest.mark.skipif(not malloc_env.wanted({}), reason="needs Linux with glibc >= 2.35")
def test_reexec_sets_the_tunable_once():
    # 'start' twice: the parent printed it, then the re-executed child; the child did not exec
    # again.
    assert _probe() == ["start", "start", f"tunables {malloc_env.TUNABLE}"]


def test_callers_tunables_and_opt_out_are_left_alone():
    assert _probe(GLIBC_TUNABLES="glibc.malloc.arena_max=2") == [
        "start",
        "tunables glibc.malloc.arena_max=2",
    ]
    assert _probe(**{malloc_env.OPT_OUT: "0"}) == ["start", "tunables None"]
