"""Sharded steps on 8 simulated CPU devices (tests/conftest.py sets the device count)."""
import jax
import numpy as np
import pytest

from train import build, sharding as shd
from test_train_standin import STANDIN_RULES, standin_setup, synthetic_batches

MESHES = [(1, 1, 1, 1), (8, 1, 1, 1), (2, 2, 2, 1), (1, 2, 2, 2)]


def _mesh(shape):
  return shd.make_mesh(dict(zip(shd.MESH_AXES, shape)), jax.devices()[:int(np.prod(shape))])


def _run(shape, batches, num_microbatches=1):
  h, tx, loss_fn, bu = standin_setup()
  mesh = _mesh(shape)
  state, sh = build.init_state(h, tx, mesh, STANDIN_RULES, seed=0)
  step = build.jit_train_step(loss_fn, sh, mesh, STANDIN_RULES, bias_update=bu,
                              num_microbatches=num_microbatches)
  losses = []
  for b in batches:
    state, m = step(state, shd.global_batch(b, mesh))
    losses.append(float(m['loss']))
  return state, losses


def test_sharded_steps_match_single_device_and_bytes_shrink():
  assert jax.device_count() == 8
  batches = synthetic_batches(3)
  ref_state, ref_losses = _run(MESHES[0], batches)
  ref_params = jax.device_get(ref_state.params)
  per_device = {}
  for shape in MESHES[1:]:
    state, losses = _run(shape, batches)
    np.testing.assert_allclose(losses, ref_losses, atol=1e-5)
    for a, b in zip(jax.tree.leaves(ref_params), jax.tree.leaves(jax.device_get(state.params))):
      np.testing.assert_allclose(a, b, atol=1e-5)
    # Includes the router bias: updated from global expert counts on every mesh.
    np.testing.assert_array_equal(ref_params['router_bias'], state.params['router_bias'])
    per_device[shape] = sum(x.addressable_shards[0].data.nbytes
                            for x in jax.tree.leaves(state.params))
  full = sum(x.nbytes for x in jax.tree.leaves(ref_params))
  assert per_device[(8, 1, 1, 1)] == full  # pure data parallel: params replicated
  assert per_device[(2, 2, 2, 1)] < full
  assert per_device[(1, 2, 2, 2)] < per_device[(2, 2, 2, 1)]


def test_params_are_created_sharded_not_replicated():
  h, tx, _, _ = standin_setup()
  state, sh = build.init_state(h, tx, _mesh((1, 2, 2, 2)), STANDIN_RULES, seed=0)
  experts = state.params['experts']  # [E, D, F] -> (expert, fsdp, tensor)
  assert experts.sharding.spec == jax.sharding.PartitionSpec('expert', 'fsdp', 'tensor')
  assert experts.addressable_shards[0].data.shape == (2, 8, 8)
  # Adam moments follow their params.
  mu = jax.tree.leaves(state.opt_state)
  assert any(getattr(x, 'sharding', None) == experts.sharding and x.shape == experts.shape
             for x in mu if x is not experts)


def test_sharded_grad_accumulation_matches():
  batches = synthetic_batches(1)
  ref_state, ref_losses = _run(MESHES[0], batches)
  state, losses = _run((2, 2, 2, 1), batches, num_microbatches=2)
  np.testing.assert_allclose(losses, ref_losses, atol=1e-5)


@pytest.mark.parametrize('sizes,devices,msg', [
    ({'data': 3}, 8, 'has 3 devices, but 8'),
    ({'data': -1, 'fsdp': 3}, 8, 'do not divide 8'),
    ({'data': -1, 'fsdp': -1}, 8, 'at most one -1'),
    ({'dp': 8}, 8, "unknown axes ['dp']"),
])
def test_bad_mesh_is_one_line_error(sizes, devices, msg):
  with pytest.raises(shd.ConfigError) as e:
    shd.resolve_mesh_shape(sizes, devices)
  assert msg in str(e.value) and '\n' not in str(e.value)


def test_mesh_fill():
  assert shd.resolve_mesh_shape({'data': -1, 'fsdp': 2, 'tensor': 2}, 8) == (2, 2, 1, 2)
