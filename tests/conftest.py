"""Test session setup: 8 simulated CPU devices (sharding tests).

XLA_FLAGS (and JAX_* settings) must be set before jax is imported anywhere, hence here. Matmul
precision is left at JAX's default, the numeric mode production runs in; a test that needs more
sets it locally (`with jax.default_matmul_precision("highest"):`) and says why.
"""

import gc
import os
import shutil
import sys

import pytest

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
# Cheap XLA:CPU compiles for the whole suite (tests/xla_env.py says why and what they change).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xla_env import cheap_compile_flags  # noqa: E402

for flag in cheap_compile_flags():
    if flag.split("=")[0] not in os.environ["XLA_FLAGS"]:
        os.environ["XLA_FLAGS"] += " " + flag
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# rl.envs.Sandbox refuses to run without bubblewrap unless opted in. Tests put only their own code
# in sandboxes and the hostile-program tests skip without bwrap, so a bare machine opts in here.
if not shutil.which(os.environ.get("RL_ENVS_BWRAP", "bwrap")):
    os.environ.setdefault("RL_ENVS_ALLOW_UNISOLATED", "1")

# Compiled programs persist across tests and their subprocesses (the resume tests start several
# processes that compile the same tiny-model step): JAX's own on-disk compilation cache.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "jax_cache_tests")
)
# Every program, not only those over JAX's default 1 s of compile: with cheap compiles most fall
# under it, and each of the three workers would compile them again.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_bwrap: isolation tests; skipped where bubblewrap cannot isolate"
    )
    config.addinivalue_line(
        "markers", "network: reaches the internet (a package index); run with RUN_NETWORK_TESTS=1"
    )


def pytest_collection_finish(session):
    """Python's cyclic GC, tuned for a process that traces JAX programs: tracing allocates many
    short-lived containers, so the default thresholds (700, 10, 10) ran a young collection every
    700 of them and, as survivors piled up, full ones that walk every object the imports made.
    Freezing what exists after collection (modules, test code) takes it out of every pass, and
    larger thresholds run fewer passes: GC's share of a worker's CPU samples on
    tests/test_rollout.py fell from 3.1% to 1.6% (perf; bench/RESULTS.md "Suite time")."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def pytest_runtest_setup(item):
    if item.get_closest_marker("network") and os.environ.get("RUN_NETWORK_TESTS") != "1":
        pytest.skip("reaches the internet: RUN_NETWORK_TESTS=1 runs it")
    # One rule for every isolation test: a bare machine runs the suite with the opted-in unisolated
    # fallback, which by design contains nothing, so what only bubblewrap guarantees is skipped.
    if item.get_closest_marker("needs_bwrap") is None:
        return
    from rl.envs import backend

    if backend(allow_unisolated=True) != "bwrap":
        pytest.skip("bubblewrap not usable here (apt-get install bubblewrap)")


MAPPINGS_BEFORE_RELEASE = 30_000  # one module adds up to ~20k; the kernel's limit is 65,530


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drops every compiled program after a test module once the process holds many memory
    mappings. Each XLA:CPU executable holds mappings of its own; the whole suite in one process
    compiled enough of them (the engine's per-bucket decode programs among them) to pass the
    kernel's vm.max_map_count (65,530) and abort inside XLA. Clearing only then keeps the
    programs modules share (a cleared one comes back from the on-disk cache above, not free)."""
    yield
    from model.engine.map_limit import ensure_room  # the engine's own guard, at a lower mark

    ensure_room(mark=MAPPINGS_BEFORE_RELEASE)


# Shared builders, session-scoped: built once per pytest process and never mutated (jax arrays are
# immutable). A test that needs other knobs or another seed builds its own and says why.


@pytest.fixture(scope="session")
def byte_tok():
    from data.tokenizers import ByteTokenizer

    return ByteTokenizer()


@pytest.fixture(scope="session")
def tiny_model():
    """(cfg, params): the `tiny` preset as production runs it (blocked MoE dispatch), seed 0."""
    import jax

    from model import init_params, presets

    cfg = presets.get("tiny")
    return cfg, init_params(cfg, jax.random.PRNGKey(0))


@pytest.fixture(scope="session")
def tiny_dense_model(tiny_model):
    """(cfg, params): `tiny` on the dense MoE reference path, with tiny_model's weights (the
    dispatch implementation does not change the parameters)."""
    from model import presets

    return presets.get("tiny", moe_impl="dense"), tiny_model[1]
