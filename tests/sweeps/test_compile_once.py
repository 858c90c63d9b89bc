"""One compile per distinct (shape, batch): cells of a sweep and the branches of a WSD run
reuse the init, train and eval steps compiled for their shape, whatever their schedule."""

import collections

import jax
import pytest

from chinchax.sweeps import wsd
from chinchax.sweeps.train import loop
from chinchax.sweeps.configs import train as train_configs

LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"
PROGRAMS = ("jit(init_state)", "jit(train_chunk)", "jit(eval_step)")


class Counter:
  """Lowerings and XLA compiles per jitted function, while `on`."""

  def __init__(self):
    self.on, self.lowered, self.compiled = False, collections.Counter(), collections.Counter()
    jax.monitoring.register_event_duration_secs_listener(self._event)

  def _event(self, name, secs, **kwargs):
    del secs
    if self.on and name in (LOWER, COMPILE):
      (self.lowered if name == LOWER else self.compiled)[kwargs.get("fun_name")] += 1

  def counts(self):
    return {p: (self.lowered[p], self.compiled[p]) for p in PROGRAMS}


def _config(name, tokens_steps, peak_lr, warmup, batch_size=8):
  c = train_configs.get_config("tiny")
  # A shape no other test trains, so that this process has compiled nothing for it yet.
  c.model.update(d_model=40, n_layers=2, n_heads=5, d_ff=104)
  c.name, c.batch_size = name, batch_size
  c.tokens = float(tokens_steps * batch_size * c.seq_len)
  c.optimizer.update(peak_lr=peak_lr, warmup_steps=warmup)
  c.eval_every, c.log_every, c.checkpoint.every_steps = 1000, 1000, 1000
  return c


@pytest.mark.slow
def test_cells_and_wsd_branches_of_one_shape_compile_once(tmp_path):
  counter = Counter()
  counter.on = True
  # Three cosine cells (budgets) of one shape: different lengths, peak LRs and warmups.
  for i, (steps, lr, warmup) in enumerate([(12, 3e-3, 2), (20, 2e-3, 3), (30, 1e-3, 4)]):
    record = loop.train(_config(f"cell{i}", steps, lr, warmup), str(tmp_path / f"cell{i}"),
                         quiet=True)
    assert record["status"] == "done"
  # A WSD run of the same shape: a constant-LR stable run and two cooldown branches.
  c = _config("wsd", 30, 3e-3, 2)
  tps = c.batch_size * c.seq_len
  c.wsd.branches, c.wsd.decay_fraction = (16.0 * tps, 28.0 * tps), 0.25
  out = wsd.train_wsd(c, str(tmp_path / "wsd"), quiet=True)
  assert out.status == "done" and len(out.branches) == 2
  # Seven runs, each (lowering, compile) once; the branches restore instead of initialising.
  assert counter.counts() == {p: (1, 1) for p in PROGRAMS}

  # Another batch size is another program for the train and eval steps, not for the init.
  record = loop.train(_config("batch16", 12, 3e-3, 2, batch_size=16), str(tmp_path / "b16"),
                       quiet=True)
  assert record["status"] == "done"
  assert counter.counts() == {"jit(init_state)": (1, 1), "jit(train_chunk)": (2, 2),
                              "jit(eval_step)": (2, 2)}
  counter.on = False
