"""A checksum of a train state's values, computed on device, recorded with each checkpoint.

For each leaf x with n elements, read as unsigned words u_0 .. u_{n-1} (its bits: float32
and int32 as uint32, bfloat16 as uint16, ...), two sums modulo 2^32:

    s = sum_i u_i              w = sum_i u_i * (2654435761 * i + 1)

Integer addition modulo 2^32 is exactly associative, so the sums do not depend on how the
leaf is sharded or in which order XLA reduces it: a state saved under one mesh and restored
under another gives the same fingerprint. A change of one element changes s by a nonzero
amount below 2^32, so any single corrupted word is detected; the odd weights make w catch
words that moved (a multiplication by an odd number is a bijection modulo 2^32).

`sweeps.train.checkpoint` stores the fingerprint in orbax's step metadata, written before the save
commits, and recomputes it after a restore: what is restored is what was saved, bit for bit.
The cost is one pass over the state on device per save and per restore.
"""

import jax
import jax.numpy as jnp
import numpy as np

_WEIGHT = np.uint32(2654435761)  # Knuth's multiplicative hash constant (odd)


def _words(x: jax.Array) -> jax.Array:
  if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  if x.dtype == jnp.bool_:
    return x.astype(jnp.uint32)
  bits = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[x.dtype.itemsize]
  # A 64-bit value becomes two 32-bit words (a trailing axis of 2).
  return jax.lax.bitcast_convert_type(x, bits).astype(jnp.uint32)


def _sums(x: jax.Array) -> jax.Array:
  u = _words(x)
  # The row-major index of each element, built from per-axis iotas rather than a reshape to
  # 1-D, which would gather a sharded leaf onto one device.
  i, stride = jnp.zeros(u.shape, jnp.uint32), 1
  for axis in reversed(range(u.ndim)):
    i = i + jax.lax.broadcasted_iota(jnp.uint32, u.shape, axis) * np.uint32(stride % 2**32)
    stride *= u.shape[axis]
  return jnp.stack([jnp.sum(u, dtype=jnp.uint32),
                    jnp.sum(u * (i * _WEIGHT + np.uint32(1)), dtype=jnp.uint32)])


@jax.jit
def _tree_sums(state):
  return jax.tree.map(_sums, state)


def of(state) -> dict[str, str]:
  """{leaf path: 'ssssssss-wwwwwwww'} (hex) for every array leaf of `state`."""
  sums = jax.device_get(_tree_sums(state))
  leaves = jax.tree_util.tree_flatten_with_path(sums)[0]
  return {jax.tree_util.keystr(path): f"{int(v[0]):08x}-{int(v[1]):08x}" for path, v in leaves}


def mismatch(saved: dict[str, str], restored: dict[str, str]) -> str | None:
  """None when equal, else a short reason naming the first leaf that differs."""
  if saved == restored:
    return None
  for key in sorted(set(saved) | set(restored)):
    if saved.get(key) != restored.get(key):
      return f"the values of {key} differ from those saved"
  return "the fingerprints differ"  # unreachable: unequal dicts differ at some key
