"""Runs the suite with 8 simulated CPU devices (sharding tests need them). Must take effect
before jax is imported anywhere, hence at conftest import time."""
import os
import sys

_flag = '--xla_force_host_platform_device_count=8'
if _flag not in os.environ.get('XLA_FLAGS', ''):
  os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') + ' ' + _flag).strip()
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
