"""`chinchax fit-tasks` and `chinchax.fit_tasks` end to end: the evaluations read
(scaling.tasks.table), each task's two steps and their joint bootstrap (scaling.tasks.steps),
the tasks.json document (scaling.tasks.file), written atomically, and the plots.

    import chinchax
    laws = chinchax.fit_tasks("ladder.csv", out="tasks.json", loss_unit="bpb")
    laws.predict("hellaswag", N=7e9, D=2e12)   # loss, accuracy, 90% intervals, extrapolated
"""

import dataclasses
import datetime
import hashlib
import json
import os
from collections.abc import Callable

import numpy as np

from chinchax import atomic, versions
from chinchax.errors import UserError
from chinchax.scaling.law import schema as law_schema
from chinchax.scaling.numerics import intervals
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.tasks import file as tasks_file
from chinchax.scaling.tasks import link, predict, steps, table


@dataclasses.dataclass(frozen=True, eq=False)
class TaskLaws:
  """A validated tasks.json in memory (draws as rows) and, fresh from a fit, the fits."""

  doc: dict
  fits: dict = dataclasses.field(default_factory=dict)  # {task: steps.TaskFit}
  written: tuple[str, ...] = ()  # the files the fit wrote

  @property
  def tasks(self) -> list[str]:
    return list(self.doc["tasks"])

  @property
  def warnings(self) -> list[str]:
    return list(self.doc["warnings"])

  def predict(self, task: str, N: float, D: float, ci: float | None = None) -> dict:
    if task not in self.doc["tasks"]:
      raise UserError(f"no task {task!r} in these laws; tasks: {', '.join(self.tasks)}")
    level = self.doc["settings"]["ci"] if ci is None else intervals.check_level(ci)
    return predict.at(self.doc["tasks"][task], N, D, level)

  def at(self, N: float, D: float, ci: float | None = None) -> dict:
    """{task: prediction} at (N, D) for every task (`predict`), with each task's warnings."""
    return {t: {**self.predict(t, N, D, ci), "warnings": list(e["warnings"])}
            for t, e in self.doc["tasks"].items()}

  def save(self, path) -> None:
    tasks_file.save(path, self.doc)

  @classmethod
  def load(cls, path) -> "TaskLaws":
    return cls(tasks_file.load(path))


def _round7(x) -> float:
  return float(f"{float(x):.7g}")


def _ci(draws, names, offset, level, estimates):
  if draws is None or not len(draws):
    return None
  return {n: intervals.holding([_round7(v) for v in intervals.interval(draws[:, offset + i],
                                                                       level)], estimates[i])
          for i, n in enumerate(names)}


def entry(fit: steps.TaskFit, level: float, seed: int) -> dict:
  """One task's block of tasks.json."""
  s1, s2 = fit.step1, fit.step2
  N, D, L = fit.final
  th1 = [s1.E, s1.A, s1.B, s1.alpha, s1.beta]
  rms = float(np.sqrt(np.mean((link.predict(s2.params[None], fit.data.loss)[0]
                               - fit.data.accuracy)**2)))
  draws = None if fit.draws is None else np.vectorize(_round7)(fit.draws)
  boot = None if draws is None else {
      "n": int(len(draws)), "dropped": fit.dropped, "seed": seed, "kind": "runs",
      "columns": list(steps.COLUMNS), "samples": draws.tolist()}
  warnings = list(fit.warnings)
  return {
      "step1": {"form": law_schema.PARAMETRIC,
                **dict(zip(parametric.COLUMNS, map(float, th1))),
                "ci": _ci(draws, parametric.COLUMNS, 0, level, th1),
                "runs": len(fit.data.runs), "last": fit.last, "objective": s1.objective,
                "data": {"N": [float(N.min()), float(N.max())],
                         "D": [float(D.min()), float(D.max())],
                         "loss": [float(L.min()), float(L.max())]},
                "warnings": [w for w in warnings if w.startswith("step 1")]},
      "step2": {"form": tasks_file.FORM, **dict(zip(link.COLUMNS, map(float, s2.params))),
                "floor_fixed": not s2.free_floor,
                "ci": _ci(draws, link.COLUMNS, 5, level, list(s2.params)),
                "evaluations": int(len(fit.data.loss)), "loss_range": list(s2.loss_range),
                "accuracy_range": [float(fit.data.accuracy.min()),
                                   float(fit.data.accuracy.max())],
                "rms_residual": rms,
                "warnings": [w for w in warnings if w.startswith("step 2")]},
      "bootstrap": boot,
      "warnings": warnings,
  }


def digest(data: dict[str, table.TaskData]) -> str:
  """sha256 of the evaluations' numbers, in task and row order."""
  h = hashlib.sha256()
  for name in sorted(data):
    t = data[name]
    h.update(json.dumps([name, list(t.runs)]).encode())
    for a in (t.of_run, t.N, t.D, t.loss, t.accuracy):
      h.update(np.ascontiguousarray(a, np.float64).tobytes())
  return h.hexdigest()


def fit_tasks(source, *, out: str | None = None, bootstrap: int = 1000, ci: float = 0.9,
              seed: int = 0, last: int = 1, loss_unit: str = "bpb",
              chance: float | None = None, plots: str | None = None,
              log: Callable[[str], None] | None = None) -> TaskLaws:
  """Task laws in two steps from evaluations (scaling.tasks.table: a CSV path, a DataFrame
  or a mapping of columns run, N, D, task, loss, accuracy [, chance], or a sweep workdir
  whose runs scored tasks).

  loss_unit: "bpb" or "nats", the unit of the `loss` column (stated in tasks.json).
  last: step 1 reads each run's mean over its `last` evaluations of largest D.
  chance: the floor held in step 2 for every task without a `chance` column (None: fitted).
  bootstrap: resamples of runs through both steps (0: no intervals); ci: their level.
  out: write tasks.json there; plots: write step 1 and step 2 figures into that folder.
  Returns TaskLaws: `.predict(task, N, D)`, `.doc`, `.fits`, `.warnings`."""
  level = intervals.check_level(ci)
  if loss_unit not in tasks_file.LOSS_UNITS:
    raise UserError(f"loss unit: expected one of {', '.join(tasks_file.LOSS_UNITS)}, "
                    f"got {loss_unit!r}")
  if isinstance(last, bool) or not isinstance(last, int) or last < 1:
    raise UserError(f"last: expected a whole number >= 1 of final evaluations, got {last!r}")
  if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0:
    raise UserError(f"bootstrap: expected a whole number >= 0, got {bootstrap!r}")
  if chance is not None and not (isinstance(chance, (int, float)) and 0 <= chance < 1):
    raise UserError(f"chance: expected a number in [0, 1), got {chance!r}")
  if out:
    atomic.check_writable(out, "out")
  if plots:
    atomic.check_writable(plots, "plots", folder=True)
  if isinstance(source, (str, os.PathLike)) and atomic.isdir(source) and loss_unit != "bpb":
    raise UserError(f"{os.fspath(source)}: a workdir's task losses are bits per byte (the "
                    f"trainer's unit); drop the loss unit {loss_unit!r}")
  data, name = table.load(source)
  if out and isinstance(source, (str, os.PathLike)) and os.path.abspath(
      os.fspath(source)) == os.path.abspath(os.fspath(out)):
    raise UserError(f"out {out} is the evaluations file; give another --out")
  for d in data.values():  # every task's design refused before any is fitted or printed
    steps.check_design(d, last)
  log = log or (lambda _: None)
  fits, tasks = {}, {}
  for task, d in data.items():
    log(f"{task}: {len(d.runs)} runs, {len(d.loss)} evaluations")
    fits[task] = steps.fit_task(d, bootstrap=bootstrap, seed=seed, last=last, level=level,
                                chance=chance if d.chance is None else None)
    tasks[task] = entry(fits[task], level, seed)
  doc = {
      "schema": tasks_file.SCHEMA,
      "tasks": tasks,
      "conventions": {"loss": tasks_file.LOSS_UNITS[loss_unit],
                      "N": "parameters as the evaluations give them",
                      "D": "tokens seen at the evaluation",
                      "accuracy": "fraction of items answered correctly, in [0, 1]"},
      "settings": {"ci": level, "bootstrap": bootstrap, "seed": seed, "last": last,
                   "delta": parametric.DEFAULT_DELTA, "chance": chance},
      "provenance": {"chinchax": versions.chinchax(),
                     "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                         timespec="seconds"),
                     "inputs": [name], "inputs_sha256": digest(data)},
      "warnings": [f"{task}: {w}" for task, e in tasks.items() for w in e["warnings"]],
  }
  laws = TaskLaws(tasks_file.validate(doc), fits)
  written = []
  if out:
    laws.save(out)
    written.append(os.fspath(out))
  if plots:
    from chinchax.scaling.tasks import plots as task_plots  # pylint: disable=g-import-not-at-top  (matplotlib)
    written += task_plots.write(laws, os.fspath(plots))
  return dataclasses.replace(laws, written=tuple(written))
