"""The training-craft features of a run, as hooks the loop calls at fixed points, and its
inputs (`Inputs`, itself a hook).

The loop (sweeps/train/loop.py) knows no feature: it calls every hook of its `Setup.hooks` at
each of these points, and a feature the config leaves off has no hook.

    before_step(k)               host side, before batch k trains (mixture: count its sources)
    log_fields(k)                extra fields of the metrics row logged at step k
    after_eval(k, state, losses) after each periodic eval (`losses`: every eval so far); a
                                 hook that returns a reason stops the run (early stopping)
    after_final_eval(k, state, losses)   after the final eval (the best checkpoint)
    after_step(k, state)         after a dispatch of steps ended at step k (WSD branch points)
    must_see()                   the steps after which the hook needs the state: a dispatch
                                 of several steps (loop.chunk_end) ends there
    record_fields(k)             extra fields of the run record
    close()                      the run ends (its own checkpointers are closed)

Eval losses come from metrics.jsonl up to the restored step, so the hooks that decide from
them (early stopping, the best checkpoint) decide in a resumed run as in one never stopped.

A run's inputs are its training batches and held-out sets, from one dataset or a mixture.
`open_data` opens the dataset, or every source of a curriculum (sweeps/data/mixture.py), once.
The loop reads an `Inputs` without knowing which it holds:

    batch(k)                    global training batch k (jax.Arrays on the batch sharding)
    chunk(steps, K, sharding)   batches `steps` stacked, KxBxL, for one dispatch of several
    evaluate(eval_step, params) (eval loss, the extra fields of the eval row)
    eval_bytes()                UTF-8 bytes under the eval targets (bits per byte), or None

`Mixture` counts the tokens each source gave, logs them and
the current weights, and evaluates every source on its own validation split."""

import os

import jax
import ml_collections
import numpy as np

from chinchax import atomic
from chinchax.scaling.runs import conventions
from chinchax.sweeps import data
from chinchax.sweeps.data import mixture, seqlen
from chinchax.sweeps.train import checkpoint, config as run_config, stop


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

  def must_see(self) -> tuple[int, ...]:
    return ()

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

  def must_see(self) -> tuple[int, ...]:
    return tuple(sorted(self.steps))

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


def open_data(c: ml_collections.ConfigDict, total_steps: int):
  """The run's `data.Dataset`, or a `mixture.Mixture` when `data.mixture.sources` is set."""
  if not run_config.uses_mixture(c):
    return data.open_dataset(run_config.data_config(c))
  mix = c.data.mixture
  return mixture.open_mixture(
      run_config.data_config(c), tuple(mix.sources),
      mixture.Curriculum(tuple(tuple(float(x) for x in w) for w in mix.weights), mix.kind,
                         tuple(float(t) for t in mix.boundaries)),
      total_steps)


# Eval batches dispatched and not yet finished, at most: the train loop's bound (loop.IN_FLIGHT,
# whose comment says why one is needed on CPU devices and across processes).
EVAL_IN_FLIGHT = 2


def eval_loss_on(eval_step, params, ds: data.Dataset, n_eval: int, batch_sharding) -> float:
  """Token-weighted mean loss over the first `n_eval` eval batches of `ds`.

  The per-batch sums stay on the device until the last batch is dispatched and come back in one
  transfer (a float() of each, two per batch, was a host round trip each); they are added on
  the host in batch order in float64, as before, so the loss is the same to the bit.
  """
  sums = []
  for k in range(n_eval):
    sums.append(eval_step(params, data.global_eval_batch(ds, k, batch_sharding)))
    if k >= EVAL_IN_FLIGHT:
      jax.block_until_ready(sums[k - EVAL_IN_FLIGHT])
  total, count = 0.0, 0.0
  for m in jax.device_get(sums):
    total, count = total + float(m["loss_sum"]), count + float(m["tokens"])
  return total / count


class Inputs(Hook):
  """One dataset: batch k at full length, one held-out set."""

  fixed_shape = True     # every batch has one shape: the train step can be compiled ahead
  rows = staticmethod(data.train_batch)  # rows of batch k at full length (seq-len warmup cuts them)

  def __init__(self, ds, eval_tokens: int, batch_sharding):
    self.ds, self.batch_sharding = ds, batch_sharding
    # Refuses an eval that the validation split cannot hold, before compute.
    self.n_eval = {name: data.n_eval_batches(d, eval_tokens) for name, d in self.sets().items()}

  def sets(self) -> dict[str, data.Dataset]:
    return {"": self.ds}

  def resume(self, step: int) -> None:
    """The run starts at `step` (0, or the restored checkpoint's)."""

  def batch(self, step: int) -> dict:
    return data.global_batch(self.ds, step, self.batch_sharding)

  def chunk(self, steps: range, K: int, chunk_sharding) -> dict:
    return data.global_chunk(self.rows, self.ds, steps, K, self.batch_sharding, chunk_sharding)

  def losses(self, eval_step, params) -> dict[str, float]:
    return {name: eval_loss_on(eval_step, params, d, self.n_eval[name], self.batch_sharding)
            for name, d in self.sets().items()}

  def evaluate(self, eval_step, params) -> tuple[float, dict]:
    return self.losses(eval_step, params)[""], {}

  def eval_bytes(self) -> int | None:
    B, L = self.ds.cfg.batch_size, self.ds.cfg.seq_len
    return data.eval_bytes(self.ds, max(self.n_eval.values()) * B * L)


class Mixture(Inputs):
  """Several sources on a curriculum: per-source counts, weights and eval losses."""

  rows = staticmethod(mixture.train_batch)

  def __init__(self, ds: mixture.Mixture, eval_tokens: int, batch_sharding):
    super().__init__(ds, eval_tokens, batch_sharding)
    self.tokens = np.zeros(len(ds.sources), np.int64)
    self.by_source = {}  # the last eval's loss per source

  def resume(self, step: int) -> None:
    # Per-source tokens so far, replayed from (seed, step): a resumed run continues the counts.
    self.tokens = mixture.tokens_until(self.ds, step)

  def sets(self) -> dict[str, data.Dataset]:
    return dict(zip(self.ds.names, self.ds.sources))

  def batch(self, step: int) -> dict:
    return seqlen.global_batch(self.ds, step, self.batch_sharding, self.ds.cfg.seq_len,
                                     self.rows)

  def evaluate(self, eval_step, params) -> tuple[float, dict]:
    self.by_source.update(self.losses(eval_step, params))
    loss = float(np.dot(self.ds.eval_weights(), [self.by_source[k] for k in self.ds.names]))
    return loss, {"eval_loss_by_source": dict(self.by_source)}

  def eval_bytes(self) -> None:
    return None  # the sources' bytes per token differ: no one bits-per-byte figure

  def before_step(self, step: int) -> None:
    self.tokens += np.bincount(mixture.choices(self.ds, step),
                               minlength=len(self.ds.sources)) * self.ds.cfg.seq_len

  def _tokens(self) -> dict:
    return dict(zip(self.ds.names, self.tokens.tolist()))

  def log_fields(self, step: int) -> dict:
    return {"tokens_by_source": self._tokens(),
            "mixture_weights": self.ds.curriculum.weights_at(step / self.ds.total_steps).tolist()}

  def record_fields(self, step: int) -> dict:
    return {"mixture": {"sources": list(self.ds.names), "kind": self.ds.curriculum.kind,
                        "tokens_by_source": self._tokens(),
                        "eval_loss_by_source": dict(self.by_source)}}


def make(c: ml_collections.ConfigDict, ds, batch_sharding) -> Inputs:
  if run_config.uses_mixture(c):
    return Mixture(ds, c.eval_tokens, batch_sharding)
  return Inputs(ds, c.eval_tokens, batch_sharding)
