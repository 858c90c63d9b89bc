"""The training-craft features of a run, as hooks the loop calls at fixed points.

The loop (sweeps/train/loop.py) knows no feature: it calls every hook of its `Setup.hooks` at each of
these points, and a feature the config leaves off has no hook.

    before_step(k)               host side, before batch k trains (mixture: count its sources)
    log_fields(k)                extra fields of the metrics row logged at step k
    after_eval(k, state, losses) after each periodic eval (`losses`: every eval so far); a
                                 hook that returns a reason stops the run (early stopping)
    after_final_eval(k, state, losses)   after the final eval (the best checkpoint)
    after_step(k, state)         after step k trained (WSD branch points)
    record_fields(k)             extra fields of the run record
    close()                      the run ends (its own checkpointers are closed)

Eval losses come from metrics.jsonl up to the restored step, so the hooks that decide from
them (early stopping, the best checkpoint) decide in a resumed run as in one never stopped.
"""

import os

from chinchax import atomic
from chinchax.scaling import conventions
from chinchax.sweeps.data import seqlen
from chinchax.sweeps.train import checkpoint, stop

BEST_DIR = "checkpoints_best"  # the checkpoint of the lowest eval loss (keep_best / early_stop)


def branch_point_dir(workdir: str, step: int) -> str:
  """Where a run saves its state at `step` for runs that branch off it (`wsd.save_steps`)."""
  return os.path.join(atomic.absolute(workdir), "branch_points", f"step_{step}")


class Hook:
  """A feature's part in the loop; every method does nothing unless the feature overrides it."""

  def before_step(self, step: int) -> None:
    pass

  def log_fields(self, step: int) -> dict:
    del step
    return {}

  def after_eval(self, step: int, state, losses: list[float]) -> str | None:
    del step, state, losses
    return None

  def after_final_eval(self, step: int, state, losses: list[float]) -> None:
    pass

  def after_step(self, step: int, state) -> None:
    pass

  def record_fields(self, step: int) -> dict:
    del step
    return {}

  def close(self) -> None:
    pass


class SeqLenWarmup(Hook):
  """Short contexts first (sweeps/data/seqlen.py): batch k at the schedule's length, the same
  tokens per step; each length compiles on first use, so the step is not compiled ahead."""

  fixed_shape = False

  def __init__(self, inputs, lengths: seqlen.Schedule, shape: conventions.Shape,
               tokens_per_step: int):
    self.inputs, self.lengths, self.shape, self.tokens_per_step = (
        inputs, lengths, shape, tokens_per_step)

  def batch(self, step: int) -> dict:
    return seqlen.global_batch(self.inputs.ds, step, self.inputs.batch_sharding,
                               self.lengths.length_at(step), self.inputs.rows)

  def _flops(self, step: int) -> float:
    return seqlen.flops_until(self.lengths, self.shape, step, self.tokens_per_step)

  def log_fields(self, step: int) -> dict:
    return {"seq_len": self.lengths.length_at(step - 1), "flops_chinchilla": self._flops(step)}

  def record_fields(self, step: int) -> dict:
    return {"flops_chinchilla": self._flops(step),
            "seq_len_stages": [list(s) for s in self.lengths.stages]}


class BestCheckpoint(Hook):
  """Keeps the state of the lowest eval loss in BEST_DIR (`checkpoint.keep_best`, early stop)."""

  def __init__(self, workdir: str, lock=None):
    self.ckpt = checkpoint.Checkpointer(
        os.path.join(atomic.absolute(workdir), BEST_DIR), every_steps=10**12, every_minutes=0,
        keep=1, async_save=lock is None, lock=lock)

  def after_eval(self, step: int, state, losses: list[float]) -> None:
    if stop.is_best(losses):
      self.ckpt.maybe_save(step, state, force=True)

  def after_final_eval(self, step: int, state, losses: list[float]) -> None:
    self.after_eval(step, state, losses)

  def close(self) -> None:
    self.ckpt.close()


class EarlyStopping(Hook):
  """Stops the run when `patience` evals in a row fail to improve (sweeps/train/stop.py)."""

  def __init__(self, stopper: stop.EarlyStop):
    self.stopper, self.stopped_at, self.best = stopper, None, None

  def after_eval(self, step: int, state, losses: list[float]) -> str | None:
    if not self.stopper.should_stop(losses):
      return None
    self.stopped_at, self.best = step, min(losses)
    return (f"early stop at step {step}: no {self.stopper.min_rel_improvement:.2%} improvement "
            f"in the last {self.stopper.patience} evals (best {self.best:.4f})")

  def record_fields(self, step: int) -> dict:
    if self.stopped_at is None:
      return {}
    return {"early_stopped": self.stopped_at, "best_eval_loss": self.best}


class BranchPoints(Hook):
  """Saves the state at each of `steps` for the runs that branch off this one (WSD)."""

  def __init__(self, workdir: str, steps, lock=None):
    self.workdir, self.steps, self.lock = workdir, set(steps), lock

  def after_step(self, step: int, state) -> None:
    if step in self.steps:
      points = checkpoint.Checkpointer(branch_point_dir(self.workdir, step), keep=1,
                                       async_save=self.lock is None, lock=self.lock)
      points.maybe_save(step, state, force=True)
      points.close()


class Lineage(Hook):
  """The record fields of a run that continues another (a WSD branch: `branch_of`)."""

  def __init__(self, branch_of: str, init_from: str, init_step: int | None):
    if init_step is None and atomic.isdir(init_from):  # a resumed branch: read its start back
      steps = [int(d) for d in atomic.listdir(init_from) if d.isdigit()]
      init_step = max(steps) if steps else None
    self.fields = {"branch_of": branch_of, "init_from": init_from, "init_step": init_step}

  def record_fields(self, step: int) -> dict:
    return dict(self.fields)
