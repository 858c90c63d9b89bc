"""The runs of an LR x batch grid, read for `chinchax fit-hparams`, and grouped into points.

Inputs: a CSV with columns `N`, `D` (or `C`), `lr`, `batch_tokens`, `loss` (optional `run`,
`status`, `seq_len`), or chinchax's own runs.jsonl (or the sweep workdir holding it), whose
records hold `N_total`, `D`, `eval_loss`, `hparams.peak_lr`, `hparams.batch_size` x
`hparams.seq_len`. Both are read as `chinchax fit` reads them (scaling/runs/files.py): the
runs.jsonl through scaling/runs/records.py (a damaged line refused, a later line of a name
replacing an earlier one: a rerun counts once, as its last run), each record of the run schema
and of status done or failed; a CSV with the same column checks, number parsing and names.
What is this module's own: the lr and batch columns, and what a failed run is. A loss that is
empty, nan or inf, or a run whose status is `failed` (the trainer's diverged run), is a
*diverged* run: kept (its LR bounds the optimum from above) but never averaged into a fit. A
failed record without hparams (a job that failed before it trained, sweeps/job.py) has no
place in the grid: left out, and named (`meta["not_trained"]`).

A point is one (N, D): runs of the same N whose D agree within `D_RTOL` (a batch that does not
divide D rounds it a little differently per batch). No jax here.
"""

import dataclasses
import math
import os

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.runs import files

D_RTOL = 0.05
CSV_COLUMNS = "N, D (or C), lr, batch_tokens, loss"


@dataclasses.dataclass(frozen=True)
class Run:
  N: float
  D: float
  lr: float           # peak learning rate
  B: float            # tokens per batch
  loss: float         # nan: diverged or failed
  name: str = ""


@dataclasses.dataclass(frozen=True, eq=False)
class Point:
  """The runs of one (N, D): arrays over its runs."""

  N: float
  D: float
  lr: np.ndarray
  B: np.ndarray
  loss: np.ndarray    # nan where the run diverged

  @property
  def C(self) -> float:
    return 6.0 * self.N * self.D


def _diverged(loss, status: str) -> bool:
  """A run that failed, or whose loss is empty, nan or inf: its loss reads as nan."""
  return status == "failed" or files.is_missing(loss) or files.is_diverged(loss)


def read_csv(path: str) -> tuple[list[Run], dict]:
  def check_header(header):
    files.check_columns(path, header, "6ND", "")
    missing = [c for c in ("lr", "batch_tokens") if c not in header]
    if missing:
      raise UserError(f"{path}: missing column{'s' if len(missing) > 1 else ''} "
                      f"{', '.join(missing)}; an LR x batch CSV has {CSV_COLUMNS}")

  runs, seq, base = [], set(), os.path.basename(path)
  for line, raw in files.csv_table(path, check_header):
    where, r, name, status = files.row(path, base, line, raw)
    N = files.positive(where, "N", r["N"])
    D, _ = files.tokens_and_flops(where, r, N)
    runs.append(Run(N, D, files.positive(where, "lr", r["lr"]),
                    files.positive(where, "batch_tokens", r["batch_tokens"]),
                    math.nan if _diverged(r["loss"], status) else files.loss(where, r["loss"]),
                    name))
    if not files.is_missing(r.get("seq_len")):
      seq.add(int(files.positive(where, "seq_len", r["seq_len"])))
  files.check_names(path, [r.name for r in runs])
  return runs, {"seq_len": sorted(seq) or None}


def read_jsonl(path: str) -> tuple[list[Run], dict]:
  runs = []
  meta = {"seq_len": set(), "schedule": set(), "optimizer": set(), "not_trained": set()}
  for where, r in files.run_records(path):
    where = f"{where} ({r['name']})"
    h = r.get("hparams")
    if not isinstance(h, dict) or "peak_lr" not in h:
      if r["status"] == "failed":  # failed before it trained: no LR, no batch
        meta["not_trained"].add(r["name"])
        continue
      raise UserError(f"{where}: a run record without hparams.peak_lr; fit-hparams reads "
                      f"chinchax's runs.jsonl or a CSV with {CSV_COLUMNS}")
    seq_len = files.positive(where, "hparams.seq_len", h.get("seq_len"))
    loss = r.get("eval_loss")
    runs.append(Run(files.positive(where, "N_total", r.get("N_total")),
                    files.positive(where, "D", r.get("D")),
                    files.positive(where, "hparams.peak_lr", h["peak_lr"]),
                    files.positive(where, "hparams.batch_size", h.get("batch_size")) * seq_len,
                    math.nan if _diverged(loss, r["status"])
                    else files.positive(where, "eval_loss", loss), r["name"]))
    meta["seq_len"].add(int(seq_len))
    meta["schedule"].add(str(r.get("schedule") or h.get("schedule") or ""))
    meta["optimizer"].add("adamw " + ", ".join(
        f"{k}={h[k]:g}" for k in ("b1", "b2", "weight_decay", "clip_norm", "final_lr_ratio")
        if isinstance(h.get(k), (int, float))))
  return runs, {k: sorted(v) for k, v in meta.items()}


def read(paths) -> tuple[list[Run], dict]:
  """(runs, what the files say of their conventions) from CSVs, runs.jsonl files, workdirs."""
  runs, meta = [], {}
  for p in paths:
    p = os.fspath(p)
    if atomic.isdir(p):
      p = os.path.join(p, "runs.jsonl")
    more, m = (read_csv if p.endswith(".csv") else read_jsonl)(p)
    runs += more
    for k, v in m.items():
      meta[k] = sorted(set(meta.get(k) or []) | set(v or []))
  if not runs:
    raise UserError(f"no runs in {', '.join(map(str, paths))}")
  return runs, meta


def points(runs: list[Run]) -> list[Point]:
  """The runs grouped by N and by D within D_RTOL, sorted by (N, D)."""
  out = []
  for N in sorted({r.N for r in runs}):
    group = sorted((r for r in runs if r.N == N), key=lambda r: r.D)
    clusters = [[group[0]]]
    for r in group[1:]:
      if r.D > clusters[-1][0].D * (1 + D_RTOL):
        clusters.append([])
      clusters[-1].append(r)
    for c in clusters:
      out.append(Point(N, float(np.exp(np.mean([math.log(r.D) for r in c]))),
                       np.array([r.lr for r in c]), np.array([r.B for r in c]),
                       np.array([r.loss for r in c])))
  return out
