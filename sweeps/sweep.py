"""`chinchax.sweep(config, workdir)`: every cell of a sweep grid trained, resumably, then
fitted and reported.

The order is fixed: the config resolved into a `spec.Spec` (the grid and its refusals) →
the executor checked → the dataset opened once (its tokenizer must match `vocab_size`, its
unique tokens bound the cells) → each cell's batch checked against its devices → the jobs
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
import os
import sys

import jax
import ml_collections

from chinchax.models import mesh as mesh_lib
from chinchax.models import sharding
from chinchax import atomic, killpoints
from chinchax.errors import UserError
from chinchax.sweeps.train import checkpoint, result as run_record
from chinchax.sweeps import data, estimate, executors, fit_adapter, report
from chinchax.sweeps import progress as progress_lib
from chinchax.sweeps import spec as spec_lib
from chinchax.sweeps import job as job_lib
from chinchax.sweeps.job import Job, Outcome
from chinchax.sweeps.train import config as run_config

DEFAULT_WORKDIR = os.path.join("runs", "smoke")


@dataclasses.dataclass(frozen=True)
class Result:
  """How a sweep ended: "done" (every job ran; some may have failed) or "stopped"."""

  status: str
  failed: tuple[str, ...] = ()     # the jobs that failed
  fit_error: str | None = None     # why the fit gave no law.json
  report: str | None = None        # report.md (written by process 0 only)
  stopped_by: str | None = None    # the stop's reason: SIGINT, SIGTERM or SIGPIPE


def open_data(spec: spec_lib.Spec) -> spec_lib.Spec:
  """Opens the dataset once: its vocabulary checked, the cells beyond its data refused."""
  ds = data.open_dataset(run_config.data_config(spec.config.train))
  data.check_vocab(ds.tokenizer, spec.config.vocab_size)
  return spec_lib.beyond_data(spec, ds.unique_tokens)


def check_batches(spec: spec_lib.Spec) -> None:
  """Each cell's batch must split over the data-parallel shards of the devices it gets."""
  devices = executors.cell_devices(spec.executor)
  if devices is None:
    return
  t = spec.config.train
  mesh = mesh_lib.make_mesh((t.mesh.data, t.mesh.fsdp, t.mesh.tensor), devices=devices)
  shards = sharding.batch_divisor(mesh, sharding.RULES)
  for cell in spec.cells:
    micro = cell.batch_size // t.grad_accum
    if cell.batch_size % t.grad_accum or micro % shards:
      raise UserError(
          f"cell {cell.name}: batch {cell.batch_size} (grad_accum {t.grad_accum}) does "
          f"not split over the {shards} data-parallel shards of its {len(devices)} devices; "
          "use executor='packed' with a devices_per_cell that divides it, or set train.mesh")


def sweep(config: ml_collections.ConfigDict, workdir: str = DEFAULT_WORKDIR, *,
          quiet: bool = False, verbose: bool = False, stop=None) -> Result:
  """Trains every cell of the sweep `config` not done yet in `workdir`, then fits and reports.

  `config`: a sweep config (`grid.base_config`, e.g. `sweeps/configs/smoke.py`'s). `stop`: a
  flag object (`checkpoint.StopFlag`); without one, SIGTERM and SIGINT stop the sweep while it
  runs (finished cells are kept: rerun to resume). The console: one line per cell
  (sweeps/progress.py), with a bar in place on a terminal unless `quiet`; `verbose` adds each
  run's step lines.
  """
  spec = spec_lib.resolve(config, workdir)
  executors.check(spec.executor)
  spec = open_data(spec)
  check_batches(spec)
  lead = jax.process_index() == 0
  say = (lambda m: print(m, flush=True)) if lead else (lambda m: None)
  for r in spec.refusals:
    say(r)
  if lead:
    atomic.makedirs(workdir)
    atomic.write_text(os.path.join(workdir, "sweep.json"),
                      spec.config.to_json_best_effort(indent=2) + "\n")
  runs_path = os.path.join(workdir, "runs.jsonl")
  record = (lambda records: [run_record.upsert_runs_jsonl(runs_path, r) for r in records]
            ) if lead else (lambda records: None)
  todo = _skip_done(spec.jobs, say)
  if lead:  # the cells' result.json files are the truth: runs.jsonl is made to agree
    run_record.sync_runs_jsonl(runs_path, [d for j in spec.jobs for d in job_lib.record_dirs(j)])
  say(f"{len(todo)} of {len(spec.jobs)} cells to train with executor={spec.executor.kind!r}")

  failed = []
  progress = _progress(spec, todo, live=False if quiet else None) if lead else None

  def on_result(job: Job, outcome: Outcome) -> None:
    if outcome.status == "done":
      detail = "eval loss " + ", ".join(f"{r['eval_loss']:.4f}" for r in outcome.records)
    else:
      failed.append(job.name)
      detail = outcome.reason or ""
    if progress is not None:
      progress.end(job.name, outcome.status, detail)
    record(outcome.records)

  own_stop = stop is None
  stop = checkpoint.StopFlag().install() if own_stop else stop
  try:
    finished = executors.run_jobs(todo, on_result, spec.executor, stop=stop,
                                  quiet=not verbose or spec.executor.kind != "local",
                                  progress=progress)
  finally:
    if own_stop:
      stop.uninstall()
  if not finished:
    say("sweep stopped; finished cells are recorded, rerun the same command to resume")
    return Result("stopped", tuple(failed), stopped_by=getattr(stop, "reason", None))
  if failed:
    say(f"{len(failed)} cells failed: {', '.join(failed)}")
  if not lead:
    return Result("done", tuple(failed))
  fit_error = None
  killpoints.hit("fit")
  try:
    fit_adapter.fit_workdir(workdir, spec.bootstrap)
  except UserError as e:
    fit_error = str(e)
    print(f"chinchax sweep: the fit failed: {fit_error}", file=sys.stderr)
  path = report.write_report(workdir, fit_error=fit_error)
  say(f"wrote {path}")
  return Result("done", tuple(failed), fit_error, path)


def _progress(spec: spec_lib.Spec, todo: list[Job], live) -> progress_lib.SweepProgress:
  """The progress lines of `todo`, its ETA seeded with the dry run's estimate of each cell."""
  time_of, _ = estimate.time_model(spec.executor)
  cells = {c.name: time_of(c) for c in spec.cells}
  known = [cells[j.name] for j in todo if j.name in cells]
  default = sum(known) / len(known) if known else 1.0  # a WSD job: the mean cell
  return progress_lib.SweepProgress([j.name for j in todo],
                                    [cells.get(j.name, default) for j in todo], live=live)


def _skip_done(jobs, say) -> list[Job]:
  """The jobs not done yet."""
  todo = []
  for i, job in enumerate(jobs):
    done = job_lib.finished(job)
    if done is None:
      todo.append(job)
      continue
    losses = ", ".join(f"{r['eval_loss']:.4f}" for r in done)
    say(f"[{i + 1}/{len(jobs)}] {job.name}: skipped, already done (eval loss {losses})")
  return todo
