"""The train loop keeps at most loop.IN_FLIGHT steps dispatched and unfinished, whatever the
log cadence (issue 40: unbounded, the host ran a log interval of steps ahead of the devices).

The loop runs on stand-ins: a train step that only counts what was dispatched, and losses that
record when the loop waits for them, so the test sees the queue the devices would have."""

import contextlib
import types

from chinchax.sweeps.train import loop


class Loss:
  """A step's loss: `block_until_ready` is how jax.block_until_ready waits on it."""

  def __init__(self, step: int, finished: list[int]):
    self.step, self.finished = step, finished

  def block_until_ready(self):
    self.finished.append(self.step)
    return self

  def __float__(self):
    self.finished.append(self.step)  # float() of a jax array waits for it too
    return 2.0


def run(total: int, log_every: int) -> list[int]:
  """The loop over `total` steps; returns, at each dispatch, how many earlier steps were not
  yet waited for."""
  finished: list[int] = []
  unfinished: list[int] = []

  def train_step(state, batch, lr):
    step = state + 1
    done_upto = max(finished, default=0)
    unfinished.append(step - 1 - done_upto)  # dispatched before this one, not waited for
    return step, {"loss": Loss(step, finished), "grad_norm": 1.0}

  s = types.SimpleNamespace(
      c=types.SimpleNamespace(log_every=log_every, eval_every=10**9, spike_factor=10.0),
      state=0, step=0, total_steps=total, tokens_per_step=1, flops_per_token=1,
      train_loss=None, losses=(), hooks=[], save=lambda step, state, steps: None,
      ckpt=types.SimpleNamespace(every_steps=10**9),
      batches=types.SimpleNamespace(fixed_shape=False, batch=lambda step: None),
      model=types.SimpleNamespace(train_step=train_step, lr=[0.1] * (total + 1), K=1,
                                  opt_cfg=types.SimpleNamespace(warmup_steps=0)),
      writer=types.SimpleNamespace(write=lambda *a, **k: None), mfu=lambda tok_s: None,
      inputs=types.SimpleNamespace(ds=types.SimpleNamespace(unique_tokens=10**9)))
  s.clock = type("Clock", (), {"mark": lambda self: (0.0, 0.0), "rest": lambda self, *a: None,
                               "__call__": lambda self, phase: contextlib.nullcontext()})()
  end = loop.steps(s, stop=None, log=lambda m: None)
  assert end.step == total
  return unfinished


def test_at_most_in_flight_steps_wait_unfinished_whatever_the_log_cadence():
  assert loop.IN_FLIGHT == 2
  assert max(run(200, 1)) == 0  # a log every step waits for every step
  for log_every in (50, 10**6):
    unfinished = run(200, log_every)
    # Before the step it dispatches, the loop has waited for all but the last IN_FLIGHT.
    assert max(unfinished) == loop.IN_FLIGHT, (log_every, max(unfinished))
    assert unfinished[:3] == [0, 1, 2]  # the first steps fill the queue, then it stays full
