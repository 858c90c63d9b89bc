"""A checksum of a train state's values, computed on the host, recorded with each checkpoint.

For each leaf x with n elements, read as unsigned words u_0 .. u_{n-1} (its bits: float32
and int32 as uint32, bfloat16 as uint16, ...), two sums modulo 2^32:

    s = sum_i u_i              w = sum_i u_i * (2654435761 * i + 1)

Integer addition modulo 2^32 is exactly associative, so the sums do not depend on how the
leaf is sharded or in which order its parts are added: a state saved under one mesh and restored
under another gives the same fingerprint. A change of one element changes s by a nonzero
amount below 2^32, so any single corrupted word is detected; the odd weights make w catch
words that moved (a multiplication by an odd number is a bijection modulo 2^32).

`sweeps.train.checkpoint` stores the fingerprint in orbax's step metadata, written before the save
commits, and recomputes it after a restore: what is restored is what was saved, bit for bit.

It is computed on the host, in numpy, shard by shard: each process sums the shards of its
devices that are their first replica, at their global indices, and the processes add their
sums (an allgather, on several processes only). On the device it was an XLA program of its
own per model size (the smoke sweep compiled nine); here it compiles nothing, at the cost of
one copy of the state to the host per save (which copies it there anyway) and per restore.
"""

import jax
import numpy as np

_WEIGHT = np.uint32(2654435761)  # Knuth's multiplicative hash constant (odd)


def _words(x: np.ndarray) -> np.ndarray:
  if x.dtype == np.bool_:
    return x.astype(np.uint32)
  bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint32}[x.dtype.itemsize]
  u = np.ascontiguousarray(x).view(bits)
  if x.dtype.itemsize == 8:  # a 64-bit value becomes two 32-bit words (a trailing axis of 2)
    u = u.reshape(*x.shape, 2)
  return u.astype(np.uint32)


def _sums(x: np.ndarray, start: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
  """[s, w] of one block of a leaf of `shape`, the block at `start`, modulo 2^32."""
  u = _words(x)
  if u.ndim > len(shape):
    shape, start = (*shape, 2), (*start, 0)
  # Each element's row-major index in the whole leaf, from per-axis ranges (uint32 wraps).
  i, stride = np.zeros(u.shape, np.uint32), 1
  for axis in reversed(range(u.ndim)):
    at = (np.arange(u.shape[axis], dtype=np.uint64) + start[axis]).astype(np.uint32)
    i += at.reshape([-1 if a == axis else 1 for a in range(u.ndim)]) * np.uint32(stride % 2**32)
    stride *= shape[axis]
  return np.array([u.sum(dtype=np.uint32), (u * (i * _WEIGHT + np.uint32(1))).sum(dtype=np.uint32)],
                  np.uint32)


def _leaf_sums(x) -> np.ndarray:
  """[s, w] of the shards of `x` this process holds first (each shard is summed once)."""
  if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  if not isinstance(x, jax.Array):
    x = np.asarray(x)
    return _sums(x, (0,) * x.ndim, x.shape)
  total = np.zeros(2, np.uint32)
  for shard in x.addressable_shards:
    if shard.replica_id == 0:
      start = tuple(s.indices(n)[0] for s, n in zip(shard.index, x.shape))
      total += _sums(np.asarray(shard.data), start, x.shape)
  return total


def of(state) -> dict[str, str]:
  """{leaf path: 'ssssssss-wwwwwwww'} (hex) for every array leaf of `state`."""
  leaves = jax.tree_util.tree_flatten_with_path(state)[0]
  sums = np.stack([_leaf_sums(x) for _, x in leaves]) if leaves else np.zeros((0, 2), np.uint32)
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    sums = np.asarray(multihost_utils.process_allgather(sums)).sum(axis=0, dtype=np.uint32)
  return {jax.tree_util.keystr(path): f"{int(v[0]):08x}-{int(v[1]):08x}"
          for (path, _), v in zip(leaves, sums)}


def mismatch(saved: dict[str, str], restored: dict[str, str]) -> str | None:
  """None when equal, else a short reason naming the first leaf that differs."""
  if saved == restored:
    return None
  for key in sorted(set(saved) | set(restored)):
    if saved.get(key) != restored.get(key):
      return f"the values of {key} differ from those saved"
  return "the fingerprints differ"  # unreachable: unequal dicts differ at some key
