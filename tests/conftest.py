"""Test session setup: 8 simulated CPU devices (sharding tests), float32 matmuls at full precision.

XLA_FLAGS must be set before jax is imported anywhere, hence here at conftest import.
"""

import os
import sys

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags:
    os.environ["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")
