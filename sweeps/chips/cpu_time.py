"""What a run costs on a CPU host: a fixed start (init and compile), a fixed cost per step and
its chinchilla FLOPs at a rate. Small models are overhead-bound there, so FLOPs alone misjudge
them. The dry run's time column uses it on a CPU (`dry_run.time_model`), and the packed
executor starts its jobs in its order (`executors.seconds`).

Fitted to the smoke sweep's cells, two at a time on a 2-core host, warm compile cache
(bench/smoke_bench.py prints the fit of a finished sweep; seeds 0-2 on 2026-11-27: 1.2-1.5 s,
0.81-1.08 ms, 5.5e10-5.8e10). A cold cache adds about 4 s per shape. The release with the
attention's own gradient fits 1.2-1.3 s, 0.63-1.01 ms and 5.7e10-6.3e10 on the same host (the
host drifted within the hour): its times are about 10% below this model's; left as they are,
they order the smoke's jobs as well (145.0 s of replayed makespan, 148.8 s with the new fit).
"""

CELL_S = 1.5
STEP_S = 1.0e-3
FLOPS_PER_S = 5.7e10  # chinchilla FLOPs


def seconds(runs: int, steps: int, flops_chinchilla: float) -> float:
  """The time of `runs` run starts, `steps` steps and `flops_chinchilla` FLOPs."""
  return runs * CELL_S + steps * STEP_S + flops_chinchilla / FLOPS_PER_S
