"""Scores a task's rows on 8 forced CPU devices under several meshes and on one device;
prints one JSON line of the largest differences (tests/tasks/test_trainer_tasks.py asserts).

A subprocess because the device count is fixed (XLA_FLAGS) before jax initialises.
"""

import json
import os

os.environ["XLA_FLAGS"] = os.environ.get(
    "XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0 "
    "--xla_llvm_disable_expensive_passes=true")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from chinchax.models import sharding, sharding as mesh_lib  # noqa: E402
from chinchax.models.config import ModelConfig  # noqa: E402
from chinchax.scaling.runs.conventions import Shape  # noqa: E402
from chinchax.sweeps.data import choices, tokenizers  # noqa: E402
from chinchax.sweeps.train import step as step_lib  # noqa: E402
from chinchax.sweeps.train import tasks  # noqa: E402

CFG = ModelConfig(Shape(d_model=32, n_layers=2, n_heads=4, d_ff=64, vocab_size=258, seq_len=32),
                  compute_dtype="float32")
OPT = optax.adamw(1e-3)
BYTES = tokenizers.BytesTokenizer()
MESHES = [(8, 1, 1), (1, 8, 1), (2, 2, 2), (2, 4, 1)]


def score(mesh, params, rows):
  step = step_lib.make_eval_step(CFG, OPT, mesh, sharding.RULES, "fsdp")
  bs = sharding.batch_sharding(mesh, sharding.RULES)
  return tasks.log_likelihoods(step, params, tasks.stack((rows,), 8, BYTES.pad_id), bs)[0]


def main() -> None:
  assert jax.device_count() == 8
  task = choices.read("stdlib_next_line")
  rows = choices.encode(task, BYTES, CFG.shape.seq_len)
  one = mesh_lib.make_mesh((1, 1, 1), devices=jax.devices()[:1])
  state = step_lib.init_train_state(CFG, OPT, one, jax.random.key(1))
  params = jax.device_get(state["params"])
  ref = score(one, params, rows)
  out = {"rows": int(rows.n_rows), "summary_1": list(tasks.summary(rows, ref)), "meshes": {}}
  for shape in MESHES:
    got = score(mesh_lib.make_mesh(shape), params, rows)
    out["meshes"][str(shape)] = {"max_abs": float(np.max(np.abs(got - ref))),
                                 "summary": list(tasks.summary(rows, got))}
  print(json.dumps(out))


if __name__ == "__main__":
  main()
