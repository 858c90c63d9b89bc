"""Reading finished runs: the input of every fit.

RUNS is a sweep workdir (its `runs.jsonl`, plus each run's `metrics.jsonl` loss curve when
present), a `runs.jsonl`, or a CSV with columns `N`, `D` (or `C`), `loss` and optionally
`budget`, `run`, `status`, `U`. Several paths concatenate.

Unique tokens: `U` is the size of the pool a run's D tokens were drawn from (a CSV's `U`
column, a record's `unique_tokens`; NaN where unknown). A run with D > U repeats data; such
runs are what scaling.constrained.fit fits R_D* and R_N* on (Muennighoff et al. 2023).

Conventions: N is `total` (`N_total`) or `non_embedding` (`N_non_embedding`) parameters. C is
`6ND` (6·N·D with N under the chosen parameter convention, so it is recomputed here rather
than read) or `chinchilla` (the record's `flops_chinchilla`). For a CSV, N and C are taken as
given; a missing D is C/(6N) and a missing C is 6·N·D. loss is the record's `eval_loss`
(nats per token).

Schedules: each run carries its LR schedule (the record's `schedule`; a CSV's optional
`schedule` column; "cosine" when absent). WSD cooldown branches (`schedule: "wsd"`) and cosine
runs measure slightly different losses at the same (N, D), so `load_runs(..., schedule=)`
keeps `cosine`, `wsd` or `all` of them.

In a `runs.jsonl` a later record with the same name replaces an earlier one (the file is an
append-only log; a re-run appends). Records with status `failed` are skipped and counted.
A CSV row whose `status` is neither failed nor done/finished (e.g. `running`) is used, and
named in `Runs.unfinished` for the fit's warning (scaling.judgement.checks).
Run names are made unique across paths by prefixing a duplicate with its path.

Budget groups (`budget_groups`): runs with a nominal `budget` are grouped by it exactly.
Runs without one are grouped by their C: walking up in C, a group starts at the smallest
ungrouped C and takes every run with C ≤ (1 + BUDGET_RTOL)·that C; such a group joins a
nominal budget within the same tolerance of its geometric-mean C.
"""

import dataclasses
import hashlib
import os
from typing import Sequence

import numpy as np

from chinchax import atomic
from chinchax.scaling.runs.conventions import FLOPS_CONVENTIONS, PARAMS_CONVENTIONS
from chinchax.errors import UserError
from chinchax.scaling.runs.files import RUN_SCHEMA, Curve, read_csv, read_records  # noqa: F401
from chinchax.scaling.runs.files import check_columns, table_rows
SCHEDULES = ("cosine", "wsd", "all")
FINISHED = ("", "done", "finished", "complete", "completed")  # a CSV's `status` of a used run
BUDGET_RTOL = 0.05


@dataclasses.dataclass(frozen=True, eq=False)
class Runs:
  """Finished runs, one entry per run, float64."""

  N: np.ndarray
  D: np.ndarray
  C: np.ndarray
  loss: np.ndarray
  budget: np.ndarray  # nominal budget per run; NaN where unknown
  name: tuple[str, ...]
  curves: tuple[Curve, ...] = ()
  params: str = "total"
  flops: str = "6ND"
  sources: tuple[str, ...] = ()
  n_failed: int = 0
  schedule: tuple[str, ...] = ()  # per run; empty: all "cosine" (runs made from arrays)
  U: np.ndarray | None = None  # unique tokens per run; NaN where unknown; None: none known
  unfinished: tuple[tuple[str, str], ...] = ()  # (name, status) of runs not marked done
  diverged: tuple[str, ...] = ()  # runs whose loss is nan or inf, kept out of the fit

  @property
  def repeats(self) -> np.ndarray:
    """Mask of the runs that repeat data (D > U)."""
    if self.U is None:
      return np.zeros(len(self.N), bool)
    return np.nan_to_num(self.U, nan=np.inf) < self.D

  def __len__(self) -> int:
    return len(self.N)

  def subset(self, idx) -> "Runs":
    """The runs at `idx` (indices, repeats allowed, or a boolean mask), with their curves."""
    idx = np.asarray(idx)
    if idx.dtype == bool:
      idx = np.flatnonzero(idx)
    name = tuple(self.name[i] for i in idx)
    by_name = {c.name: c for c in self.curves}
    return dataclasses.replace(
        self, N=self.N[idx], D=self.D[idx], C=self.C[idx], loss=self.loss[idx],
        budget=self.budget[idx], name=name,
        schedule=tuple(self.schedule[i] for i in idx) if self.schedule else (),
        U=None if self.U is None else self.U[idx],
        curves=tuple(by_name[n] for n in name if n in by_name))


def make_runs(N, D=None, loss=None, *, C=None, budget=None, name=None, curves=(),
              params="total", flops="6ND", sources=("<arrays>",), n_failed=0, U=None) -> Runs:
  """Runs from arrays (D or C may be left out: D = C/(6N), C = 6·N·D; U: unique tokens)."""
  N = np.asarray(N, np.float64)
  if D is None and C is None:
    raise UserError("runs need D or C for every run")
  D = np.asarray(C, np.float64) / (6.0 * N) if D is None else np.asarray(D, np.float64)
  C = 6.0 * N * D if C is None else np.asarray(C, np.float64)
  loss = np.asarray(loss, np.float64)
  n = len(N)
  budget = np.full(n, np.nan) if budget is None else np.asarray(budget, np.float64)
  name = tuple(f"run{i}" for i in range(n)) if name is None else tuple(name)
  if n == 0:
    raise UserError("runs: no runs")
  U_ = np.full(n, np.nan) if U is None else np.asarray(U, np.float64)
  for field, x in (("N", N), ("D", D), ("C", C), ("loss", loss), ("budget", budget),
                   ("U", U_)):
    if x.shape != (n,):
      raise UserError(f"runs: {field} has shape {x.shape}, expected ({n},) like N")
    bad = ~(np.isfinite(x) & (x > 0))
    if field in ("budget", "U"):
      bad &= ~np.isnan(x)  # NaN: unknown
    if bad.any():
      i = int(np.flatnonzero(bad)[0])
      raise UserError(f"runs: {field} of run {name[i]!r} must be positive and finite, "
                      f"got {x[i]!r}")
  return Runs(N, D, C, loss, budget, name, tuple(curves), params, flops, tuple(sources),
              int(n_failed), U=None if U is None else U_)


def digest(runs: Runs) -> str:
  """sha256 of what a fit reads: every run's N, D, C, loss, budget and U (float64, in
  order) and the conventions; the same runs from a CSV, a runs.jsonl or a DataFrame hash
  alike, and a changed value changes it."""
  h = hashlib.sha256(f"{runs.params} {runs.flops} {len(runs)}\n".encode())
  U = np.full(len(runs), np.nan) if runs.U is None else runs.U
  for x in (runs.N, runs.D, runs.C, runs.loss, runs.budget, U):
    h.update(np.ascontiguousarray(x, "<f8").tobytes())
  return h.hexdigest()


def budget_groups(runs: Runs, rtol: float = BUDGET_RTOL) -> list[np.ndarray]:
  """Indices of each IsoFLOP group, ordered by C (rule in the module docstring)."""
  known = ~np.isnan(runs.budget)
  nominal = {float(b): list(np.flatnonzero(runs.budget == b))
             for b in np.unique(runs.budget[known])}
  clustered = []
  rest = np.flatnonzero(~known)
  rest = rest[np.argsort(runs.C[rest], kind="stable")]
  start = 0
  while start < len(rest):
    stop = start
    while stop < len(rest) and runs.C[rest[stop]] <= (1 + rtol) * runs.C[rest[start]]:
      stop += 1
    members = list(rest[start:stop])
    C_mean = float(np.exp(np.mean(np.log(runs.C[members]))))
    match = [b for b in nominal if abs(C_mean / b - 1) <= rtol]
    if match:
      nominal[match[0]].extend(members)
    else:
      clustered.append(members)
    start = stop
  groups = [np.sort(np.asarray(g, np.int64)) for g in [*nominal.values(), *clustered]]
  return sorted(groups, key=lambda g: float(np.mean(np.log(runs.C[g]))))


# --------------------------------------------------------------------------- reading


def load_runs(paths: Sequence[str], params: str = "total", flops: str = "6ND",
              schedule: str = "all") -> Runs:
  """Concatenates the runs of every path (workdir, runs.jsonl or CSV) with that schedule."""
  if schedule not in SCHEDULES:
    raise UserError(f"unknown schedule {schedule!r}; use one of {SCHEDULES}")
  if params not in PARAMS_CONVENTIONS:
    raise UserError(f"unknown params convention {params!r}; use one of {PARAMS_CONVENTIONS}")
  if flops not in FLOPS_CONVENTIONS:
    raise UserError(f"unknown FLOPs convention {flops!r}; use one of {FLOPS_CONVENTIONS}")
  if isinstance(paths, (str, os.PathLike)):
    paths = [paths]
  if not paths:
    raise UserError("no RUNS given: pass a sweep workdir, a runs.jsonl or a CSV")
  rows, curves, n_failed, names, diverged = [], [], 0, set(), []
  for path in map(os.fspath, paths):
    if atomic.isdir(path):
      file_rows, file_curves, failed = read_records(os.path.join(path, "runs.jsonl"), path,
                                                     params, flops)
    elif not atomic.exists(path):
      raise UserError(f"{path}: no such file or folder")
    elif path.endswith(".jsonl"):
      file_rows, file_curves, failed = read_records(path, os.path.dirname(path), params,
                                                     flops)
    elif path.endswith(".csv"):
      (file_rows, failed, lost), file_curves = read_csv(path, flops), []
      diverged += lost
    else:
      raise UserError(f"{path}: cannot read this as runs; pass a sweep workdir, a "
                      "runs.jsonl or a .csv")
    renamed = {}
    for row in file_rows:
      if row["name"] in names:
        renamed[row["name"]] = row["name"] = f"{path}:{row['name']}"
      names.add(row["name"])
    curves += [dataclasses.replace(c, name=renamed.get(c.name, c.name)) for c in file_curves]
    rows += file_rows
    n_failed += failed
  if schedule != "all":
    kept = [r for r in rows if r["schedule"] == schedule]
    if rows and not kept:
      raise UserError(f"no {schedule} runs in {', '.join(map(os.fspath, paths))} (schedules "
                      f"found: {', '.join(sorted({r['schedule'] for r in rows}))})")
    names = {r["name"] for r in kept}
    rows, curves = kept, [c for c in curves if c.name in names]
  return _from_rows(rows, curves, params, flops, tuple(map(os.fspath, paths)), n_failed,
                    diverged)


def _from_rows(rows, curves, params, flops, sources, n_failed, diverged) -> Runs:
  if not rows:
    raise UserError(f"no usable runs in {', '.join(sources)} ({n_failed} failed and "
                    f"{len(diverged)} diverged runs skipped)")
  col = lambda k: np.array([r[k] for r in rows], np.float64)
  U = col("U")
  unfinished = tuple((r["name"], r["status"]) for r in rows
                     if str(r.get("status", "")).lower() not in FINISHED)
  return Runs(col("N"), col("D"), col("C"), col("loss"), col("budget"),
              tuple(r["name"] for r in rows), tuple(curves), params, flops,
              sources, n_failed, tuple(r["schedule"] for r in rows),
              U=None if np.all(np.isnan(U)) else U, unfinished=unfinished,
              diverged=tuple(diverged))


def from_columns(table, params: str = "total", flops: str = "6ND",
                 source: str = "<columns>") -> Runs:
  """Runs from a table of columns: a mapping {column: values} or a pandas DataFrame (read
  through its `columns`, so pandas is never imported here), with a CSV's columns and rules:
  N, D (or C), loss, optionally budget, U, run (or name), status, schedule; other columns
  are ignored; a blank (None, NaN) is an empty cell; a nan or inf loss is a diverged run."""
  if params not in PARAMS_CONVENTIONS or flops not in FLOPS_CONVENTIONS:
    raise UserError(f"unknown conventions {params!r}, {flops!r}; use one of "
                    f"{PARAMS_CONVENTIONS} and {FLOPS_CONVENTIONS}")
  names = [str(c) for c in table.columns] if hasattr(table, "columns") else list(table)
  columns = {str(k): _values(table[k], str(k)) for k in (
      table.columns if hasattr(table, "columns") else table)}
  check_columns("runs", names, flops, "flops_convention='chinchilla'")
  lengths = {k: len(v) for k, v in columns.items()}
  if len(set(lengths.values())) > 1:
    raise UserError(f"runs: columns of different lengths {lengths}; give one value per run "
                    "in every column")
  n = lengths["N"]
  records = [(i, {k: v[i] for k, v in columns.items()}) for i in range(n)]
  rows, failed, diverged = table_rows(f"{source} row", "row", records)
  return _from_rows(rows, [], params, flops, (source,), failed, diverged)


def _values(column, name: str) -> list:
  values = column.tolist() if hasattr(column, "tolist") else column
  if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
    raise UserError(f"runs: column {name!r} is not a sequence of values, got "
                    f"{type(column).__name__}")
  return list(values)
