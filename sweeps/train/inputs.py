"""A run's inputs: its training batches and held-out sets, from one dataset or a mixture.

`open_data` opens the dataset, or every source of a curriculum (sweeps/data/mixture.py), once.
The loop reads an `Inputs` without knowing which it holds:

    batch(k)                    global training batch k (jax.Arrays on the batch sharding)
    evaluate(eval_step, params) (eval loss, the extra fields of the eval row)
    eval_bytes()                UTF-8 bytes under the eval targets (bits per byte), or None

`Mixture` is also a hook (sweeps/train/hooks.py): it counts the tokens each source gave, logs them and
the current weights, and evaluates every source on its own validation split.
"""

import ml_collections
import numpy as np

from chinchax.sweeps import data
from chinchax.sweeps.data import mixture, seqlen
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import hooks


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


def eval_loss_on(eval_step, params, ds: data.Dataset, n_eval: int, batch_sharding) -> float:
  """Token-weighted mean loss over the first `n_eval` eval batches of `ds`."""
  total, count = 0.0, 0.0
  for k in range(n_eval):
    m = eval_step(params, data.global_eval_batch(ds, k, batch_sharding))
    total, count = total + float(m["loss_sum"]), count + float(m["tokens"])
  return total / count


class Inputs(hooks.Hook):
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
