"""XLA_FLAGS for the suite's processes and the subprocesses its tests start.

The suite's CPU goes mostly to compiling: with a cold compile cache (a fresh machine, as CI is) it
took ~3x the CPU of a warm run. Its programs are tiny and run a few times each, so the suite asks
XLA:CPU for cheap code rather than fast code: LLVM at -O0 and, on JAX 0.10's XLA, the older
elemental fusion emitters; together they compile the tiny preset's grad 6x and its first
generate calls ~3x faster, and cut the cold suite's CPU by 59% (bench/RESULTS.md "Suite time").
LLVM also compiles each program as one module instead of splitting it for parallel codegen
threads: the split makes one compile finish sooner on idle cores but costs more CPU in all, and the
suite keeps both cores busy with three workers (bench_compile.py's programs: 8-23% less CPU).
Precision is unchanged (float32 stays float32, no fast-math); results may differ from XLA's
default build in the last bits, which every reference comparison's tolerance covers. `python
main.py` and the benches run with XLA's defaults outside the suite. JAX 0.11's XLA no longer
knows the emitter flag, and an unknown XLA flag aborts the process, hence the version check.
"""

import importlib.metadata

DEVICE_COUNT = "--xla_force_host_platform_device_count"


def cheap_compile_flags() -> list[str]:
    flags = ["--xla_backend_optimization_level=0", "--xla_cpu_parallel_codegen_split_count=1"]
    jaxlib = tuple(int(x) for x in importlib.metadata.version("jaxlib").split(".")[:2])
    if jaxlib < (0, 11):
        flags.append("--xla_cpu_use_fusion_emitters=false")
    return flags


def xla_flags(devices: int | None = None, *extra: str) -> str:
    """The cheap-compile flags, `devices` simulated CPU devices (None: XLA's one) and `extra`."""
    flags = cheap_compile_flags() + ([f"{DEVICE_COUNT}={devices}"] if devices else [])
    return " ".join(flags + list(extra))
