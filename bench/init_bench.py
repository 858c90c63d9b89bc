"""The train state's init on an accelerator: made on its devices against made by the host's CPU
and put on them (`sweeps.train.step.host_for_init`), each compiled cold, for recipe shapes.

    python bench/init_bench.py                        # on a GPU or TPU host: 2M ... 151M
    python bench/init_bench.py --sizes=2e6,5e7        # N targets (vocab 32000, context 2048)

For each size, in one process with no persistent compile cache, it times the first call of
each init (compile and run, the state on the devices) and a second call (run alone), and
prints one line per path. The first size pays the process's first compile on the device too:
a throwaway size first (the default's 1.1M) keeps that out of the others. On a CPU-only
machine both paths run on the CPU (the mesh is the CPU, the host its first device): a check
that the script runs, not a figure for an accelerator.

On one H200 (2026-11-28; 16 CPU cores, jax 0.11.2), first call on the devices against through
the host's CPU: 2.1M 5.5 s against 1.2 s, 5.9M 5.0 against 2.0, 20M 10.3 against 2.4, 50M
18.6 against 5.0; in another process after a 50M init, 151M (a 1.8 GB state) 3.4 against 4.0.
Hence `HOST_INIT_MAX_BYTES` = 1 GiB.
"""
# pylint: disable=wrong-import-position,protected-access

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's chinchax, not an installed one

import jax  # noqa: E402
import numpy as np  # noqa: E402

from chinchax.models import sharding as mesh_lib  # noqa: E402
from chinchax.models.config import ModelConfig, shape_for_params  # noqa: E402
from chinchax.scaling.numerics import fmt  # noqa: E402
from chinchax.sweeps.train import optimizer, step as step_lib  # noqa: E402


def timed(init):
  """(first call s, second call s, the state of the first call)."""
  t = time.perf_counter()
  state = jax.block_until_ready(init(jax.random.key(0)))
  first = time.perf_counter() - t
  t = time.perf_counter()
  jax.block_until_ready(init(jax.random.key(1)))
  return first, time.perf_counter() - t, state


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--sizes", default="1.1e6,2e6,6e6,2e7,5e7,1.5e8",
                 help="comma-separated N targets; the first also warms the device up")
  args = p.parse_args()
  mesh = mesh_lib.make_mesh((1, -1, 1))
  host = jax.local_devices(backend="cpu")[0]
  print(f"devices: {mesh.size} x {mesh.devices.flat[0].device_kind}; host: {host}", flush=True)
  rules = step_lib._hashable(mesh_lib.RULES)
  for N in (float(x) for x in args.sizes.split(",")):
    cfg = ModelConfig(shape_for_params(N, vocab_size=32000, seq_len=2048),
                      compute_dtype="bfloat16").validate()
    tx = optimizer.make(optimizer.OptimizerConfig())
    abstract, _ = step_lib.state_shardings(cfg, tx, mesh)
    gib = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(abstract)) / 2**30
    states = []
    for where, at in (("devices", None), ("host", host)):
      # A fresh optimizer each time: `_init_fn` memoises on it, so nothing is reused.
      init = step_lib._init_fn(cfg, optimizer.make(optimizer.OptimizerConfig()), mesh,
                               rules, "fsdp", at)
      first, again, state = timed(init)
      on = sorted({d.platform for x in jax.tree.leaves(state) for d in x.devices()})
      print(f"N={fmt.num(N)} ({gib:.2f} GiB of state) made on the {where}: first call {first:.2f} s "
            f"(compile + run), second {again:.2f} s; state on {on}", flush=True)
      states.append(jax.device_get(state["params"]))
    # The host's random-number kernels are the devices' up to the last bits of the normals.
    diff = max(float(np.max(np.abs(a - b), initial=0.0))
               for a, b in zip(*(jax.tree.leaves(x) for x in states)))
    print(f"N={fmt.num(N)} the two states' parameters differ by at most {fmt.num(diff)}", flush=True)
  if mesh.devices.flat[0].platform == "cpu":
    print("a CPU mesh: a run makes its state on the mesh, whatever its size")
  else:
    made = "the host" if step_lib.host_for_init(abstract) else "the devices"
    print(f"a run makes the last size's state on {made} "
          f"(HOST_INIT_MAX_BYTES = {step_lib.HOST_INIT_MAX_BYTES / 2**30:g} GiB)")


if __name__ == "__main__":
  main()
