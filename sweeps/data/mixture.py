"""Data-mixture curricula: several sources whose sampling weights change with training progress.

Weights. Progress t = k / total_steps at step k. `stages`: weights w_j from boundary t_j on
(t_0 = 0). `linear`: w(t) = (1 - t)·w_0 + t·w_1 ("soft mixing"). `cosine`: the same with
t replaced by (1 - cos(pi·t)) / 2. Weights are normalised to sum to 1.

Sample order (a function of (seed, step) alone, so resume is exact and no state is kept):
  - source of global sample i = k·B + b (row b of step k): u_{k,b} is the b-th uniform of a
    Philox generator keyed on (hash(seed), k) (counter-based: numpy's `Philox(key=...)`), and
    the source is the s with  cumw_{s-1}(t_k) <= u_{k,b} < cumw_s(t_k);
  - window: source s has its own permutation over its W_s windows (`packing.SampleOrder`
    keyed on hash(seed, s)) and sample i reads its window pi_s(i), i.e. every source is indexed
    by the global sample index. Within W_s consecutive global samples no window of s repeats.
Tokens consumed per source up to step k are sum_{k'<k} (#rows of s at k')·L, recomputed from
(seed, k) by replaying the draws (`tokens_until`), so a resumed run continues the counts.

Every source is opened like a single-source run (`pipeline.open_dataset`: a text corpus or a
prepared TFDS dataset) with the same tokenizer and seq_len. A source's eval loss is measured
on its own validation split; the run's eval loss is their mean weighted by w(1), the mixture
training ends on.
"""

import dataclasses
import math
import os

import numpy as np

from chinchax.errors import UserError
from chinchax.sweeps.data import packing
from chinchax.sweeps.data import pipeline

KINDS = ("stages", "linear", "cosine")


@dataclasses.dataclass(frozen=True)
class Curriculum:
  weights: tuple[tuple[float, ...], ...]  # stages: one per stage; linear/cosine: (w_0, w_1)
  kind: str = "stages"
  boundaries: tuple[float, ...] = (0.0,)  # stages: t_j where stage j starts

  def __post_init__(self):
    w = np.asarray(self.weights, np.float64)
    if self.kind not in KINDS:
      raise UserError(f"mixture.kind={self.kind!r}: use one of {', '.join(KINDS)}")
    if w.ndim != 2 or w.shape[0] == 0 or np.any(w < 0) or np.any(w.sum(axis=1) <= 0):
      raise UserError(f"mixture.weights={self.weights}: give one tuple of non-negative weights "
                      "(one per source, not all zero) per stage")
    if self.kind != "stages" and w.shape[0] != 2:
      raise UserError(f"mixture.kind={self.kind!r} interpolates two weight tuples (start, end); "
                      f"got {w.shape[0]}")
    if self.kind == "stages":
      b = list(self.boundaries)
      if len(b) != w.shape[0] or b[0] != 0 or any(y <= x for x, y in zip(b, b[1:])):
        raise UserError(f"mixture.boundaries={self.boundaries}: one increasing start fraction "
                        "per stage, the first 0")

  @property
  def n_sources(self) -> int:
    return len(self.weights[0])

  def weights_at(self, t: float) -> np.ndarray:
    w = np.asarray(self.weights, np.float64)
    if self.kind == "stages":
      j = int(np.searchsorted(np.asarray(self.boundaries), t, side="right")) - 1
      v = w[max(j, 0)]
    else:
      t = min(max(t, 0.0), 1.0)
      a = t if self.kind == "linear" else (1 - math.cos(math.pi * t)) / 2
      v = (1 - a) * w[0] + a * w[1]
    return v / v.sum()


@dataclasses.dataclass(frozen=True)
class Mixture:
  cfg: pipeline.DataConfig  # batch_size, seq_len, seed of the run
  names: tuple[str, ...]
  sources: tuple[pipeline.Dataset, ...]
  curriculum: Curriculum
  total_steps: int

  @property
  def tokenizer(self):
    return self.sources[0].tokenizer

  @property
  def vocab_size(self) -> int:
    return self.sources[0].vocab_size

  @property
  def unique_tokens(self) -> int:
    return sum(s.unique_tokens for s in self.sources)

  def epochs_for(self, D: float) -> float:
    """Epochs of the source repeated most, at the mixture's average weights."""
    t = (np.arange(64) + 0.5) / 64
    w = np.mean([self.curriculum.weights_at(x) for x in t], axis=0)
    return float(max(wi * D / s.epoch_tokens for wi, s in zip(w, self.sources)))

  def eval_weights(self) -> np.ndarray:
    return self.curriculum.weights_at(1.0)


def _seed(seed: int, *more: int) -> int:
  return int(np.random.SeedSequence([seed, *more]).generate_state(1, np.uint64)[0] >> 1)


def _is_corpus(spec: str) -> bool:
  return os.path.exists(spec) or any(ch in spec for ch in "*?[")


def open_mixture(base: pipeline.DataConfig, sources, curriculum: Curriculum,
                 total_steps: int) -> Mixture:
  """Opens every source (a corpus path/glob, 'stdlib' or a prepared TFDS name)."""
  if len(sources) != curriculum.n_sources:
    raise UserError(f"mixture: {len(sources)} sources but {curriculum.n_sources} weights per "
                    "stage; give one weight per source")
  opened = []
  for s, spec in enumerate(sources):
    kw = dict(corpus=spec) if _is_corpus(spec) else dict(corpus=None, name=spec)
    opened.append(pipeline.open_dataset(dataclasses.replace(base, seed=_seed(base.seed, s), **kw)))
  if len({d.tokenizer.name for d in opened}) > 1:
    raise UserError("mixture: sources must share one tokenizer")
  return Mixture(base, tuple(sources), tuple(opened), curriculum, total_steps)


def choices(mix: Mixture, step: int) -> np.ndarray:
  """Source index of every row of batch `step`, shape [B]."""
  u = np.random.Generator(np.random.Philox(key=[_seed(mix.cfg.seed), step])).random(
      mix.cfg.batch_size)
  cum = np.cumsum(mix.curriculum.weights_at(step / mix.total_steps))
  return np.minimum(np.searchsorted(cum, u, side="right"), len(cum) - 1)


def train_batch(mix: Mixture, step: int, rows: np.ndarray | None = None) -> dict:
  """Rows (default: all) of batch `step`: {'inputs', 'targets'}, int32 [R, seq_len]."""
  samples = packing.step_samples(step, mix.cfg.batch_size, rows)
  rows = np.arange(mix.cfg.batch_size) if rows is None else np.asarray(rows)
  src = choices(mix, step)[rows]
  L = mix.cfg.seq_len
  out = {k: np.zeros((len(rows), L), np.int32) for k in ("inputs", "targets")}
  for s, ds in enumerate(mix.sources):
    mine = src == s
    if mine.any():
      part = packing.windows_to_batch(ds.train, ds.order.windows(samples[mine]), L)
      for k in out:
        out[k][mine] = part[k]
  return out


def tokens_until(mix: Mixture, step: int) -> np.ndarray:
  """Tokens each source contributed in steps [0, step), from (seed, step) alone."""
  counts = np.zeros(len(mix.sources), np.int64)
  for k in range(step):
    counts += np.bincount(choices(mix, k), minlength=len(mix.sources))
  return counts * mix.cfg.seq_len
