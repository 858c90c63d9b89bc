"""bench/smoke_bench.py's fit of the dry run's CPU time model (sweeps/dry_run.py's constants)
recovers the constants that generated a sweep's records."""

import numpy as np

from bench import smoke_bench


def _record(steps, flops, wall, start=None, branch_of=None):
  time_s = {"init": start / 2, "compile": start / 2} if start is not None else {"init": 0.0}
  return {"steps": steps, "D": steps * 8 * 64, "flops_chinchilla": flops, "wall_s": wall,
          "time_s": time_s, "branch_of": branch_of,
          "hparams": {"decay_fraction": 0.2, "batch_size": 8, "seq_len": 64}}


def test_the_time_model_fit_recovers_its_constants():
  start, step_s, rate = 1.5, 1.1e-3, 5.6e10
  rng = np.random.default_rng(0)
  records = []
  for k in range(6):  # a WSD run per size: its main run, then two branches trained by decay
    steps, flops = int(rng.integers(500, 5000)), float(rng.uniform(1e10, 1e12))
    records.append(_record(steps, flops, start + steps * step_s + flops / rate, start=start))
    for T in (int(rng.integers(200, 3000)), int(rng.integers(200, 3000))):
      F = float(rng.uniform(1e10, 1e12))
      decay = round(0.2 * T)  # a branch trains its decay alone, from the main run's state
      records.append(_record(T, F, decay * step_s + F * decay / T / rate,
                             branch_of=f"run{k}"))
  got = smoke_bench.time_model(records)
  np.testing.assert_allclose(got, (start, step_s, rate), rtol=1e-9)
