"""The runs of an LR x batch grid, read for `chinchax fit-hparams`, and grouped into points.

Inputs: a CSV with columns `N`, `D`, `lr`, `batch_tokens`, `loss` (optional `status`,
`seq_len`), or chinchax's own runs.jsonl (or the sweep workdir holding it), whose records hold
`N_total`, `D`, `eval_loss`, `hparams.peak_lr`, `hparams.batch_size` x `hparams.seq_len`.
A loss that is empty, nan or inf, or a run whose status is `failed`, is a *diverged* run: kept
(its LR bounds the optimum from above) but never averaged into a fit.

A point is one (N, D): runs of the same N whose D agree within `D_RTOL` (a batch that does not
divide D rounds it a little differently per batch). No jax here.
"""

import csv
import dataclasses
import io
import json
import math
import os

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError

D_RTOL = 0.05
CSV_COLUMNS = ("N", "D", "lr", "batch_tokens", "loss")


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


def _float(where: str, field: str, value, positive: bool = True) -> float:
  try:
    x = float(value)
  except (TypeError, ValueError, OverflowError):
    raise UserError(f"{where}: {field} is not a number: {str(value)[:40]!r}") from None
  if positive and not (math.isfinite(x) and x > 0):
    raise UserError(f"{where}: {field} must be a positive finite number, got {value!r}")
  return x


def _loss(where: str, value, status: str = "") -> float:
  if status == "failed" or value is None or (isinstance(value, str) and not value.strip()):
    return math.nan
  x = _float(where, "loss", value, positive=False)
  return x if math.isfinite(x) else math.nan


def _read(path: str) -> str:
  try:
    data = atomic.read_bytes(path)
    text = None if data is None else data.decode("utf-8")
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"{path}: cannot read: {e}") from None
  if text is None:
    raise UserError(f"{path}: not found; give a CSV, a runs.jsonl or a sweep workdir")
  return text


def read_csv(path: str) -> tuple[list[Run], dict]:
  rows = list(csv.DictReader(io.StringIO(_read(path))))
  header = set(rows[0]) if rows else set()
  missing = [c for c in CSV_COLUMNS if c not in header]
  if missing:
    raise UserError(f"{path}: missing column{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; an LR x batch CSV has {', '.join(CSV_COLUMNS)}")
  runs, seq = [], set()
  for i, r in enumerate(rows, 2):
    where = f"{path}:{i}"
    runs.append(Run(_float(where, "N", r["N"]), _float(where, "D", r["D"]),
                    _float(where, "lr", r["lr"]), _float(where, "batch_tokens", r["batch_tokens"]),
                    _loss(where, r["loss"], (r.get("status") or "").strip()), r.get("run", "")))
    if r.get("seq_len"):
      seq.add(int(_float(where, "seq_len", r["seq_len"])))
  return runs, {"seq_len": sorted(seq) or None}


def read_jsonl(path: str) -> tuple[list[Run], dict]:
  runs, meta = [], {"seq_len": set(), "schedule": set(), "optimizer": set()}
  for i, line in enumerate(_read(path).splitlines(), 1):
    if not line.strip():
      continue
    where = f"{path}:{i}"
    try:
      r = json.loads(line)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
      raise UserError(f"{where}: not valid JSON ({getattr(e, 'msg', e)})") from None
    h = r.get("hparams") if isinstance(r, dict) else None
    if not isinstance(h, dict) or "peak_lr" not in h:
      raise UserError(f"{where}: a run record without hparams.peak_lr; fit-hparams reads "
                      "chinchax's runs.jsonl or a CSV with " + ", ".join(CSV_COLUMNS))
    seq_len = _float(where, "hparams.seq_len", h.get("seq_len"))
    runs.append(Run(_float(where, "N_total", r.get("N_total")), _float(where, "D", r.get("D")),
                    _float(where, "hparams.peak_lr", h["peak_lr"]),
                    _float(where, "hparams.batch_size", h.get("batch_size")) * seq_len,
                    _loss(where, r.get("eval_loss"), str(r.get("status", ""))),
                    str(r.get("name", ""))))
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
