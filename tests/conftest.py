"""Test session setup: 8 simulated CPU devices (sharding tests), float32 matmuls at full precision.

XLA_FLAGS must be set before jax is imported anywhere, hence here at conftest import.
"""

import os
import shutil
import sys

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# rl.envs.Sandbox refuses to run without bubblewrap unless opted in. Tests put only their own code
# in sandboxes and the hostile-program tests skip without bwrap, so a bare machine opts in here.
if not shutil.which(os.environ.get("RL_ENVS_BWRAP", "bwrap")):
    os.environ.setdefault("RL_ENVS_ALLOW_UNISOLATED", "1")

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
