"""`chinchax.sweep(config, workdir)`: every cell of a sweep grid trained, resumably, then
fitted and reported.

The order is fixed: the config resolved into a `spec.Spec` (the grid and its refusals) →
the executor checked → the preflight (`preflight`: the dataset opened once, its tokenizer
must match `vocab_size` and its unique tokens bound the cells; the mesh of each device group
built once and each cell's batch checked against it; both handed to every job) → the jobs
trained → the fit (law.json, plots/) → report.md. Everything that cannot work is refused (a
UserError) before anything is compiled.

Layout, WORKDIR a local path or gs://bucket/path: WORKDIR/sweep.json (the resolved config),
WORKDIR/<cell>/ (the run's files, sweeps/train/), WORKDIR/runs.jsonl (a line per finished
cell), WORKDIR/law.json, WORKDIR/plots/, WORKDIR/report.md. Cell names depend only on the
config, so a rerun finds its cells: done cells (result.json status done) are skipped, partial
ones resume from their checkpoints, failed ones are retried. Only process 0 writes the shared
files.
"""

import dataclasses
import json
import os
import sys

import jax
import ml_collections

from chinchax import atomic, killpoints
from chinchax.errors import UserError
from chinchax.models import sharding
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plots import workers as figure_workers
from chinchax.scaling.runs import records
from chinchax.sweeps import console
from chinchax.sweeps.adaptive import rounds
from chinchax.sweeps import data, dry_run, executors, forecast_score, report
from chinchax.sweeps import hparams
from chinchax.sweeps import job as job_lib
from chinchax.sweeps import spec as spec_lib
from chinchax.sweeps.job import Job, Outcome
from chinchax.sweeps.configs import identity, keys
from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import setup
from chinchax.sweeps.train import stop as stop_lib



@dataclasses.dataclass(frozen=True)
class Result:
  """How a sweep ended: "done" (every job ran; some may have failed) or "stopped"."""

  status: str
  failed: tuple[str, ...] = ()     # the jobs that failed
  fit_error: str | None = None     # why the fit gave no law.json
  report: str | None = None        # report.md (written by process 0 only)
  stopped_by: str | None = None    # the stop's reason: SIGINT, SIGTERM or SIGPIPE


def preflight(spec: spec_lib.Spec) -> tuple[spec_lib.Spec, setup.Opened]:
  """Everything the jobs share, opened and checked once before any job starts: the dataset
  (its vocabulary against the grid's, the cells beyond its unique tokens refused) and the
  mesh of each device group the jobs run on (each cell's batch must split over it). The
  jobs of this process reuse both (`setup.Opened`); a Ray worker opens its own."""
  t = spec.config.train
  ds = data.open_dataset(run_config.data_config(t))
  data.check_vocab(ds.tokenizer, spec.config.vocab_size)
  spec = spec_lib.beyond_data(spec, ds.unique_tokens)
  opened = setup.Opened.of(ds, t, executors.cell_devices(spec.executor) or ())
  for _, mesh in opened.meshes:
    shards = sharding.batch_divisor(mesh, sharding.RULES)
    for cell in spec.cells:
      try:
        sharding.check_batch(cell.batch_size, shards, t.grad_accum,
                             hint="executor='packed' with a devices_per_cell that divides it, "
                                  "or set train.mesh")
      except UserError as e:
        raise UserError(f"cell {cell.name} on {mesh.size} devices: {e}") from None
  return spec, opened


def sweep(config: ml_collections.ConfigDict, workdir: str | None = None, *,
          quiet: bool = False, verbose: bool = False, stop=None, round_of: bool = False,
          plot_workers: bool = False) -> Result:
  """Trains every cell of the sweep `config` not done yet in `workdir`, then fits and reports.

  `config`: a sweep config (`sweep_config.base_config`, e.g. `sweeps/configs/smoke.py`'s);
  `workdir`: default runs/<config.name>; one study each (`check_study`). `stop`: a
  flag object (`stop_lib.StopFlag`); without one, SIGTERM and SIGINT stop the sweep while it
  runs (finished cells are kept: rerun to resume). The console: one line per cell
  (sweeps/console.py), with a bar in place on a terminal unless `quiet`; `verbose` adds each
  run's step lines. With `adaptive.round_cells` the sweep is rounds of `chinchax next`
  (sweeps/adaptive/rounds.py), each round this function on the cells chosen so far
  (`round_of`). `plot_workers`: the figures' worker processes (scaling/plots/workers.py)
  start as soon as a device has no cell left, so that the fit's figures are drawn beside
  it, matplotlib imported (the smoke's last cell to its report.md: 5.2-7.2 s to 4.3-5.5,
  bench/smoke_bench.py alternating with the release before on one host); the
  `chinchax` command's, which closes them.
  """
  workdir = workdir or os.path.join("runs", config.name)
  if rounds.active(config) and not round_of:  # rounds of `chinchax next`, each one sweep
    sweep_config.check_config(config)
    return rounds.run(config, workdir, spec_lib.pool_cells(config), lambda c: sweep(
        c, workdir, quiet=quiet, verbose=verbose, stop=stop, round_of=True,
        plot_workers=plot_workers),
        lambda m: print(m, flush=True) if jax.process_index() == 0 else None) or Result("done")
  spec = spec_lib.resolve(config, workdir)
  executors.check(spec.executor)
  if spec.config.forecast:  # a wrong path is refused before anything trains
    forecast_score.load(spec.config.forecast)
  atomic.check_writable(workdir, "workdir", folder=True)  # before the data is opened
  spec, opened = preflight(spec)
  lead = jax.process_index() == 0
  say = (lambda m: print(m, flush=True)) if lead else (lambda m: None)
  for r in spec.refusals:
    say(r)
  extends = check_study(spec, workdir)  # another study's workdir: refused, nothing written
  say(f"sweep {spec.config.name!r} in {workdir}" + (f"; {extends}" if extends else ""))
  if lead:
    atomic.makedirs(workdir)
    atomic.write_text(os.path.join(workdir, "sweep.json"),
                      spec.config.to_json_best_effort(indent=2) + "\n")
  runs_path = os.path.join(workdir, "runs.jsonl")
  record = (lambda rs: [records.upsert_runs(runs_path, r) for r in rs]) if lead else (lambda rs: None)
  todo = _skip_done(spec.jobs, say)
  if lead:  # the cells' result.json files are the truth: runs.jsonl is made to agree
    records.sync_runs(runs_path, [d for j in spec.jobs for d in job_lib.record_dirs(j)])
  say(_todo_line(spec.jobs, todo, spec.executor.kind))

  failed = []
  progress = _progress(spec, todo, live=False if quiet else None) if lead else None

  def on_result(job: Job, outcome: Outcome) -> None:
    if outcome.status == "done":
      detail = "eval loss " + _losses(outcome.records)
    else:
      failed.append(job.name)
      detail = outcome.reason or ""
    if progress is not None:
      progress.end(job.name, outcome.status, detail)
    record(outcome.records)

  own_stop = stop is None
  stop = stop_lib.StopFlag().install() if own_stop else stop
  # The load average is this sweep's own cells, which are ending: no reason to draw here.
  warm = ((lambda: figure_workers.warm(figure_workers.processes(own_load=True)))
          if plot_workers and lead else None)
  try:
    finished = executors.run_jobs(todo, on_result, spec.executor, stop=stop,
                                  quiet=not verbose or spec.executor.kind != "local",
                                  progress=progress, opened=opened, on_idle=warm)
  finally:
    if own_stop:
      stop.uninstall()
  if not finished:  # the caller says so (`chinchax sweep`: the resume hint, on stderr)
    return Result("stopped", tuple(failed), stopped_by=getattr(stop, "reason", None))
  if failed:
    say(f"{len(failed)} cells failed: {', '.join(failed)}")
  if not lead:
    return Result("done", tuple(failed))
  fit_error = None
  if warm:
    warm()  # no device went idle before the last cell ended (one at a time, or Ray)
  killpoints.hit("fit")
  measure = hparams.active(spec.config)  # an LR x batch grid: hparams.json, not law.json
  try:
    (hparams if measure else report).fit_workdir(workdir, spec.bootstrap)
  except UserError as e:
    fit_error = str(e)
    print(f"chinchax sweep: the fit failed: {fit_error}", file=sys.stderr)
  if spec.config.forecast:
    _, line = forecast_score.score_workdir(workdir, spec.config.forecast)
    say(line)
  path = (hparams if measure else report).write_report(workdir, fit_error=fit_error)
  say(f"wrote {path}")
  return Result("done", tuple(failed), fit_error, path)


# What a run writes at its workdir's top (sweeps/train/loop.py), which a sweep never does there.
RUN_FILES = ("config.json", "result.json", "metrics.jsonl")


def check_study(spec: spec_lib.Spec, workdir: str) -> str | None:
  """Refuses a sweep into a workdir that holds another study (sweeps/configs/identity.py):
  its sweep.json differs in a key that changes what a cell trains or how it is measured, or
  it holds runs but no sweep.json that parses. A change of the grid's keys only extends the
  study: the line that says so, else None."""
  run = next((f for f in RUN_FILES if atomic.exists(os.path.join(workdir, f))), None)
  if run:
    raise UserError(f"{workdir} holds a run of `chinchax train` ({run}), another study: a "
                    "sweep needs a workdir of its own; pass another --workdir")
  there = any(atomic.exists(os.path.join(workdir, f)) for f in ("runs.jsonl", "law.json")) or any(
      atomic.exists(d) for j in spec.jobs for d in job_lib.record_dirs(j))
  old = identity.recorded(os.path.join(workdir, "sweep.json"), workdir, there)
  if old is None:
    return None
  new = identity.flatten(json.loads(spec.config.to_json_best_effort()))
  known = identity.declared([("", sweep_config.KEYS), ("train.", train_config.KEYS)])
  changed = identity.changes(old, new, known)
  if changed[keys.IDENTITY]:
    raise UserError(f"{workdir} holds the study of another config: "
                    f"{identity.said(changed[keys.IDENTITY])}; a rerun may add budgets or "
                    "sizes, or change where cells run and what is logged; pass another "
                    "--workdir for a new study")
  if changed[keys.GRID]:
    return f"extending the study in {workdir}: {identity.said(changed[keys.GRID])}"
  return None


def _progress(spec: spec_lib.Spec, todo: list[Job], live) -> console.SweepProgress:
  """The progress lines of `todo`, its ETA seeded with the dry run's estimate of each cell."""
  time_of, _ = dry_run.time_model(spec.executor)
  cells = {c.name: time_of(c) for c in spec.cells}
  known = [cells[j.name] for j in todo if j.name in cells]
  default = sum(known) / len(known) if known else 1.0  # a WSD job: the mean cell
  return console.SweepProgress([j.name for j in todo],
                                    [cells.get(j.name, default) for j in todo], live=live,
                                    done_before=len(spec.jobs) - len(todo))


def _todo_line(jobs, todo, executor: str) -> str:
  """`9 of 9 runs to train (30 of 30 cells to train as their cooldown branches)` for WSD
  runs, whose one job trains a size's cells; `N of M cells to train` otherwise."""
  n_cells = lambda js: sum(len(job_lib.record_dirs(j)) for j in js)
  if n_cells(jobs) == len(jobs):
    return f"{len(todo)} of {len(jobs)} cells to train with executor={executor!r}"
  return (f"{len(todo)} of {len(jobs)} runs to train ({n_cells(todo)} of {n_cells(jobs)} "
          f"cells to train as their cooldown branches) with executor={executor!r}")


def _losses(records) -> str:
  """`2.1840`, or for a WSD run's branches `2.3012 (C=5e10), 2.2205 (C=1e11)`."""
  if len(records) == 1 and records[0].get("schedule") != "wsd":
    return f"{records[0]['eval_loss']:.4f}"
  return ", ".join(f"{r['eval_loss']:.4f}" + (f" (C={fmt.num(r['budget'])})" if r.get("budget")
                                              else "") for r in records)


def _skip_done(jobs, say) -> list[Job]:
  """The jobs not done yet."""
  todo, skipped = [], 0
  for job in jobs:
    done = job_lib.finished(job)
    if done is None:
      todo.append(job)
      continue
    skipped += 1  # counted as the progress lines count (console.SweepProgress's done_before)
    say(f"[{skipped}/{len(jobs)}] {job.name}: skipped, already done (eval loss "
        f"{_losses(done)})")
  return todo
