"""One process of a test's multi-host job: which rows of a batch this process loads, and
whether the global batch they make is the single-process batch.

Prints one JSON line: {"process", "rows": {mesh: [global rows loaded here]}, "equal": {mesh:
the global batch, reduced on the devices of every process, equals the numpy batch}}.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from chinchax.sweeps.hosts import distributed  # noqa: E402

if __name__ == "__main__":
  distributed.join()
  import jax  # noqa: E402
  import jax.numpy as jnp  # noqa: E402
  import numpy as np  # noqa: E402
  from chinchax.models import sharding, sharding as mesh_lib  # noqa: E402
  from chinchax.sweeps.data import multihost, packing, pipeline, tokenizers  # noqa: E402

  B, L, T = 8, 8, 3000
  stream = np.arange(T, dtype=np.int64) * 7 % 258
  ds = pipeline.Dataset(pipeline.DataConfig(seq_len=L, batch_size=B), "toy",
                        tokenizers.BytesTokenizer(), stream, stream,
                        packing.SampleOrder(packing.n_windows(T, L), 0))
  loaded = []

  def recording(ds_, k, rows):
    loaded.append((k, [int(r) for r in rows]))
    return pipeline.train_batch(ds_, k, rows)

  @jax.jit
  def weighted(x):  # every element weighted by its global position: a misplaced row shows
    i = jax.lax.broadcasted_iota(jnp.int32, x.shape, 0)
    j = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
    return jnp.sum(x * (i * 1000 + j + 1))

  out = {"process": jax.process_index(), "rows": {}, "equal": {}}
  for name, axes in (("data", (-1, 1, 1)), ("fsdp", (1, -1, 1))):
    s = sharding.batch_sharding(mesh_lib.make_mesh(axes), sharding.RULES)
    loaded.clear()
    ok = True
    for step in (0, 5):
      g = multihost._assemble(recording, ds, step, s)["inputs"]  # noqa: SLF001
      want = pipeline.train_batch(ds, step)["inputs"].astype(np.int64)
      i, j = np.indices(want.shape)
      ok &= int(weighted(g)) == int(np.sum(want * (i * 1000 + j + 1)))
    out["rows"][name] = sorted({r for _, rows in loaded for r in rows})
    out["equal"][name] = bool(ok)
  print(json.dumps(out), flush=True)
