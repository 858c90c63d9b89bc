"""A sweep config resolved once into what the rest of the sweep reads: `resolve(config, workdir)`.

    Spec: name, workdir, executor, bootstrap, cells, refusals, jobs (frozen)

The grid is decided here, before any data is opened or anything compiled (`chinchax sweep
--dry-run` prints it). Opening the data for training adds its refusals (`beyond_data`: D past
the unique tokens). Each cell is one job, except that with `fixed_n.schedule='wsd'` the cells of
one fixed size are one WSD job (sweeps/wsd.py) whose cooldown branches are their rows.
"""

import dataclasses
import difflib
import os

import ml_collections

from chinchax.errors import UserError
from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps import grid, job as job_lib, wsd
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.train import config as run_config

EXECUTORS = ("local", "packed", "ray")


@dataclasses.dataclass(frozen=True)
class Executor:
  """Where the cells run (sweeps/executors.py) and with what resources."""

  kind: str                # local | packed | ray
  devices_per_cell: int    # packed: devices of each cell's sub-mesh
  ray_address: str         # ray: the cluster to join; empty starts a local one
  ray_num_cpus: float      # ray: resources each cell's task holds
  ray_num_gpus: float
  ray_tpus: int


@dataclasses.dataclass(frozen=True)
class Spec:
  """A sweep, decided: the cells to train, their jobs, where and how."""

  name: str
  workdir: str
  config: ml_collections.ConfigDict  # the resolved sweep config (written to sweep.json)
  executor: Executor
  bootstrap: int                     # resamples of the fit's intervals (0: none)
  cells: tuple[grid.Cell, ...]
  refusals: tuple[str, ...]
  jobs: tuple[job_lib.Job, ...]


def executor_of(c: ml_collections.ConfigDict) -> Executor:
  e = Executor(c.executor, c.devices_per_cell, c.ray_address, float(c.ray_num_cpus),
               float(c.ray_num_gpus), c.ray_tpus)
  if e.kind not in EXECUTORS:
    raise UserError(f"executor={e.kind!r} is not one of {', '.join(EXECUTORS)}")
  return e


def jobs_for(cells, c: ml_collections.ConfigDict, workdir: str) -> tuple[job_lib.Job, ...]:
  """One job per cell; with `fixed_n.schedule='wsd'` one WSD job per fixed size instead,
  whose cooldown branches at the series' D values become the rows of runs.jsonl (Hägele et
  al. 2024: one long run and k short decays cost less than k cosine runs). With
  `schedule='wsd'` likewise one WSD job per IsoFLOP shape and batch, a branch at each
  budget's D: its warmup is the shortest cell's, so that every branch decays after it. Which
  cells form a WSD job, and its name, is `wsd.series`'s to say."""
  single, series = wsd.series(cells, c)
  jobs = [job_lib.Job(name=cell.name, config=cell.train_config(c),
                      workdir=os.path.join(workdir, cell.name), shape=cell.shape, D=cell.D,
                      budget=cell.budget if cell.isoflop else None) for cell in single]
  for name, group in series:
    longest = max(group, key=lambda cell: cell.D)
    isoflop = group[0].isoflop
    cfg = wsd.job_config(name, longest.train_config(c), [cell.D for cell in group],
                         budgets=[cell.budget for cell in group] if isoflop else (),
                         warmup_steps=min(x.warmup_steps for x in group) if isoflop else None)
    jobs.append(job_lib.Job(name=cfg.name, config=cfg, workdir=os.path.join(workdir, cfg.name),
                            shape=longest.shape, D=longest.D, budget=None))
  return tuple(jobs)


def _with_cells(spec: Spec, cells, refusals) -> Spec:
  if not cells:
    raise UserError(f"no runnable cells: all {len(refusals)} were refused (first: "
                    f"{refusals[0] if refusals else 'none'})")
  return dataclasses.replace(spec, cells=tuple(cells), refusals=tuple(refusals),
                             jobs=jobs_for(cells, spec.config, spec.workdir))


def resolve(config: ml_collections.ConfigDict, workdir: str, shape_fn=None) -> Spec:
  """The sweep `config` (from `sweep_config.base_config`) decided; UserError if nothing can run."""
  missing = run_config.missing_keys(config, sweep_config.base_config(train_config.get_config()))
  if missing and "train" not in config and not run_config.missing_keys(
      config, train_config.get_config()):
    raise UserError("this is one run's config (sweeps/configs/train.py's keys), not a sweep's: "
                    "train it with `chinchax train --config=... --workdir=DIR`, or sweep with a "
                    "sweep config (`chinchax sweep --list-configs`)")
  if missing:
    raise UserError(f"the sweep config lacks {', '.join(missing)}; start it from "
                    "sweeps/configs/sweep.py's base_config()")
  unknown = run_config.unknown_keys(config, sweep_config.base_config(train_config.get_config()))
  if unknown:
    raise UserError(f"the sweep config has no key {', '.join(unknown)}; check the spelling "
                    "against sweeps/configs/sweep.py's base_config()")
  c = ml_collections.ConfigDict(config.to_dict())  # a copy: the caller's stays as it was
  if not (isinstance(c.bootstrap, int) and c.bootstrap >= 0):
    raise UserError(f"bootstrap={c.bootstrap!r} must be an integer >= 0")
  spec = Spec(name=c.name, workdir=os.fspath(workdir), config=c, executor=executor_of(c),
              bootstrap=c.bootstrap, cells=(), refusals=(), jobs=())
  spec = _with_cells(spec, *grid.make_grid(c, shape_fn=shape_fn))
  for job in spec.jobs:  # the cells' train settings, refused before any data is opened
    try:
      run_config.check(job.config)
    except UserError as e:
      raise UserError(f"cell {job.name}: {e}") from None
  return spec


def beyond_data(spec: Spec, unique_tokens: float) -> Spec:
  """The spec without the cells whose D exceeds the data's unique tokens (unless
  `allow_repeats`), each refused with the reason."""
  cells, refused = grid.beyond_data(list(spec.cells), unique_tokens, spec.config.allow_repeats)
  return _with_cells(spec, cells, spec.refusals + tuple(refused))


def cells_of_jobs(spec: Spec) -> dict[str, tuple[str, ...]]:
  """Each job's name and the names of the cells it trains: a single run's own cell, or a WSD
  run's cooldown branches (`wsd.series`, in the order `jobs_for` made its jobs)."""
  single, series = wsd.series(spec.cells, spec.config)
  groups = [(cell.name,) for cell in single] + [
      tuple(cell.name for cell in group) for _, group in series]
  return {job.name: cells for job, cells in zip(spec.jobs, groups)}


def job_named(spec: Spec, name: str, shown: str, overridden: bool = False) -> job_lib.Job:
  """The job `chinchax train --config=SHOWN --cell=NAME` trains: the sweep's job of that name
  (a cell the dry run lists, or a WSD run, `<series>-wsd`), as `chinchax sweep` would train
  it; a UserError of one line naming valid names for anything else (a WSD run's branch names
  the run that trains it; a refused cell says why)."""
  by_name = {job.name: job for job in spec.jobs}
  if name in by_name:
    return by_name[name]
  where = f"--cell={name}"
  for job_name, cells in cells_of_jobs(spec).items():
    if name in cells:
      raise UserError(f"{where} is a cooldown branch of the WSD run {job_name}, which "
                      f"`chinchax sweep --config={shown}` trains as one run with its "
                      f"{len(cells)} branches; train it with --cell={job_name}")
  refused = next((r for r in spec.refusals if r.split(":", 1)[0] == name), None)
  if refused:
    raise UserError(f"{where}: the grid of --config={shown} refuses that cell "
                    f"({refused.split(': refused: ', 1)[-1]}); its runs: "
                    f"{example_names(spec)}")
  raise UserError(f"{where} is not a run of --config={shown}; its runs: "
                  f"{example_names(spec, near=name)}; {listed(spec, shown, overridden)}")


def example_names(spec: Spec, near: str = "", k: int = 3) -> str:
  """A few of the jobs' names (those closest to `near` first), with their count."""
  names = [job.name for job in spec.jobs]
  close = difflib.get_close_matches(near, names, n=k, cutoff=0.6) if near else []
  shown = close + [n for n in names if n not in close][:k - len(close)]
  more = len(names) - len(shown)
  return ", ".join(shown) + (f" and {more} more" if more else "")


def listed(spec: Spec, shown: str, overridden: bool = False) -> str:
  """Where the names of the sweep's runs are listed, as a clause; `overridden`: the config was
  given --config.KEY=VALUE overrides, which the dry run needs too."""
  dry_run = (f"`chinchax sweep --config={shown} --dry-run`" +
             (" (with the same --config. overrides)" if overridden else ""))
  if all(job.name in {c.name for c in spec.cells} for job in spec.jobs):
    return f"{dry_run} lists them"
  return (f"a name ending -wsd is a WSD run, whose cooldown branches are cells {dry_run} "
          "lists")


def pool_cells(config: ml_collections.ConfigDict) -> list[grid.Cell]:
  """The candidate cells of a study (`chinchax next WORKDIR`, the adaptive sweep): every
  budget of `config` at every size of its grid's shape family, the sizes of all its budgets
  together (the smoke sweep's rungs of one ladder, each offered at each budget), made cells by
  the grid's own rules, so a chosen cell is one the sweep can train; no fixed-N series and no
  LR x batch grid."""
  cells, _ = grid.make_grid(config)
  sizes = sorted({float(c.N) for c in cells if c.isoflop})
  if not sizes:
    raise UserError("the sweep config's grid has no IsoFLOP cells to choose from; give "
                    "budgets and sizes (or a prior)")
  c = ml_collections.ConfigDict(config.to_dict())
  c.sizes = tuple(sizes)
  c.fixed_n.sizes, c.fixed_n.tokens_per_param = (), ()
  c.hparams.lr_factors, c.hparams.batch_factors = (), ()
  return [cell for cell in grid.make_grid(c)[0] if cell.isoflop]
