"""`chinchax train`: train one model (one sweep cell) end to end.

    chinchax train [--config=NAME|PATH[:ARG]] --workdir=DIR [--config.KEY=VALUE ...]
                   [--dry-run] [--quiet] [--verbose] [--forecast=forecast.json]

Rerun the same command to resume a stopped run; a finished one is not trained again. A config
with `wsd.branches` trains a WSD run and its cooldown branches (sweeps/wsd.py). With
--dry-run: the run's plan from the config alone (no data opened, no file written). Exit
status: 0 done, 1 failed (the reason as one JSON line on stderr), stopped (checkpointed; rerun
to resume): 130 by Ctrl-C, 143 by SIGTERM, 141 when stdout's reader left (`| head`).
The library function is `chinchax.train` (sweeps/job.py). --forecast names a record written
by `chinchax forecast` (read before training): the finished run scores it (forecast, actual,
inside the interval or not) into WORKDIR/forecast_score.json.
"""

import json
import sys

from chinchax.errors import UserError
from chinchax.sweeps import configs
from chinchax.sweeps.accel import compile_cache
from chinchax.sweeps import console, forecast_score, job, lock, wsd
from chinchax.sweeps.hosts import distributed
from chinchax.sweeps.train import describe
from chinchax.cli import exit_status, flags

DEFAULT_CONFIG = configs.path("train")


def main(argv: list[str]) -> int:
  forecast = [a.split("=", 1)[1] for a in argv if a.startswith("--forecast=")]
  argv = [a for a in argv if not a.startswith("--forecast=")]
  f = flags.parse_config_flags(argv, "chinchax train", DEFAULT_CONFIG, doc=__doc__)
  if forecast:
    forecast_score.load(forecast[-1])  # a wrong path is refused before anything trains
  if f.dry_run:
    print(describe.describe(f.config, wsd.describe_lines(f.config)))
    return 0
  if not f.workdir:
    raise UserError("--workdir is required: the folder for checkpoints, metrics and result.json")
  compile_cache.enable()
  distributed.enter(f.config, f.workdir)  # a multi-host job: every process runs this
  with console.guard_stdout(), console.quiet_libraries(f.verbose), \
      lock.hold(f.workdir, "chinchax train"):  # two trainers on one workdir corrupt it
    outcome = job.train(f.config, f.workdir, quiet=f.quiet)
  if outcome.status == "stopped":
    return exit_status.stopped("chinchax train", outcome.reason)
  if outcome.status == "failed":
    print(json.dumps({"status": "failed", "reason": outcome.reason}), file=sys.stderr)
    return 1
  if forecast:
    print(forecast_score.score_records(f.workdir, forecast[-1], outcome.records)[1])
  return 0
