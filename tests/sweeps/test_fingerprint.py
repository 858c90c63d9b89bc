"""sweeps.train.fingerprint: the state checksum each checkpoint records, against numpy, and its
independence of how a leaf is sharded (8 fake CPU devices, in a subprocess)."""

import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from chinchax.sweeps.train import fingerprint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _reference(words: np.ndarray) -> str:
  """The two sums of the module docstring, in exact integer arithmetic."""
  u = [int(x) for x in words.ravel()]
  s = sum(u) % 2**32
  w = sum(x * ((2654435761 * i + 1) % 2**32) for i, x in enumerate(u)) % 2**32
  return f"{s:08x}-{w:08x}"


def test_matches_exact_integer_sums_for_each_dtype():
  rng = np.random.default_rng(0)
  x32 = rng.standard_normal((5, 7)).astype(np.float32)
  xbf = rng.standard_normal((3, 4)).astype(jnp.bfloat16)
  xi = rng.integers(-2**31, 2**31, (6,), dtype=np.int64).astype(np.int32)
  xb = rng.random((2, 3)) > 0.5
  got = fingerprint.of({"a": jnp.asarray(x32), "b": jnp.asarray(xbf), "c": jnp.asarray(xi),
                        "d": jnp.asarray(xb)})
  assert got == {"['a']": _reference(x32.view(np.uint32)),
                 "['b']": _reference(xbf.view(np.uint16)),
                 "['c']": _reference(xi.view(np.uint32)),
                 "['d']": _reference(xb.astype(np.uint32))}


def test_every_single_bit_flip_and_a_swap_are_caught():
  x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
  base = fingerprint.of({"x": jnp.asarray(x)})
  for bit in range(32):
    y = x.copy().view(np.uint32)
    y[2, 5] ^= np.uint32(1 << bit)
    assert fingerprint.mismatch(base, fingerprint.of({"x": jnp.asarray(y.view(np.float32))}))
  y = x.copy()
  y[0, 0], y[3, 7] = x[3, 7], x[0, 0]  # same words, moved: only the weighted sum sees it
  swapped = fingerprint.of({"x": jnp.asarray(y)})
  assert swapped["['x']"][:8] == base["['x']"][:8]
  assert fingerprint.mismatch(base, swapped) == "the values of ['x'] differ from those saved"


SHARDED = r"""
import json, jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from chinchax.sweeps.train import fingerprint
x = np.random.default_rng(2).standard_normal((16, 24)).astype(np.float32)
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
out = {}
for name, spec in [("one device", None), ("rows", P("a")), ("cols", P(None, "b")),
                   ("both", P("a", "b")), ("both transposed", P("b", "a"))]:
  arr = jax.device_put(x, jax.devices()[0] if spec is None else NamedSharding(mesh, spec))
  out[name] = fingerprint.of({"x": arr})["['x']"]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_same_values_give_the_same_fingerprint_however_sharded():
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu",
             XLA_FLAGS="--xla_force_host_platform_device_count=8")
  p = subprocess.run([sys.executable, "-c", SHARDED], env=env, cwd=ROOT, capture_output=True,
                     text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  got = json.loads(p.stdout.strip().splitlines()[-1])
  x = np.random.default_rng(2).standard_normal((16, 24)).astype(np.float32)
  assert set(got.values()) == {_reference(x.view(np.uint32))}, got
