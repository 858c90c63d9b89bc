"""Global batches across processes: each process loads only the rows its devices hold.

The rows come from the sharding itself: process p loads the sorted union of the batch-axis
slices of its addressable devices, then `jax.make_array_from_process_local_data` places them.
On a mesh whose data axis is laid out by process this is the contiguous block
rows [p*B/P, (p+1)*B/P); when the batch is replicated across
processes (e.g. a model axis spans hosts) each replica loads the same rows, as JAX requires.
Every row is still global sample `step*B + row`, so the global batch does not depend on the
number of processes. Sequence-axis sharding is handled by JAX from the full-length rows.
"""

import jax
import numpy as np

from chinchax.errors import UserError
from chinchax.models import sharding as sharding_lib
from chinchax.sweeps.data import pipeline


def batch_shards(sharding: jax.sharding.Sharding, seq_len: int) -> int:
  """How many ways the sharding splits the batch axis (the data-parallel degree)."""
  n = len(sharding.device_set)
  return n // sharding.shard_shape((n, seq_len))[0]


def check_batch(batch_size: int, sharding: jax.sharding.Sharding, seq_len: int) -> None:
  sharding_lib.check_batch(batch_size, batch_shards(sharding, seq_len))


def local_rows(sharding: jax.sharding.Sharding, global_shape: tuple[int, int]) -> np.ndarray:
  """Sorted global rows held by this process's devices."""
  rows = set()
  for index in sharding.addressable_devices_indices_map(global_shape).values():
    rows.update(range(*index[0].indices(global_shape[0])))
  return np.array(sorted(rows), np.int64)


def _assemble(batch_fn, ds: pipeline.Dataset, k: int, sharding) -> dict:
  B, L = ds.cfg.batch_size, ds.cfg.seq_len
  check_batch(B, sharding, L)
  rows = local_rows(sharding, (B, L))
  local = batch_fn(ds, k, rows)
  return {key: jax.make_array_from_process_local_data(sharding, x, (B, L))
          for key, x in local.items()}


def global_batch(ds: pipeline.Dataset, step: int, sharding: jax.sharding.Sharding) -> dict:
  """Training batch `step` as global jax.Arrays {'inputs', 'targets'} of shape [B, L]."""
  return _assemble(pipeline.train_batch, ds, step, sharding)


def global_chunk(batch_fn, ds, steps: range, K: int, sharding: jax.sharding.Sharding,
                 chunk_sharding: jax.sharding.Sharding) -> dict:
  """Training batches `steps` (at most K of them) as global jax.Arrays of shape [K, B, L]:
  row i is batch steps[i], `batch_fn(ds, step, rows)`'s, on `chunk_sharding` (`sharding`
  with a leading unsharded axis). Rows past len(steps) are zeros, padding a short chunk to the
  one shape its program was compiled for."""
  B, L = ds.cfg.batch_size, ds.cfg.seq_len
  check_batch(B, sharding, L)
  rows = local_rows(sharding, (B, L))
  out = {}
  for i, step in enumerate(steps):
    for key, x in batch_fn(ds, step, rows).items():
      out.setdefault(key, np.zeros((K, len(rows), L), x.dtype))[i] = x
  return {key: jax.make_array_from_process_local_data(chunk_sharding, x, (K, B, L))
          for key, x in out.items()}


def global_eval_batch(ds: pipeline.Dataset, k: int, sharding: jax.sharding.Sharding) -> dict:
  """Eval batch k (see `pipeline.eval_batch`) as global jax.Arrays."""
  if k < 0:
    raise UserError(f"eval batch index {k} must be >= 0")
  return _assemble(pipeline.eval_batch, ds, k, sharding)
