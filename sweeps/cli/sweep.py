"""`chinchax sweep`: train a sweep grid (resumable), fit it, write report.md.

    chinchax sweep [--config=PATH[:ARG]] [--config.KEY=VALUE ...] [--workdir=DIR] [--dry-run]

With no arguments: the built-in smoke sweep (sweeps/configs/smoke.py) in ./runs/smoke. With
--dry-run: the grid, each cell's estimated time and the refusals, from the config alone (no
data is opened, no file written). The library function is `chinchax.sweep` (sweeps/sweep.py).
"""

import os

from chinchax.sweeps import estimate, executors, lock, spec as spec_lib, sweep, table
from chinchax.sweeps.cli import flags

DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.dirname(__file__)), "configs", "smoke.py")


def main(argv: list[str]) -> int:
  f = flags.parse_config_flags(argv, "chinchax sweep", DEFAULT_CONFIG, sweep.DEFAULT_WORKDIR)
  if f.dry_run:
    spec = spec_lib.resolve(f.config, f.workdir)
    executors.check(spec.executor)
    seconds, how = estimate.time_model(spec.executor)
    print(table.format_table(spec.cells, spec.refusals, seconds=seconds))
    print(how)
    print("unique tokens and the vocabulary are checked when the data is opened for training")
    return 0
  sweep.initialize_distributed()
  with lock.hold(f.workdir, "chinchax sweep"):  # two sweeps on one workdir corrupt it
    result = sweep.sweep(f.config, f.workdir, quiet=f.quiet)
  if result.status == "stopped":
    return 143
  return 1 if result.fit_error else 0
