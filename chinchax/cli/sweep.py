"""`chinchax sweep`: train a sweep grid (resumable), fit it, write report.md.

    chinchax sweep [--config=NAME|PATH[:ARG]] [--config.KEY=VALUE ...] [--workdir=DIR]
                   [--dry-run [--compile[=TARGET]] [--json] [--headroom=F]]
                   [--quiet] [--verbose] [--list-configs]

With no arguments: the built-in smoke sweep (sweeps/configs/smoke.py) in ./runs/smoke; each
config's default workdir is runs/<its name> (--config=tiny: runs/tiny), and a workdir holds
one study: a rerun may add cells, never change what its cells train
(sweeps/configs/identity.py). With --dry-run: the grid, each cell's estimated time and the refusals, from the config alone (no
data is opened, no file written); with --compile every cell is compiled ahead of time for
its TPU slice and checked against its HBM (sweeps/dry_run.py). The library function is
`chinchax.sweep` (sweeps/sweep.py).
"""

# What trains, compiles or fits (jax and the rest) is imported once the flags are read, so
# that --help, --list-configs and a refused flag answer at once.
from chinchax.errors import UserError
from chinchax.sweeps import configs
from chinchax.cli import exit_status, flags

DEFAULT_CONFIG = configs.path("smoke")


def main(argv: list[str]) -> int:
  argv, checks = flags.split_dry_run_flags(argv)  # --compile, --json, --headroom
  flags.check_per_cell(argv)
  f = flags.parse_config_flags(argv, "chinchax sweep", DEFAULT_CONFIG,
                               configs.default_workdir(flags.config_arg(argv, "smoke")),
                               doc=__doc__)
  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.plots import workers as figure_workers
  from chinchax.sweeps.accel import compile_cache
  from chinchax.sweeps import console, dry_run, executors, lock, spec as spec_lib
  from chinchax.sweeps.hosts import distributed
  from chinchax.sweeps import sweep
  # pylint: enable=g-import-not-at-top
  if f.dry_run:
    spec = spec_lib.resolve(f.config, f.workdir)
    executors.check(spec.executor)
    return dry_run.run(spec, checks)
  if checks != flags.DryRunFlags():
    raise UserError("--compile, --json and --headroom go with --dry-run")
  # A process-wide setting, made here before anything starts jax: `chinchax.sweep` called
  # from a library leaves the caller's jax as it is.
  executors.split_cpu(f.config.get("cpu_devices", 0))
  compile_cache.enable()
  distributed.enter(f.config, f.workdir)  # a multi-host job: every process runs this
  with console.guard_stdout(), console.quiet_libraries(f.verbose), \
      lock.hold(f.workdir, "chinchax sweep"):  # two sweeps on one workdir corrupt it
    try:
      result = sweep.sweep(f.config, f.workdir, quiet=f.quiet, verbose=f.verbose,
                           plot_workers=True)
    finally:
      figure_workers.close()
  if result.status == "stopped":
    return exit_status.stopped("chinchax sweep", result.stopped_by)
  return 1 if result.fit_error else 0
