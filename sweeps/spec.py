"""A sweep config resolved once into what the rest of the sweep reads: `resolve(config, workdir)`.

    Spec: name, workdir, executor, bootstrap, cells, refusals, jobs (frozen)

The grid is decided here, before any data is opened or anything compiled (`chinchax sweep
--dry-run` prints it). Opening the data for training adds its refusals (`beyond_data`: D past
the unique tokens). Each cell is one job, except that with `fixed_n.schedule='wsd'` the cells of
one fixed size are one WSD job (sweeps/wsd.py) whose cooldown branches are their rows.
"""

import dataclasses
import os

import ml_collections

from chinchax.errors import UserError
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
  `schedule='wsd'` likewise one WSD job per IsoFLOP shape and batch, named
  `C-N<N>-wsd` (with its shape when two shapes share a name), a branch at each budget's D:
  its warmup is the shortest cell's, so that every branch decays after it."""
  jobs, series = [], {}
  for cell in cells:
    if c.fixed_n.schedule == "wsd" and not cell.isoflop:
      series.setdefault(cell.series, []).append(cell)
      continue
    if c.schedule == "wsd" and cell.isoflop:
      key = (cell.shape, cell.batch_size, cell.seq_len, cell.peak_lr)
      series.setdefault(key, []).append(cell)
      continue
    jobs.append(job_lib.Job(name=cell.name, config=cell.train_config(c),
                            workdir=os.path.join(workdir, cell.name), shape=cell.shape,
                            D=cell.D, budget=cell.budget if cell.isoflop else None))
  names = [_series_name(key, group) for key, group in series.items()]
  for (key, group), name in zip(series.items(), names):
    if names.count(name) > 1:
      name = f"{name}-{grid._shape_tag(group[0].shape)}-B{group[0].batch_size}"  # pylint: disable=protected-access
    longest = max(group, key=lambda cell: cell.D)
    isoflop = group[0].isoflop
    cfg = wsd.job_config(name, longest.train_config(c), [cell.D for cell in group],
                         budgets=[cell.budget for cell in group] if isoflop else (),
                         warmup_steps=min(x.warmup_steps for x in group) if isoflop else None)
    jobs.append(job_lib.Job(name=cfg.name, config=cfg, workdir=os.path.join(workdir, cfg.name),
                            shape=longest.shape, D=longest.D, budget=None))
  return tuple(jobs)


def _series_name(key, group) -> str:
  """A fixed-N series keeps its name; the IsoFLOP cells of one shape are `C-N<N>`."""
  if isinstance(key, str):
    return key
  if "-lr" in group[0].name:  # an LR x batch grid's cell: its LR and batch name the run too
    return "C-" + group[0].name.split("-", 1)[1]
  return "C-" + group[0].name.split("-")[1]


def _with_cells(spec: Spec, cells, refusals) -> Spec:
  if not cells:
    raise UserError(f"no runnable cells: all {len(refusals)} were refused (first: "
                    f"{refusals[0] if refusals else 'none'})")
  return dataclasses.replace(spec, cells=tuple(cells), refusals=tuple(refusals),
                             jobs=jobs_for(cells, spec.config, spec.workdir))


def resolve(config: ml_collections.ConfigDict, workdir: str, shape_fn=None) -> Spec:
  """The sweep `config` (from `grid.base_config`) decided; UserError if nothing can run."""
  missing = run_config.missing_keys(config, grid.base_config(train_config.get_config()))
  if missing:
    raise UserError(f"the sweep config lacks {', '.join(missing)}; start it from "
                    "sweeps/grid.py's base_config()")
  unknown = run_config.unknown_keys(config, grid.base_config(train_config.get_config()))
  if unknown:
    raise UserError(f"the sweep config has no key {', '.join(unknown)}; check the spelling "
                    "against sweeps/grid.py's base_config()")
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
