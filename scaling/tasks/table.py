"""Task evaluations in: a CSV (or a table of columns) of one row per evaluation, or a sweep
workdir whose runs scored tasks (`read_workdir`), into one `TaskData` per task, every bad
value one line naming its file, line and field.

Columns: `run` (the run's name), `N` (its parameters), `D` (the tokens it had seen at this
evaluation: a checkpoint's, not the run's planned total), `task`, `loss` (the task's loss of
the correct continuation, in the unit the caller states: bits per byte or nats), `accuracy`
(in [0, 1]); optionally `chance` (the task's accuracy by guessing, one value per task). Other
columns are ignored. A run's rows share its N; its last evaluations (largest D) are its final
ones, which step 1 reads.
"""

import dataclasses
import math
import os

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.runs import files

COLUMNS = ("run", "N", "D", "task", "loss", "accuracy")
MIN_RUNS = 5  # step 1 fits five numbers per task


@dataclasses.dataclass(frozen=True, eq=False)
class TaskData:
  """One task's evaluations, float64, one entry per evaluation; `runs` names each run once
  and `of_run` gives each evaluation's index into it."""

  task: str
  runs: tuple[str, ...]
  of_run: np.ndarray
  N: np.ndarray
  D: np.ndarray
  loss: np.ndarray
  accuracy: np.ndarray
  chance: float | None

  def final(self, last: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, D, loss) per run from its `last` evaluations of largest D: the mean loss, at the
    geometric mean of their D (with last=1, the final evaluation as it is)."""
    N, D, L = (np.empty(len(self.runs)) for _ in range(3))
    for r in range(len(self.runs)):
      idx = np.flatnonzero(self.of_run == r)
      idx = idx[np.argsort(self.D[idx])][-last:]
      N[r], D[r], L[r] = self.N[idx[0]], np.exp(np.mean(np.log(self.D[idx]))), np.mean(
          self.loss[idx])
    return N, D, L


def _unit(where: str, field: str, value) -> float:
  try:
    x = float(value)
  except (TypeError, ValueError, OverflowError):
    raise UserError(f"{where}: {field} is not a number: {value!r}") from None
  if not (math.isfinite(x) and 0 <= x <= 1):
    hint = " (a percentage? give 0.7 for 70%)" if math.isfinite(x) and 1 < x <= 100 else ""
    raise UserError(f"{where}: {field} {value!r} is outside [0, 1]{hint}")
  return x


def check_header(where: str, header: list[str]) -> None:
  missing = [c for c in COLUMNS if c not in header]
  if missing:
    raise UserError(f"{where}: missing column{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; a task table has one row per evaluation with "
                    f"columns {', '.join(COLUMNS)} (and optionally chance)")


def from_records(source: str, records) -> dict[str, TaskData]:
  """{task: TaskData} from (line, {column: value}) pairs, each value checked."""
  by_task: dict[str, list] = {}
  run_N: dict[str, tuple[float, str]] = {}
  seen: dict[tuple, str] = {}
  chance: dict[str, tuple[float, str]] = {}
  for line, raw in records:
    where = f"{source}:{line}"
    r = {k: (v.strip() if isinstance(v, str) else v) for k, v in raw.items()}
    for name in ("run", "task"):
      if files.is_missing(r.get(name)):
        raise UserError(f"{where}: {name} is empty; give every evaluation its run and task")
    run, task = str(r["run"]), str(r["task"])
    N = files.positive(where, "N", r["N"])
    D = files.positive(where, "D", r["D"])
    loss = files.positive(where, "loss", r["loss"])
    acc = _unit(where, "accuracy", r["accuracy"])
    if run in run_N and not math.isclose(run_N[run][0], N, rel_tol=1e-9):
      raise UserError(f"{where}: run {run!r} has N={N:g} here and N={run_N[run][0]:g} at "
                      f"{run_N[run][1]}; a run is one model: give its rows one N")
    run_N.setdefault(run, (N, where))
    key = (task, run, D)
    if key in seen:
      raise UserError(f"{where}: repeats run {run!r}'s evaluation on {task!r} at D={D:g} "
                      f"({seen[key]}); keep one row per run, task and D")
    seen[key] = where
    if not files.is_missing(r.get("chance")):
      c = _unit(where, "chance", r["chance"])
      if c >= 1:
        raise UserError(f"{where}: chance {c!r} leaves no room above it; give the task's "
                        "accuracy by guessing (0.25 for four choices)")
      if task in chance and chance[task][0] != c:
        raise UserError(f"{where}: task {task!r} has chance {c:g} here and "
                        f"{chance[task][0]:g} at {chance[task][1]}; give one per task")
      chance.setdefault(task, (c, where))
    by_task.setdefault(task, []).append((run, N, D, loss, acc))
  out = {}
  for task, rows in by_task.items():
    names = tuple(dict.fromkeys(r[0] for r in rows))
    if len(names) < MIN_RUNS:
      raise UserError(f"{source}: task {task!r} has {len(names)} run"
                      f"{'s' if len(names) != 1 else ''} ({', '.join(names[:3])}); step 1 "
                      f"fits five numbers per task: give at least {MIN_RUNS} runs of "
                      "different sizes and token counts")
    index = {n: i for i, n in enumerate(names)}
    cols = list(zip(*rows))
    out[task] = TaskData(
        task=task, runs=names, of_run=np.array([index[n] for n in cols[0]]),
        N=np.array(cols[1]), D=np.array(cols[2]), loss=np.array(cols[3]),
        accuracy=np.array(cols[4]), chance=chance[task][0] if task in chance else None)
  return out


def read_csv(path: str) -> dict[str, TaskData]:
  rows = files.csv_table(path, lambda header: check_header(path, header))
  return from_records(path, rows)


def from_columns(table, source: str = "<columns>") -> dict[str, TaskData]:
  """From a mapping {column: values} or a pandas DataFrame (read through `columns`)."""
  keys = list(table.columns) if hasattr(table, "columns") else list(table)
  columns = {}
  for k in keys:
    v = table[k]
    v = v.tolist() if hasattr(v, "tolist") else v
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
      raise UserError(f"{source}: column {k!r} is not a sequence of values")
    columns[str(k)] = list(v)
  check_header(source, list(columns))
  lengths = {k: len(v) for k, v in columns.items()}
  if len(set(lengths.values())) > 1:
    raise UserError(f"{source}: columns of different lengths {lengths}; give one value per "
                    "evaluation in every column")
  n = lengths["run"]
  if not n:
    raise UserError(f"{source}: no rows")
  return from_records(f"{source} row", [(i, {k: v[i] for k, v in columns.items()})
                                        for i in range(n)])


def read_workdir(path: str) -> dict[str, TaskData]:
  """A sweep workdir's task evaluations: each finished run of runs.jsonl (read by
  scaling/runs/records.py) with its `tasks` record (sweeps/train/tasks.py), one row per
  evaluation, N the run's N_total, D the tokens seen at that evaluation, the loss in bits per
  byte. Runs that scored a task from different files (another sha256) are refused."""
  runs = os.path.join(path, "runs.jsonl")
  if not atomic.exists(runs):
    raise UserError(f"{path}: a folder without runs.jsonl; fit-tasks reads a CSV of task "
                    f"evaluations ({', '.join(COLUMNS)}) or a sweep workdir whose runs scored "
                    "tasks (train.tasks in its config)")
  rows, files_of = [], {}
  for where, rec in files.run_records(runs):
    tasks = rec.get("tasks")
    if rec["status"] != "done" or not tasks:
      continue
    if not isinstance(tasks, dict):
      raise UserError(f"{where}: tasks must be an object of task records, got "
                      f"{type(tasks).__name__}")
    for task, t in tasks.items():
      evals = t.get("evals") if isinstance(t, dict) else None
      if not isinstance(evals, list) or t.get("loss_unit") != "bpb":
        raise UserError(f"{where}: task {task!r} is not a task record of chinchax's trainer "
                        "(evals in bits per byte)")
      sha, first = files_of.setdefault(task, (t.get("sha256"), rec["name"]))
      if t.get("sha256") != sha:
        raise UserError(f"{where}: run {rec['name']!r} scored task {task!r} from another "
                        f"file than run {first!r} (sha256 differs); a task's runs must "
                        "score the same items")
      for e in evals:
        if not isinstance(e, dict):
          raise UserError(f"{where}: task {task!r} has an evaluation that is not an object")
        rows.append((where.rpartition(":")[2], {
            "run": rec["name"], "N": rec.get("N_total"), "D": e.get("tokens"),
            "task": task, "loss": e.get("loss"), "accuracy": e.get("accuracy"),
            "chance": t.get("chance")}))
  if not rows:
    raise UserError(f"{runs}: no finished run scored a task; list tasks in the sweep "
                    "config's train.tasks (e.g. ('stdlib_next_line',)) and rerun")
  return from_records(runs, rows)


def load(source) -> tuple[dict[str, TaskData], str]:
  """({task: TaskData}, a name for the source) from a CSV path or a table of columns."""
  if isinstance(source, (str, os.PathLike)):
    path = os.fspath(source)
    if not atomic.exists(path):
      raise UserError(f"{path}: not found; fit-tasks reads a CSV of task evaluations "
                      f"({', '.join(COLUMNS)})")
    if atomic.isdir(path):
      return read_workdir(path), path
    return read_csv(path), path
  if hasattr(source, "columns") or isinstance(source, dict):
    return from_columns(source, f"<{type(source).__name__}>"), f"<{type(source).__name__}>"
  raise UserError(f"task evaluations: expected a CSV path, a DataFrame or a mapping of "
                  f"columns, got {type(source).__name__}")
