"""sweeps.accel.compile_cache: a CPU program compiled for some devices is read back from the
persistent cache by a fresh process that runs it on others, with the right values there.

Each process is a fresh `python -c` of 4 CPU devices (jax's device count is fixed once it
starts) sharing one cache folder: the first compiles a one-device program on device 1 and a
two-device program (a sum across its shards: a collective) on devices 0 and 1; the second
compiles the same programs for device 0, and for devices 2 and 3. The folder is chinchax's
(`compile_cache.enable(DIR)`) or one the user gave jax before `enable()`. Then the key itself,
on a stand-in for jax's: what it is given on a CPU, off it, and for options it cannot read.
"""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

SCRIPT = r"""
import json, sys
import jax
jax.config.update("jax_num_cpu_devices", 4)
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from chinchax.sweeps.accel import compile_cache

cache, one, how = sys.argv[1], int(sys.argv[2]), sys.argv[4]
pair = [int(i) for i in sys.argv[3].split(",")]
if how == "chinchax":
  compile_cache.enable(cache)
else:  # the user's own cache folder, then chinchax's enable; or jax's own key alone
  jax.config.update("jax_compilation_cache_dir", cache)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  if how == "user":
    compile_cache.enable()
hits = []
jax.monitoring.register_event_listener(
    lambda name, **kw: hits.append(1) if name == "/jax/compilation_cache/cache_hits" else None)

def compiled(f, *args):
  before = len(hits)
  exe = jax.jit(f).lower(*args).compile()
  return exe, len(hits) - before

x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
d = jax.devices()[one]
exe, hit_one = compiled(lambda a: jnp.tanh(a) @ a.T + 1.0, jax.device_put(x, d))
y = exe(jax.device_put(x, d))

mesh = Mesh(np.array([jax.devices()[i] for i in pair]), ("data",))
rows = jax.device_put(np.arange(16, dtype=np.float32).reshape(8, 2), NamedSharding(mesh, P("data")))
exe2, hit_pair = compiled(lambda r: jnp.sum(r * r, axis=0), rows)
s = exe2(rows)
print(json.dumps({"hit_one": hit_one, "hit_pair": hit_pair, "one": np.asarray(y).tolist(),
                  "one_on": sorted(d.id for d in y.devices()), "pair": np.asarray(s).tolist(),
                  "pair_on": sorted(d.id for d in s.devices())}))
"""


def _run(cache, one, pair, how="chinchax") -> dict:
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  env.pop("CHINCHAX_COMPILE_CACHE", None)  # the folder is the argument
  p = subprocess.run([sys.executable, "-c", SCRIPT, str(cache), str(one), pair, how], env=env,
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  return json.loads(p.stdout.strip().splitlines()[-1])


def _expected():
  x = np.arange(12, dtype=np.float64).reshape(3, 4) / 7
  rows = np.arange(16, dtype=np.float64).reshape(8, 2)
  return np.tanh(x) @ x.T + 1.0, (rows * rows).sum(axis=0)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["chinchax", "user"])  # chinchax's folder, or the user's own
def test_an_entry_compiled_on_some_cpu_devices_serves_a_process_on_others(tmp_path, how):
  first = _run(tmp_path, 1, "0,1", how)
  assert (first["hit_one"], first["hit_pair"]) == (0, 0)  # an empty cache compiles both
  second = _run(tmp_path, 0, "2,3", how)
  assert second["hit_one"] >= 1 and second["hit_pair"] >= 1
  one, pair = _expected()
  assert second["one_on"] == [0] and second["pair_on"] == [2, 3]
  np.testing.assert_allclose(second["one"], one, rtol=1e-6)
  np.testing.assert_allclose(second["pair"], pair, rtol=1e-6)


@pytest.mark.slow
def test_jax_alone_keys_cpu_entries_by_device(tmp_path):
  """What the wrapper is for: with jax's own key, the second process compiles again."""
  _run(tmp_path, 1, "0,1", "jax")
  second = _run(tmp_path, 0, "2,3", "jax")
  assert (second["hit_one"], second["hit_pair"]) == (0, 0), (
      "this jax keys CPU entries without their devices: compile_cache's own key can go")


def _key_seen(monkeypatch):
  """Installs the CPU key over a stand-in for jax's, which records the options it is given."""
  from jax._src import cache_key  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.accel import compile_cache  # pylint: disable=g-import-not-at-top
  seen = []
  monkeypatch.setattr(cache_key, "get", lambda m, d, o, b, *a, **k: seen.append(o) or "key")
  assert compile_cache._one_key_for_any_cpu_devices()  # pylint: disable=protected-access
  return cache_key.get, seen


def _options(device_id):
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  o = xla_client.CompileOptions()
  o.device_assignment = xla_client.DeviceAssignment.create(np.array([[device_id]]))
  return o


def test_the_cpu_key_drops_device_ids_and_leaves_the_callers_options(monkeypatch):
  key, seen = _key_seen(monkeypatch)
  cpu, gpu = types.SimpleNamespace(platform="cpu"), types.SimpleNamespace(platform="gpu")
  o = _options(3)
  assert key(None, None, o, cpu) == "key"
  ids = lambda opts: opts.device_assignment.serialize()
  assert seen[0] is not o and ids(seen[0]) == ids(_options(0))
  assert ids(o) == ids(_options(3))  # the compile itself gets the caller's devices
  assert key(None, None, o, gpu) == "key" and seen[1] is o  # jax's own rule off the CPU


def test_options_it_cannot_read_get_jaxs_own_key(monkeypatch):
  key, seen = _key_seen(monkeypatch)
  odd = types.SimpleNamespace()  # no device_assignment, as another jax's options might be
  assert key(None, None, odd, types.SimpleNamespace(platform="cpu")) == "key" and seen == [odd]
