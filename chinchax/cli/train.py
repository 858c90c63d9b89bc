"""`chinchax train`: train one model (one sweep cell) end to end.

    chinchax train [--config=NAME|PATH[:ARG]] [--cell=NAME] --workdir=DIR
                   [--config.KEY=VALUE ...] [--dry-run] [--quiet] [--verbose]
                   [--forecast=forecast.json]

--config takes a train config (the named config `train`, `train:PRESET`, or a file whose
get_config() returns one run's settings) or a sweep config (the other named configs, or a
sweep file) with --cell=NAME: the run of that sweep named NAME, trained in --workdir as
`chinchax sweep` trains it. NAME is a cell `chinchax sweep --config=X --dry-run` lists; where
the sweep trains a series of cells as one warmup-stable-decay run (`schedule='wsd'`, as the
smoke's), NAME is that run's, `C-N<N>-wsd` or `<series>-wsd` (a refused --cell lists some),
and it trains all its cells' cooldown branches. `chinchax sweep --config=X` trains them all.
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

# What trains (jax and the rest) is imported once the flags are read, so that --help and a
# refused flag answer at once.
from chinchax.errors import UserError
from chinchax.sweeps import configs
from chinchax.cli import exit_status, flags

DEFAULT_CONFIG = configs.path("train")
MORE_FLAGS = (
    ("--cell=NAME", "with a sweep config: train its run NAME (a cell of its dry run)"),
    ("--forecast=forecast.json", "score this forecast when the run ends"),
)


def main(argv: list[str]) -> int:
  forecast = [a.split("=", 1)[1] for a in argv if a.startswith("--forecast=")]
  argv = [a for a in argv if not a.startswith("--forecast=")]
  argv, cell = _cell_flag(argv)
  f = flags.parse_config_flags(argv, "chinchax train", DEFAULT_CONFIG, doc=__doc__,
                               more_flags=MORE_FLAGS)
  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.accel import compile_cache
  from chinchax.sweeps import console, forecast_score, job, lock, wsd
  from chinchax.sweeps.hosts import distributed
  from chinchax.sweeps.train import describe
  # pylint: enable=g-import-not-at-top
  config = _run_config(f, cell, flags.config_arg(argv, DEFAULT_CONFIG),
                       any(a.startswith("--config.") for a in argv))
  if forecast:
    forecast_score.load(forecast[-1])  # a wrong path is refused before anything trains
  if f.dry_run:
    print(describe.describe(config, wsd.describe_lines(config)))
    return 0
  if not f.workdir:
    raise UserError("--workdir is required: the folder for checkpoints, metrics and result.json")
  compile_cache.enable()
  distributed.enter(config, f.workdir)  # a multi-host job: every process runs this
  with console.guard_stdout(), console.quiet_libraries(f.verbose), \
      lock.hold(f.workdir, "chinchax train"):  # two trainers on one workdir corrupt it
    outcome = job.train(config, f.workdir, quiet=f.quiet)
  if outcome.status == "stopped":
    return exit_status.stopped("chinchax train", outcome.reason)
  if outcome.status == "failed":
    print(json.dumps({"status": "failed", "reason": outcome.reason}), file=sys.stderr)
    return 1
  if forecast:
    print(forecast_score.score_records(f.workdir, forecast[-1], outcome.records)[1])
  return 0


def _cell_flag(argv: list[str]) -> tuple[list[str], str | None]:
  """argv without --cell=NAME (or --cell NAME), and NAME (the last one), or None."""
  rest, cell, i = [], None, 0
  while i < len(argv):
    a = argv[i]
    if a == "--cell" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
      cell, i = argv[i + 1], i + 2
      continue
    if a == "--cell" or a.startswith("--cell="):
      cell = a.partition("=")[2]
      if not cell.strip():
        raise UserError("--cell needs a value: a cell of the sweep config's dry run, e.g. "
                        "--cell=C2.5e11-N3.2e4 with --config=tiny")
    else:
      rest.append(a)
    i += 1
  return rest, cell


def _run_config(f: flags.ConfigFlags, cell: str | None, shown: str, overridden: bool):
  """The one run's config: --config's own, or a sweep config's run that --cell names."""
  from chinchax.sweeps import data, spec as spec_lib  # pylint: disable=g-import-not-at-top
  if not flags.is_sweep(f.config):
    if cell is not None:
      raise UserError(f"--cell={cell} picks a run of a sweep config, but --config={shown} "
                      "is one run's config; drop --cell, or give a sweep config (e.g. "
                      "--config=tiny)")
    return f.config
  spec = spec_lib.resolve(f.config, f.workdir or "")
  if cell is None:
    raise UserError(
        f"--config={shown} is a sweep config: train one of its runs with --cell=NAME "
        f"({spec_lib.example_names(spec)}; {spec_lib.listed(spec, shown, overridden)}), or "
        f"all of them with `chinchax sweep --config={shown}`")
  config = spec_lib.job_named(spec, cell, shown, overridden).config
  # The grid sized its cells for the sweep's vocabulary: refused as `chinchax sweep` refuses it.
  data.check_vocab(data.make_tokenizer(config.data.tokenizer, config.data.spm_model or None),
                   spec.config.vocab_size)
  return config
