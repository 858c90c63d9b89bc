"""The LR table: the values of optax's schedule over the run's steps, bit for bit, without an
XLA program per run length."""

import math

import jax
import numpy as np
import pytest

from chinchax.sweeps.train import optimizer as opt

COMPILE = "/jax/core/compile/backend_compile_duration"

CONFIGS = [
    opt.OptimizerConfig(peak_lr=3e-3, warmup_steps=100, schedule="cosine"),
    opt.OptimizerConfig(peak_lr=7.3e-4, warmup_steps=0, schedule="cosine", final_lr_ratio=0.05),
    opt.OptimizerConfig(peak_lr=2e-3, warmup_steps=50, schedule="wsd", decay_fraction=0.2),
    opt.OptimizerConfig(peak_lr=1e-2, warmup_steps=10, schedule="constant"),
]


def closed_form(cfg: opt.OptimizerConfig, T: int) -> np.ndarray:
  """The schedule in float64, written from its definition (optimizer.py's docstring)."""
  peak, end, out = cfg.peak_lr, cfg.peak_lr * cfg.final_lr_ratio, []
  for t in range(T + 1):
    if cfg.schedule == "cosine":
      w = min(cfg.warmup_steps, max(T - 1, 0))
      if t < w:
        v = peak * t / w
      else:
        v = end + (peak - end) * 0.5 * (1 + math.cos(math.pi * min(t - w, T - w) / (T - w)))
    elif cfg.schedule == "wsd":
      decay = max(1, round(cfg.decay_fraction * T))
      start = T - decay
      w = min(cfg.warmup_steps, max(start - 1, 0))
      if t < w:
        v = peak * t / w
      elif t < start:
        v = peak
      else:
        v = peak + (end - peak) * min(t - start, decay) / decay
    else:
      v = peak * t / cfg.warmup_steps if t < cfg.warmup_steps else peak
    out.append(v)
  return np.array(out)


@pytest.mark.parametrize("T", [1, 37, 4097])
def test_table_is_todays_values_bit_for_bit_and_the_closed_form(T):
  for cfg in CONFIGS:
    table = opt.lr_table(cfg, T)
    assert table.dtype == np.float32 and table.shape == (T + 1,)
    # Today's table: the schedule evaluated eagerly on the whole run at once.
    whole = np.asarray(opt.schedule(cfg, T)(np.arange(T + 1)), np.float32)
    np.testing.assert_array_equal(table, whole)
    np.testing.assert_allclose(table, closed_form(cfg, T), rtol=0, atol=3e-7 * cfg.peak_lr)


def test_a_new_run_length_compiles_nothing():
  compiled = []
  jax.monitoring.register_event_duration_secs_listener(
      lambda name, secs, **kw: compiled.append(kw.get("fun_name")) if name == COMPILE else None)
  for cfg in CONFIGS:
    opt.lr_table(cfg, 5000)  # the programs of one block length, once per process
  compiled.clear()
  for T in (123, 999, 6001, 9001):
    for cfg in CONFIGS:
      opt.lr_table(cfg, T)
  assert compiled == []
