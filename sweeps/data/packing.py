"""Packing documents into fixed windows and a sample order that is a function of (seed, step).

Stream: documents d_0, d_1, ... (in the split's stored order) are tokenised and joined as
`d_0 EOD d_1 EOD ...` into one flat array of T tokens.

Windows: window w is `stream[w*L : w*L + L + 1]` for w in [0, W), W = (T - 1) // L, with
`inputs = window[:-1]`, `targets = window[1:]`. Consecutive windows share one token, so every
stream position after the first is a target exactly once per epoch.

Order: global sample i (row b of step k is i = k*B + b) reads window

    pi_e(i mod W),   e = i // W (the epoch),

where pi_e is a pseudo-random permutation of [0, W) keyed on (seed, e): grain's
`MapDataset.range(W).shuffle(seed=s)`, whose per-epoch Feistel permutation (index_shuffle) gives
random access in O(1). `s` is the config seed hashed through `np.random.SeedSequence`, because
grain keys epoch e with `s + e`: unhashed, seed 1 would replay seed 0 shifted by one epoch.
Batch k is therefore computed from (seed, k) alone: resuming needs no iterator replay.

Rows per process: process p of P loads the contiguous block of rows
[p*B/P, (p+1)*B/P) of each global batch (the layout of a batch sharded over a data axis whose
devices are ordered by process); `sweeps.data.pipeline.global_batch` takes the rows from the
sharding itself, which agrees with this on such meshes and also covers replicated batches.
"""

import dataclasses
import functools
from typing import Iterable

import grain
import numpy as np

from chinchax.errors import UserError


def pack(docs: Iterable[np.ndarray], eod_id: int, dtype=np.int32) -> np.ndarray:
  """Joins token arrays as `d_0 EOD d_1 EOD ...`."""
  eod = np.array([eod_id], dtype)
  parts = []
  for d in docs:
    parts.append(np.asarray(d, dtype))
    parts.append(eod)
  return np.concatenate(parts) if parts else np.zeros((0,), dtype)


def token_dtype(vocab_size: int):
  return np.uint16 if vocab_size <= 1 << 16 else np.uint32


def n_windows(n_tokens: int, seq_len: int) -> int:
  return max(n_tokens - 1, 0) // seq_len


def windows_to_batch(stream: np.ndarray, windows: np.ndarray, seq_len: int) -> dict:
  """Gathers windows (shape [R]) into {'inputs', 'targets'} of shape [R, L], int32."""
  idx_RxL1 = np.asarray(windows, np.int64)[:, None] * seq_len + np.arange(seq_len + 1)
  w_RxL1 = np.asarray(stream[idx_RxL1], np.int32)
  return {"inputs": w_RxL1[:, :-1], "targets": w_RxL1[:, 1:]}


@dataclasses.dataclass(frozen=True)
class SampleOrder:
  """Global sample index -> window index; epoch e is a permutation of [0, W) keyed on seed."""
  W: int
  seed: int

  def __post_init__(self):
    if self.W <= 0:
      raise UserError("the sample order needs at least one window")
    if self.W >= 1 << 32:
      raise UserError(f"{self.W} windows exceed the 2**32 the permutation addresses; "
                      "use a longer seq_len or cap the train tokens")
    s = int(np.random.SeedSequence(self.seed).generate_state(1)[0])
    # Not a dataclass field: the grain dataset is derived state, rebuilt from (W, seed).
    object.__setattr__(self, "_perm", grain.MapDataset.range(self.W).shuffle(seed=s))

  def __getitem__(self, i: int) -> int:
    return int(self._perm[int(i)])

  def windows(self, samples: np.ndarray) -> np.ndarray:
    """The windows of global samples, looked up a block of BLOCK samples at a time."""
    samples = np.asarray(samples, np.int64).ravel()
    if not samples.size:
      return np.zeros(0, np.int64)
    if samples.min() < 0:
      raise UserError(f"sample index {int(samples.min())} must be >= 0")
    block_S = samples // BLOCK
    if block_S.min() == block_S.max():  # a batch's rows: one block, almost always
      return _block(self, int(block_S[0]))[samples - block_S[0] * BLOCK]
    out = np.empty(len(samples), np.int64)
    for b in np.unique(block_S):
      at = block_S == b
      out[at] = _block(self, int(b))[samples[at] - b * BLOCK]
    return out


# A lookup in grain's permutation costs 4-8 us in Python; a sweep's runs share the order (one
# data seed) and each reads it from sample 0, so the blocks they read are kept (8 KB each).
BLOCK = 1024


@functools.lru_cache(maxsize=256)
def _block(order: SampleOrder, b: int) -> np.ndarray:
  """The windows of samples [b·BLOCK, (b+1)·BLOCK), read-only."""
  windows = np.array([order._perm[i] for i in range(b * BLOCK, (b + 1) * BLOCK)], np.int64)  # pylint: disable=protected-access
  windows.setflags(write=False)
  return windows


def step_samples(step: int, batch_size: int, rows: np.ndarray | None = None) -> np.ndarray:
  """Global sample indices of `rows` (default: all) of the batch at `step`."""
  if step < 0:
    raise UserError(f"step={step} must be >= 0")
  rows = np.arange(batch_size) if rows is None else np.asarray(rows)
  return step * batch_size + rows



