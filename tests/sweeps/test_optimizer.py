"""Schedules against their closed forms; the decay mask; clipping."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

from chinchax.sweeps.train import optimizer as opt


def test_cosine_matches_closed_form_and_ends_at_ten_percent():
  cfg = opt.OptimizerConfig(peak_lr=1.0, warmup_steps=10)
  T = 110
  lr = opt.schedule(cfg, T)
  for t in (0, 5, 10, 40, 77, 110):
    if t < 10:
      want = t / 10
    else:
      frac = (t - 10) / (T - 10)
      want = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))
    assert float(lr(t)) == pytest.approx(want, abs=1e-6), t
  # The cycle is the run's own: a 2x longer run is still at ~55% at this run's end.
  assert float(opt.schedule(cfg, 2 * T)(T)) > 0.5


def test_wsd_plateau_then_linear_decay():
  cfg = opt.OptimizerConfig(peak_lr=2.0, warmup_steps=4, schedule="wsd", decay_fraction=0.25)
  lr = opt.schedule(cfg, 40)  # decay over the last 10 steps
  assert float(lr(2)) == pytest.approx(1.0)
  assert float(lr(4)) == pytest.approx(2.0)
  assert float(lr(29)) == pytest.approx(2.0)
  assert float(lr(35)) == pytest.approx(2.0 - 1.8 * 0.5)
  assert float(lr(40)) == pytest.approx(0.2)


def test_weight_decay_skips_norm_scales():
  params = {"block": {"norm": {"scale": jnp.ones((2, 3))}, "mlp": {"kernel": jnp.ones((3, 3))}}}
  mask = opt.decay_mask(params)
  assert mask == {"block": {"norm": {"scale": False}, "mlp": {"kernel": True}}}
  cfg = opt.OptimizerConfig(peak_lr=0.1, warmup_steps=0, schedule="constant", weight_decay=0.5)
  tx = opt.make(cfg, opt.schedule(cfg, 10))
  state = tx.init(params)
  zeros = {"block": {"norm": {"scale": jnp.zeros((2, 3))}, "mlp": {"kernel": jnp.zeros((3, 3))}}}
  updates, _ = tx.update(zeros, state, params)
  assert np.allclose(updates["block"]["norm"]["scale"], 0.0)
  assert np.allclose(updates["block"]["mlp"]["kernel"], -0.1 * 0.5)


def test_clipping_bounds_the_global_norm():
  cfg = opt.OptimizerConfig(peak_lr=1.0, warmup_steps=0, schedule="constant", clip_norm=1.0,
                            weight_decay=0.0, b1=0.9)
  tx = opt.make(cfg, opt.schedule(cfg, 10))
  params = {"w": jnp.zeros(4)}
  g = jnp.array([3.0, -4.0, 0.0, 12.0])  # norm 13
  _, state = tx.update({"w": g}, tx.init(params), params)
  adam_state = state[1][0]
  # Adam's first moment after one step is (1 - b1) · the clipped gradient, of norm 1.
  assert np.allclose(adam_state.mu["w"], 0.1 * g / 13.0, atol=1e-7)
