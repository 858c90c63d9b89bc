"""Sequence-length warmup: short contexts first, the full one later, at constant tokens per batch.

Schedule. With full length L, start length L_0 = L / 2^J (J >= 1 doublings) and a warmup of
S = round(warmup_fraction · total_steps) steps, stage j = 0..J-1 uses length L_0 · 2^j for
steps [round(j·S/J), round((j+1)·S/J)), and every step from S on uses L.

Batches. Batch k at length L_k = L / r is batch k of the full-length pipeline, each of its B
rows of L input/target tokens cut into r consecutive rows of L_k: the same tokens in the same
order (so the sample order stays a function of (seed, k) and resume stays exact), B·r rows of
L_k, tokens per batch B·L at every length. Targets stay the next token of their inputs: a
window's L+1 tokens give inputs w[:-1] and targets w[1:], and cutting both at the same places
keeps every pair. What changes is only the context a token sees (at most L_k).

FLOPs. A step at length L_k costs B·L tokens × `scaling.runs.conventions.flops_per_token` of the
shape with seq_len = L_k (the attention logits and reductions scale with the context; 6N does
not). `flops_until(k)` sums this in closed form over the stages.

Each length is one compiled train step: J + 1 shapes in all.
"""

import dataclasses

import jax
import numpy as np

from chinchax.scaling.runs import conventions
from chinchax.errors import UserError
from chinchax.sweeps.data import multihost
from chinchax.sweeps.data import pipeline


@dataclasses.dataclass(frozen=True)
class Schedule:
  seq_len: int                        # L, the full length
  stages: tuple[tuple[int, int], ...]  # (first step, length), ascending; the last is (S, L)

  def length_at(self, step: int) -> int:
    L = self.stages[0][1]
    for first, length in self.stages:
      if step >= first:
        L = length
    return L


def make(seq_len: int, seq_len_start: int, warmup_fraction: float, total_steps: int) -> Schedule:
  """The doubling schedule; seq_len_start = 0 or = seq_len means no warmup (one stage)."""
  if not seq_len_start or seq_len_start == seq_len:
    return Schedule(seq_len, ((0, seq_len),))
  ratio = seq_len // seq_len_start if seq_len_start > 0 else 0
  if seq_len_start <= 0 or seq_len % seq_len_start or ratio & (ratio - 1) or ratio < 2:
    raise UserError(f"seq_len_start={seq_len_start} must divide seq_len={seq_len} by a power "
                    "of two (the warmup doubles the length)")
  if not 0 < warmup_fraction <= 1:
    raise UserError(f"seq_len_warmup_fraction={warmup_fraction} must be in (0, 1]")
  J = ratio.bit_length() - 1
  S = round(warmup_fraction * total_steps)
  stages = [(round(j * S / J), seq_len_start << j) for j in range(J)] + [(S, seq_len)]
  # Drop stages that a short run leaves empty (two stages starting at the same step).
  stages = [s for i, s in enumerate(stages) if i + 1 == len(stages) or stages[i + 1][0] > s[0]]
  return Schedule(seq_len, tuple(stages))


def shape_at(shape: conventions.Shape, L: int) -> conventions.Shape:
  return dataclasses.replace(shape, seq_len=L)


def flops_until(sched: Schedule, shape: conventions.Shape, step: int, tokens_per_step: int,
                convention: str = "chinchilla") -> float:
  """Training FLOPs of steps [0, step) at the lengths actually used."""
  total = 0.0
  bounds = [first for first, _ in sched.stages[1:]] + [max(step, sched.stages[-1][0])]
  for (first, L), end in zip(sched.stages, bounds):
    n = max(0, min(end, step) - first)
    total += n * tokens_per_step * conventions.flops_per_token(shape_at(shape, L), convention)
  return total


def cut(batch: dict, L: int) -> dict:
  """Rows of full length cut into consecutive rows of length L: [R, L_full] -> [R·r, L]."""
  return {k: np.ascontiguousarray(x).reshape(-1, L) for k, x in batch.items()}


def global_batch(ds, step: int, sharding: jax.sharding.Sharding, L: int,
                 batch_fn=pipeline.train_batch) -> dict:
  """Training batch `step` at length L as global jax.Arrays of shape [B·r, L], r = L_full / L.

  `ds` is a `pipeline.Dataset` (or anything with `cfg.batch_size`, `cfg.seq_len` that
  `batch_fn(ds, step, rows)` reads). Each process loads the full-length rows its short rows
  come from: row j of the short batch is piece j mod r of full row j // r.
  """
  B, L_full = ds.cfg.batch_size, ds.cfg.seq_len
  rows = B * (L_full // L)
  multihost.check_batch(rows, sharding, L)
  local = short_rows_batch(ds, step, multihost.local_rows(sharding, (rows, L)), L, batch_fn)
  return {k: jax.make_array_from_process_local_data(sharding, x, (rows, L))
          for k, x in local.items()}


def short_rows_batch(ds, step: int, short_rows: np.ndarray, L: int,
                     batch_fn=pipeline.train_batch) -> dict:
  """Rows `short_rows` (sorted) of batch `step` at length L, loading only their full rows."""
  r = ds.cfg.seq_len // L
  full_rows = np.unique(short_rows // r)
  local = cut(batch_fn(ds, step, full_rows), L)
  pos = np.searchsorted(full_rows, short_rows // r) * r + short_rows % r
  return {k: x[pos] for k, x in local.items()}
