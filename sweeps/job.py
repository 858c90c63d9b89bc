"""A job: one train config to run in one folder, a single run or a WSD run with its branches.

Sweep cells become jobs (sweeps/spec.py), executors run them (sweeps/executors.py), and
`chinchax train` runs one. Whatever the kind, a job ends as an `Outcome`: its status and its
rows for runs.jsonl (a single run: its record; a WSD run: its branches', sweeps/wsd.py).
"""

import dataclasses

import jax
import ml_collections

from chinchax import atomic
from chinchax.scaling.runs.conventions import Shape
from chinchax.scaling.runs import records
from chinchax.sweeps import wsd
from chinchax.sweeps.train import loop


@dataclasses.dataclass(frozen=True)
class Job:
  """One job of a sweep: its train config, its folder and what a failed record needs."""

  name: str
  config: ml_collections.ConfigDict
  workdir: str
  shape: Shape
  D: float
  budget: float | None


@dataclasses.dataclass(frozen=True)
class Outcome:
  """How a job ended: "done", "failed" or "stopped" (by a stop flag), and its records."""

  status: str
  records: tuple[dict, ...] = ()
  reason: str | None = None


def reason(e: BaseException) -> str:
  """An exception as one line: 'TypeName: first line of the message'."""
  text = str(e).strip().splitlines()
  return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def train(config: ml_collections.ConfigDict, workdir: str, *, stop=None, quiet: bool = False,
          devices=None, checkpoint_lock=None, progress=None, opened=None) -> Outcome:
  """Trains the run `config` describes in `workdir` (resuming it, or skipping it when done).

  A config with `wsd.branches` is a WSD run (sweeps/wsd.py): its records are its branches'.
  `stop`, `devices`, `checkpoint_lock`, `progress`, `opened`: see
  `chinchax.sweeps.train.loop.train`.
  """
  atomic.check_writable(workdir, "workdir", folder=True)
  run_args = _run_args(stop, quiet, devices, checkpoint_lock, progress, opened)
  if wsd.is_wsd(config):
    return outcome(wsd.train_wsd(config, workdir, **run_args))
  record = loop.train(config, workdir, **run_args)
  return _outcome(record["status"], (record,))


def _run_args(stop, quiet, devices, checkpoint_lock, progress, opened) -> dict:
  run_args = dict(stop=stop, quiet=quiet, devices=devices, checkpoint_lock=checkpoint_lock)
  for key, value in (("progress", progress), ("opened", opened)):
    if value is not None:  # only then: stand-ins for loop.train need not know them
      run_args[key] = value
  return run_args


def outcome(result: wsd.Result) -> Outcome:
  """A WSD job's outcome from its parts' records."""
  return _outcome(result.status, result.records)


def branches_outcome(branches: list[dict]) -> Outcome:
  """A WSD job's outcome from its branches' records, its stable run being done (the stable
  run's record is no row of runs.jsonl)."""
  return _outcome(wsd.status_of(branches), tuple(branches))


def _outcome(status: str, rs: tuple[dict, ...]) -> Outcome:
  if status == "stopped":
    stopped = [r for r in rs if r.get("status") == "stopped"] or rs
    return Outcome(status, (), stopped[-1].get("reason"))
  return Outcome(status, rs, next((r["reason"] for r in rs if r.get("reason")), None))


def run(job: Job, *, devices=None, stop=None, quiet: bool = True, checkpoint_lock=None,
        progress=None, opened=None) -> Outcome:
  """`train` on the job; an exception becomes a `failed` record (also its result.json).

  A WSD job runs as the packed executor's pieces do, one after the other: its stable run
  (`run_main`), then each branch (`run_branch`), so that a branch that raises is that
  branch's failed record, in its own folder, and the branches after it still train.
  """
  kw = dict(devices=devices, stop=stop, quiet=quiet, checkpoint_lock=checkpoint_lock,
            progress=progress, opened=opened)
  if wsd.is_wsd(job.config):
    main = run_main(job, **kw)
    if main is not None:
      return main
    return branches_outcome(wsd.train_branches(job.config, lambda b: run_branch(job, b, **kw)))
  try:
    return train(job.config, job.workdir, **kw)
  except Exception as e:  # pylint: disable=broad-except
    return failed(job, reason(e), write=True)


def run_main(job: Job, *, devices=None, stop=None, quiet: bool = True, checkpoint_lock=None,
             progress=None, opened=None) -> Outcome | None:
  """A WSD job's stable run (`wsd.train_main`): None once it is done, its branches to train
  next (`run_branch`, in any order, by any worker); else the job's outcome (failed or
  stopped), as `run` gives it."""
  try:
    atomic.check_writable(job.workdir, "workdir", folder=True)
    main = wsd.train_main(job.config, job.workdir, **_run_args(
        stop, quiet, devices, checkpoint_lock, progress, opened))
  except Exception as e:  # pylint: disable=broad-except
    return failed(job, reason(e), write=True)
  return None if main.get("status") == "done" else _outcome(main["status"], (main,))


def run_branch(job: Job, b: wsd.Branch, *, devices=None, stop=None, quiet: bool = True,
               checkpoint_lock=None, progress=None, opened=None) -> dict:
  """Branch `b` of a WSD job whose stable run is done: its record. An exception is the
  branch's failed record, written in the branch's folder (the stable run's record stays)."""
  try:
    return wsd.train_branch(job.config, job.workdir, b, **_run_args(
        stop, quiet, devices, checkpoint_lock, progress, opened))
  except Exception as e:  # pylint: disable=broad-except
    branch = Job(wsd.branch_name(job.config, b), job.config, wsd.branch_workdir(
        job.config, job.workdir, b), job.shape, b.D, wsd.branch_budget(job.config, b) or None)
    return failed(branch, reason(e), write=True).records[0]


def failed(job: Job, why: str, write: bool = False) -> Outcome:
  """The job failed for `why` before it could write a record of its own."""
  record = records.make(name=job.name, shape=job.shape, D=job.D, status="failed",
                        reason=why, budget=job.budget)
  if write and jax.process_index() == 0:
    atomic.makedirs(job.workdir)
    records.write_result(job.workdir, record)
  return Outcome("failed", (record,), why)


def record_dirs(job: Job) -> list[str]:
  """The folders of the job's records for runs.jsonl (a WSD job's: its branches)."""
  if wsd.is_wsd(job.config):
    return [wsd.branch_workdir(job.config, job.workdir, b) for b in wsd.branches_of(job.config)]
  return [job.workdir]


def finished(job: Job) -> tuple[dict, ...] | None:
  """The job's records when all of it is done, else None."""
  if wsd.is_wsd(job.config):
    return wsd.finished(job.config, job.workdir)
  record = records.read_result(job.workdir)
  return (record,) if record is not None and record.get("status") == "done" else None
