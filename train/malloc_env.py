"""The allocator setting the default launch applies: glibc's transparent-huge-page tunable.

XLA:CPU allocates a per-execution temp buffer of hundreds of MB from a worker thread; glibc serves a
request that large with a fresh `mmap`, so every step faults it back in 4 KiB at a time (~64,000
faults a step for bench_vs_pytorch's config). `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` makes malloc
`madvise(MADV_HUGEPAGE)` its mappings, so the same buffer faults in 2 MiB pages.
bench/RESULTS_LOG.md ("Issue 15 on a second host") has the measurements: a small-preset train step
1.12-1.20x faster on one host; on another, bench_vs_pytorch's A/B moved 0.98x and 1.07x (within
noise). It changes no numbers, only page sizes, and glibc reads it once at process start, so it can
only be applied by re-executing the process before anything else is imported.

Skipped when the caller already set GLIBC_TUNABLES (theirs wins), when COMPOSER_JAX_HUGEPAGES=0, or
where glibc is older than 2.35 (no such tunable) or absent (macOS, musl).
"""

from __future__ import annotations

import os
import platform
import sys

TUNABLE = "glibc.malloc.hugetlb=1"
OPT_OUT = "COMPOSER_JAX_HUGEPAGES"


def _glibc_has_hugetlb() -> bool:
    lib, version = platform.libc_ver()
    if lib != "glibc" or not version:
        return False
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (2, 35)


def wanted(environ=os.environ) -> bool:
    """Whether the tunable should be applied to a process started with `environ`."""
    if environ.get(OPT_OUT, "1") == "0" or "GLIBC_TUNABLES" in environ:
        return False
    return sys.platform.startswith("linux") and _glibc_has_hugetlb()


def reexec_with_hugepages() -> None:
    """Re-executes this interpreter with the tunable set, once (the child sees GLIBC_TUNABLES set).
    Call first thing in an entry point, before jax or numpy are imported."""
    if not wanted():
        return
    env = dict(os.environ, GLIBC_TUNABLES=TUNABLE)
    sys.stdout.flush()
    sys.stderr.flush()
    # sys.orig_argv keeps interpreter options (-m, -X, -u) as they were given.
    os.execve(sys.executable, sys.orig_argv, env)
