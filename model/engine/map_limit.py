"""Room under the kernel's cap on a process's memory mappings, which a CPU engine meets first.

XLA:CPU loads every compiled kernel as its own object, three mappings each (code, read-only data,
data): an engine program is a few hundred kernels. Linux caps a process at vm.max_map_count
mappings (65,530 by default); past it, LLVM's next mmap fails and the process dies inside XLA
('LLVM compilation error: Cannot allocate memory', then a segfault). Measured: a real-repository
RL run at 8,192 tokens (bench/bench_rl_repos.py, one process: the trainer, its samplers and the
held-out play) held 6k mappings after SFT and 60k nine minutes later, 20k each of the three
kinds, as its engines met new (rows, cache window) buckets.

`ensure_room()` runs before an engine compiles a program it has not used: above FRACTION of the
cap it drops every compiled program in the process (jax.clear_caches; tests/conftest.py calls it
between modules with a lower mark) and logs it once, so later calls compile again (or read JAX's
persistent cache) instead of the process dying; raising the cap (`sysctl -w
vm.max_map_count=262144`) avoids it.
"""

from __future__ import annotations

import logging

FRACTION = 0.8
MAPS, CAP = "/proc/self/maps", "/proc/sys/vm/max_map_count"
_said = []


def mappings() -> int | None:
    """The process's memory mappings now (None: not Linux)."""
    try:
        with open(MAPS) as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def cap() -> int | None:
    try:
        with open(CAP) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def ensure_room(mark: int | None = None) -> bool:
    """Drops every compiled program when the process holds more than `mark` mappings (default:
    FRACTION of vm.max_map_count). -> whether it did."""
    import jax

    limit = cap()
    mark = mark if mark is not None else None if limit is None else int(FRACTION * limit)
    held = mappings()
    if mark is None or held is None or held <= mark:
        return False
    jax.clear_caches()
    if not _said:
        _said.append(True)
        logging.warning(
            "%d memory mappings of vm.max_map_count=%s: dropped every compiled program (XLA:CPU "
            "maps ~3 per compiled kernel); they compile again as needed. `sysctl -w "
            "vm.max_map_count=262144` avoids the recompiles",
            held,
            limit,
        )
    return True
