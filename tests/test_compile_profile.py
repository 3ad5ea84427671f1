"""tools/compile_profile.py: the rows it writes for a real compile, a persistent-cache hit and a
test's CPU, and the summary it makes of them."""

import io
import logging
import time

import jax
import jax.numpy as jnp

from tools import compile_profile as cp


def test_rows_for_a_compile_then_a_cache_hit_and_the_summary(tmp_path, monkeypatch):
    out = io.StringIO()
    monkeypatch.setitem(cp._state, "out", out)
    monkeypatch.setitem(cp._state, "test", "tests/test_x.py::test_y")
    handler = cp._CompileLog(level=logging.DEBUG)
    logger = logging.getLogger("jax")
    level = logger.level
    # Under `-p tools.compile_profile` the plugin's own handler would write each row a second time.
    plugin_handlers = [h for h in logger.handlers if isinstance(h, cp._CompileLog)]
    for h in plugin_handlers:
        logger.removeHandler(h)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    jax.config.update("jax_log_compiles", True)
    try:
        x = jnp.arange(7.0)
        for _ in range(2):  # two function objects, one program: the second comes from disk
            jax.jit(_fresh_program())(x).block_until_ready()
    finally:
        jax.config.update("jax_log_compiles", False)
        logger.removeHandler(handler)
        for h in plugin_handlers:
            logger.addHandler(h)
        logger.setLevel(level)
    rows = [line.split("\t") for line in out.getvalue().splitlines()]
    mine = [(kind, float(s)) for test, kind, program, s in rows if program == "profiled_program"]
    kinds = [kind for kind, _ in mine]
    assert {"trace", "lower", "xla"} <= set(kinds) and all(s >= 0 for _, s in mine), rows
    assert kinds.count("xla") == 1 and "hit" in kinds[kinds.index("xla") + 1 :], rows  # then disk
    assert all(test == "tests/test_x.py::test_y" for test, *_ in rows)

    prefix = str(tmp_path / "prof")
    with open(f"{prefix}.main.1.tsv", "w") as f:
        f.write(out.getvalue() + "tests/test_x.py::test_y\tcpu\t-\t2.5000\n")
    text = cp.summarize(prefix)
    assert text.startswith("CPU 2 s;") or text.startswith("CPU 3 s;"), text
    line = next(l for l in text.splitlines() if l.startswith("profiled_program"))
    assert line.split()[-2:] == ["1", "1"], line  # one XLA compile, one cache hit
    assert "no wall rows" in text
    assert cp.parse("Finished tracing") is None and cp.parse("unrelated message") is None


_RUN_CONSTANT = float(time.time_ns() % 1_000_003)  # in the program: not on disk from a past run


def _fresh_program():
    """A new function object each call (jit's in-memory cache is per function) of one program
    that no other test or earlier run compiled."""

    def profiled_program(x):
        return jnp.sin(x) * _RUN_CONSTANT + 0.125

    return profiled_program


def test_occupancy_counts_tests_at_once_and_the_tail_run_alone(tmp_path):
    """Two workers: a 0-10 s and a 2-6 s test overlap (4 s two at once), then 10-14 s alone
    on one: 14 s of wall, 4 + 10 + 4 = 18 test-seconds (1.29 at once), alone 2 + 4 + 4 = 10 s."""
    prefix = str(tmp_path / "prof")
    rows = {"gw0": [("a", 100.0, 10.0), ("c", 110.0, 4.0)], "gw1": [("b", 102.0, 4.0)]}
    for worker, tests in rows.items():
        with open(f"{prefix}.{worker}.1.tsv", "w") as f:
            for name, start, wall in tests:
                f.write(f"tests/t.py::{name}\tcpu\t-\t1.0\n")
                f.write(f"tests/t.py::{name}\twall\t{start:.3f}\t{wall:.4f}\n")
    text = cp.summarize(prefix)
    assert "tests ran 14 s of wall time, 1.29 at once on average; one alone for 10 s" in text, text
    assert text.startswith("CPU 3 s;"), text  # wall rows are not CPU
