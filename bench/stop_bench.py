"""What the multi-host stop agreement costs a train step, against the smoke model's step.

    python bench/stop_bench.py [--processes=2] [--devices=2] [--checks=200000] [--steps=50]

Starts a job of P processes x K CPU devices on loopback (launch/multiproc.py). In each
process: the time of one stop check of the train loop (`watch.stop_reason`, what every step
pays on several processes) against the plain flag read one process does, then the time of a
train step of the smoke sweep's largest model (d_model 80, two layers, batch 8 x 64, fsdp over
every device of the job), the same step the sweep runs. Prints microseconds per check, ms per
step and the ratio, from process 0.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child(checks: int, steps: int) -> None:
  from chinchax.sweeps.hosts import distributed, watch  # pylint: disable=g-import-not-at-top
  distributed.join()
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from chinchax.models import sharding, sharding as mesh_lib  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.runs import conventions  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import optimizer, step as step_lib  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import stop as stop_lib
  from chinchax.models.config import ModelConfig  # pylint: disable=g-import-not-at-top

  say = lambda m: print(f"{time.strftime('%X')} {m}", file=sys.stderr, flush=True)
  say("joined")
  flag = stop_lib.StopFlag()
  t = time.perf_counter()
  for _ in range(checks):
    bool(flag)
  plain = (time.perf_counter() - t) / checks
  t = time.perf_counter()
  for _ in range(checks):
    watch.stop_reason(flag)
  agreed = (time.perf_counter() - t) / checks

  say("checks timed")
  shape = conventions.Shape(d_model=80, n_layers=2, n_heads=10, d_ff=216, vocab_size=258,
                            seq_len=64)
  cfg = ModelConfig(shape=shape, compute_dtype="float32")
  mesh = mesh_lib.make_mesh((1, -1, 1))
  opt = optimizer.OptimizerConfig(peak_lr=1e-2, warmup_steps=10)
  tx = optimizer.make(opt)
  state = step_lib.init_train_state(cfg, tx, mesh, jax.random.key(0), sharding.RULES, "fsdp")
  train_step = step_lib.make_train_step(cfg, tx, mesh, sharding.RULES, "fsdp",
                                        global_batch_size=8)
  bs = sharding.batch_sharding(mesh, sharding.RULES)
  rows = np.random.default_rng(0).integers(0, 258, (8, 64), dtype=np.int32)
  local = rows[np.array(sorted({r for idx in bs.addressable_devices_indices_map((8, 64)).values()
                                for r in range(*idx[0].indices(8))}))]
  batch = {k: jax.make_array_from_process_local_data(bs, local, (8, 64))
           for k in ("inputs", "targets")}
  say("state ready")
  for _ in range(5):
    state, m = train_step(state, batch, np.float32(1e-3))
  jax.block_until_ready(m["loss"])
  t = time.perf_counter()
  for _ in range(steps):
    state, m = train_step(state, batch, np.float32(1e-3))
    # Waited for each step: 50 steps queued at once on this CPU backend with gloo hung in one
    # try (jax 0.10.2), which chinchax's loop, whose batches are made per step, did not.
    jax.block_until_ready(m["loss"])
  jax.block_until_ready(m["loss"])
  per_step = (time.perf_counter() - t) / steps
  if jax.process_index() == 0:
    print(f"{jax.process_count()} processes x {jax.local_device_count()} devices: stop check "
          f"{agreed * 1e6:.2f} us (one process's plain flag read: {plain * 1e6:.2f} us); "
          f"smoke-model train step (d_model 80, batch 8 x 64, fsdp {jax.device_count()}) "
          f"{per_step * 1e3:.2f} ms; the check is {agreed / per_step:.3%} of a step", flush=True)


def main() -> int:
  p = argparse.ArgumentParser()
  p.add_argument("--processes", type=int, default=2)
  p.add_argument("--devices", type=int, default=2)
  p.add_argument("--checks", type=int, default=200_000)
  p.add_argument("--steps", type=int, default=50)
  p.add_argument("--child", action="store_true")
  a = p.parse_args()
  if a.child:
    child(a.checks, a.steps)
    return 0
  from chinchax.launch import multiproc  # pylint: disable=g-import-not-at-top
  return multiproc.main([f"--processes={a.processes}", f"--devices={a.devices}", "--",
                         sys.executable, os.path.abspath(__file__), "--child",
                         f"--checks={a.checks}", f"--steps={a.steps}"])


if __name__ == "__main__":
  sys.exit(main())
