"""Two cells at a time on a 2-core CPU: threads in one process against one pinned process each.

    python bench/pair_bench.py [--pairs 4.8e4:1.76e5,1.14e5:1.43e5] [--rounds 4] [--seconds 12]

The packed executor (sweeps/executors.py) trains the smoke's cells two at a time as two
threads of one process, on two jax CPU devices (`cpu_devices = 2`). Those devices share one
XLA thread pool, so each cell's kernels run on either core. The alternative is a process per
device group, each pinned to its own core (`os.sched_setaffinity`, before jax starts, so its
pool has one thread). This script measures what that would buy, with the smoke's train step
(8 x 64 tokens, float32, 16 steps to a dispatch: `make_train_chunk`), for each pair of sizes:

* `threads`: one process with two CPU devices, a thread per device, each training its size;
* `processes`: two processes, each pinned to one core with one device, one size each;

both timed for `--seconds` from a common start once every process has compiled and
warmed up. Rounds
alternate the two, so that the host's drift hits both alike; the machine must be otherwise
idle. Prints each round's tokens/s per size, then per size the median ratio processes /
threads over the rounds.

On the 2-core machine (2026-11-28, 5 rounds of 12 s, the smoke's host reference at 108k
tok/s for 48k and 41k for 176k): processes / threads 1.00 at 48k (0.99-1.17), 1.04 at 176k
(1.01-1.04), 1.06 at 114k (1.00-1.74, one round's threads stalled), 1.08 at 143k
(0.98-1.16); 1.04 over all 20. About 4% of the smoke's step time (15 of 364 cell-seconds,
some 7 s of wall time), less the 2-3 s two more processes take to import jax: the executor
keeps its threads. Unpinned processes (each with a two-thread pool) were 5-35% slower than
the threads in a trial run. On 2026-12-01 (3 rounds of 10 s, the pairs 1.01e4:6.79e4 and
4.8e4:1.76e5; the smoke's host reference ranged 105-144k and 48-57k that day): processes /
threads 1.09 at 10.1k (1.06-1.14), 1.12 at 67.9k (1.06-1.25), 1.12 at 48k (1.07-1.15), 1.08
at 176k (1.07-1.11); 1.10 over all 12.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K, BATCH, SEQ, VOCAB = 16, 8, 64, 258  # the smoke's step (sweeps/configs/smoke.py)


def _trainer(N: float, device):
  """run(seconds, start) -> tokens/s of the smoke's chunked step at size N on `device`."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from jax.sharding import Mesh  # pylint: disable=g-import-not-at-top
  from chinchax.models.config import ModelConfig, shape_for_params  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import optimizer, step as step_lib  # pylint: disable=g-import-not-at-top

  mesh = Mesh(np.array([device]).reshape(1, 1, 1), ("data", "fsdp", "tensor"))
  shape = shape_for_params(N, vocab_size=VOCAB, seq_len=SEQ, tied=True)
  cfg = ModelConfig(shape, compute_dtype="float32", remat="none").validate()
  tx = optimizer.make(optimizer.OptimizerConfig(warmup_steps=10))
  box = {"state": step_lib.init_train_state(cfg, tx, mesh, jax.random.key(0))}
  chunk = step_lib.make_train_chunk(cfg, tx, mesh, global_batch_size=BATCH, K=K)
  tokens = np.random.default_rng(0).integers(0, VOCAB, (K, BATCH, SEQ + 1)).astype(np.int32)
  batch = {"inputs": tokens[:, :, :-1], "targets": tokens[:, :, 1:]}
  lrs = np.full(K, 1e-3, np.float32)
  run_chunk = chunk.lower(box["state"], batch, lrs, np.int32(K)).compile()
  for _ in range(3):  # warm-up
    box["state"], m = run_chunk(box["state"], batch, lrs, np.int32(K))
  jax.block_until_ready(m)

  def run(seconds: float, start: float) -> float:
    time.sleep(max(0.0, start - time.time()))
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
      box["state"], m = run_chunk(box["state"], batch, lrs, np.int32(K))
      n += 1
      if n % 4 == 0:  # a bounded queue of dispatches, as the train loop keeps
        jax.block_until_ready(m)
    jax.block_until_ready(m)
    return n * K * BATCH * SEQ / (time.perf_counter() - t)

  return run


def worker(mode: str, sizes: list[float], core: int | None, seconds: float):
  """Runs in a fresh process: compiles and warms up, says `ready`, reads the start time on
  stdin, then prints {size: tokens/s} as one JSON line."""
  if core is not None:
    os.sched_setaffinity(0, {core})  # before jax: its pool sizes itself to one core
  if mode == "threads":
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={len(sizes)}")
  sys.path.insert(0, ROOT)
  import threading  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top

  runs = [_trainer(N, d) for N, d in zip(sizes, jax.devices())]
  print("ready", flush=True)
  start = float(sys.stdin.readline())
  out = {}
  threads = [threading.Thread(target=lambda N=N, r=r: out.__setitem__(N, r(seconds, start)))
             for N, r in zip(sizes, runs)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  print(json.dumps({str(N): v for N, v in out.items()}), flush=True)


def _spawn(mode: str, sizes, core, seconds: float) -> subprocess.Popen:
  argv = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--sizes",
          ",".join(str(s) for s in sizes), "--seconds", str(seconds)]
  if core is not None:
    argv += ["--core", str(core)]
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  return subprocess.Popen(argv, env=dict(env, JAX_PLATFORMS="cpu"), stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def measure(mode: str, pair: tuple[float, float], seconds: float) -> dict[float, float]:
  procs = ([_spawn("threads", pair, None, seconds)] if mode == "threads" else
           [_spawn("processes", [N], core, seconds) for core, N in enumerate(pair)])
  for p in procs:  # every process compiled and warmed up: then they start together
    if p.stdout.readline().strip() != "ready":
      sys.exit(f"pair_bench: a {mode} worker failed before it was ready")
  start = time.time() + 0.5
  for p in procs:
    p.stdin.write(f"{start!r}\n")
    p.stdin.close()
  got = {}
  for p in procs:
    out = p.stdout.read()
    p.wait(timeout=seconds + 120)
    if p.returncode:
      sys.exit(f"pair_bench: a {mode} worker exited with {p.returncode}")
    got.update({float(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()})
  return got


def main() -> None:
  sys.path.insert(0, ROOT)
  from chinchax.scaling.numerics import fmt  # pylint: disable=g-import-not-at-top
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--pairs", default="4.8e4:1.76e5,1.14e5:1.43e5",
                 help="comma-separated pairs of sizes N, a:b, trained together")
  p.add_argument("--rounds", type=int, default=4)
  p.add_argument("--seconds", type=float, default=12.0, help="timed seconds per measurement")
  p.add_argument("--worker", choices=("threads", "processes"), help=argparse.SUPPRESS)
  p.add_argument("--sizes", help=argparse.SUPPRESS)
  p.add_argument("--core", type=int, help=argparse.SUPPRESS)
  a = p.parse_args()
  if a.worker:
    worker(a.worker, [float(s) for s in a.sizes.split(",")], a.core, a.seconds)
    return
  if len(os.sched_getaffinity(0)) < 2:
    sys.exit("pair_bench: needs two cores")
  pairs = [tuple(float(s) for s in x.split(":")) for x in a.pairs.split(",")]
  ratios = {N: [] for pair in pairs for N in pair}
  print(f"pair_bench: {a.rounds} rounds of {a.seconds:g} s per pair and mode, load average "
        f"{os.getloadavg()[0]:.1f}", flush=True)
  for r in range(a.rounds):
    for pair in pairs:
      threads = measure("threads", pair, a.seconds)
      procs = measure("processes", pair, a.seconds)
      cells = "   ".join(f"{fmt.num(N)}: {threads[N] / 1e3:.1f}k -> {procs[N] / 1e3:.1f}k"
                         for N in pair)
      print(f"  round {r + 1}  threads -> processes (tok/s)   {cells}", flush=True)
      for N in pair:
        ratios[N].append(procs[N] / threads[N])
  print("median processes / threads: " + ", ".join(
      f"{fmt.num(N)} {statistics.median(v):.3f} ({min(v):.2f}-{max(v):.2f})"
      for N, v in ratios.items()))
  every = [x for v in ratios.values() for x in v]
  print(f"all sizes: median {statistics.median(every):.3f}, {len(every)} ratios")


if __name__ == "__main__":
  main()
