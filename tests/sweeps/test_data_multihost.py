"""Multi-host batch assembly: rows per process from the sharding, global arrays from them."""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chinchax.errors import UserError
from chinchax.sweeps.data import multihost
from chinchax.sweeps.data import packing
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.data import tokenizers


def toy(B=8, L=8, T=2000):
  cfg = pipeline.DataConfig(seq_len=L, batch_size=B, seed=0)
  stream = np.arange(T, dtype=np.int64) % 258
  order = packing.SampleOrder(packing.n_windows(T, L), 0)
  return pipeline.Dataset(cfg, "toy", tokenizers.BytesTokenizer(), stream, stream, order)


class FakeProcessSharding:
  """What one process of P sees of a sharding: only its own devices' indices."""

  def __init__(self, devices_indices, process_of_device, process_index):
    self._map = {d: i for d, i in devices_indices.items()
                 if process_of_device[d] == process_index}

  def addressable_devices_indices_map(self, global_shape):
    del global_shape
    return self._map


def fake_mesh_indices(n_data, n_model, B):
  """devices_indices_map of P(('data',)) on a (data, model) mesh of fake device ids."""
  per = B // n_data
  return {(d, m): (slice(d * per, (d + 1) * per), slice(None))
          for d in range(n_data) for m in range(n_model)}


def test_local_rows_match_process_rows_on_a_data_parallel_mesh():
  B, P_ = 16, 4
  idx = fake_mesh_indices(n_data=8, n_model=1, B=B)  # 2 devices per process, in order
  for p in range(P_):
    s = FakeProcessSharding(idx, {d: d[0] // 2 for d in idx}, p)
    # Process p of P holds the contiguous block of rows [p·B/P, (p+1)·B/P).
    np.testing.assert_array_equal(multihost.local_rows(s, (B, 8)),
                                  np.arange(p * B // P_, (p + 1) * B // P_))


def test_local_rows_when_model_axis_spans_processes():
  # Data axis 2, model axis 2 with the model axis across processes: both processes of a
  # data row hold the same rows, and the union over processes is the whole batch.
  B = 8
  idx = fake_mesh_indices(n_data=2, n_model=2, B=B)
  procs = {d: d[1] for d in idx}
  rows = [multihost.local_rows(FakeProcessSharding(idx, procs, p), (B, 4)) for p in (0, 1)]
  np.testing.assert_array_equal(rows[0], np.arange(8))
  np.testing.assert_array_equal(rows[1], np.arange(8))


def test_global_batch_on_this_process_is_the_whole_batch():
  ds = toy()
  mesh = Mesh(np.array(jax.devices()), ("data",))
  got = multihost.global_batch(ds, 5, NamedSharding(mesh, P("data")))
  want = pipeline.train_batch(ds, 5)
  for k in ("inputs", "targets"):
    assert got[k].shape == (8, 8) and got[k].dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got[k]), want[k])


@pytest.mark.slow
def test_global_batch_on_four_devices_and_indivisible_batch():
  code = (
      "import jax, numpy as np\n"
      "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
      "from chinchax.errors import UserError\n"
      "from chinchax.sweeps.data import multihost, packing, pipeline, tokenizers\n"
      "stream = np.arange(3000) % 258\n"
      "def ds(B):\n"
      "  cfg = pipeline.DataConfig(seq_len=8, batch_size=B)\n"
      "  return pipeline.Dataset(cfg, 't', tokenizers.BytesTokenizer(), stream, stream,\n"
      "                          packing.SampleOrder(packing.n_windows(3000, 8), 0))\n"
      "mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ('data', 'model'))\n"
      "s = NamedSharding(mesh, P(('data', 'model')))\n"
      "g = multihost.global_batch(ds(8), 3, s)['targets']\n"
      "assert len(g.addressable_shards) == 4 and g.addressable_shards[0].data.shape == (2, 8)\n"
      "assert (np.asarray(g) == pipeline.train_batch(ds(8), 3)['targets']).all()\n"
      "e = multihost.global_eval_batch(ds(8), 1, NamedSharding(mesh, P('data')))['inputs']\n"
      "assert (np.asarray(e) == pipeline.eval_batch(ds(8), 1)['inputs']).all()\n"
      "try:\n"
      "  multihost.global_batch(ds(6), 0, s)\n"
      "except UserError as err:\n"
      "  print('refused:', err)\n")
  env = dict(os.environ, PYTHONPATH=os.getcwd(), JAX_PLATFORMS="cpu",
             XLA_FLAGS="--xla_force_host_platform_device_count=4")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "refused: batch 6 does not split over 4 data-parallel shards" in out.stdout


def test_check_batch_counts_data_parallel_shards():
  mesh = Mesh(np.array(jax.devices()), ("data",))
  assert multihost.batch_shards(NamedSharding(mesh, P("data")), 8) == jax.device_count()
  assert multihost.batch_shards(NamedSharding(mesh, P()), 8) == 1
  sharding = NamedSharding(mesh, P("data"))
  with pytest.raises(UserError, match=f"does not split over {jax.device_count() + 1}"):
    multihost.check_batch(jax.device_count() + 2, type(
        "Wider", (), {"device_set": set(range(jax.device_count() + 1)),
                      "shard_shape": lambda self, shape: (1, shape[1])})(), 8)
  multihost.check_batch(2 * jax.device_count(), sharding, 8)
