"""The run files: a sweep's `runs.jsonl` records (and each run's `metrics.jsonl` curve) and a
CSV of runs, read into one row dict per run (scaling.runs.table explains the fields and rules).

Every bad value is a UserError naming its file, line and field. `chinchax fit-hparams`
(scaling.hparams.runs) reads its runs.jsonl and CSVs through the same pieces (`run_records`,
`csv_table`, `row`, `tokens_and_flops`, `positive`, `loss`, `check_names`), adding its own
columns and keeping a failed or diverged run as diverged.
"""

import csv
import dataclasses
import io
import math
import os
from typing import Any

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.runs import records

RUN_SCHEMA = records.SCHEMA


@dataclasses.dataclass(frozen=True, eq=False)
class Curve:
  """One run's held-out loss against tokens seen; C = (run's FLOPs per token)·D."""

  name: str
  N: float
  D: np.ndarray
  C: np.ndarray
  loss: np.ndarray



def positive(where: str, field: str, value: Any) -> float:
  try:
    x = float(value)
  except (TypeError, ValueError, OverflowError):
    raise UserError(f"{where}: {field} is not a number: {_short(value)}") from None
  if not (math.isfinite(x) and x > 0):
    raise UserError(f"{where}: {field} must be a positive finite number, got {_short(value)}")
  return x


def check_columns(where: str, header: list[str], flops: str, chinchilla: str) -> None:
  """The columns every table of runs needs (a CSV's, a DataFrame's, a mapping's): N, loss, D
  or C, and C when the FLOPs are counted the chinchilla way (`chinchilla`: how the caller
  asked for that)."""
  for need in ("N", "loss"):
    if need not in header:
      raise UserError(f"{where}: missing column {need!r} (columns: {_columns(header)})")
  if "D" not in header and "C" not in header:
    raise UserError(f"{where}: needs a column 'D' (tokens) or 'C' (FLOPs); "
                    f"columns: {_columns(header)}")
  if flops == "chinchilla" and "C" not in header:
    raise UserError(f"{where}: {chinchilla} needs a 'C' column; runs without one can only "
                    "give C = 6ND")


def _columns(header: list[str]) -> str:
  text = ", ".join(header)
  return text if len(text) <= 80 else text[:77] + "..."


def _short(value: Any) -> str:
  text = repr(value)
  return text if len(text) <= 60 else text[:57] + "..."


def _text(path: str, encoding: str = "utf-8", what: str = "") -> str:
  try:
    data = atomic.read_bytes(path)
    text = None if data is None else data.decode(encoding)
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"{path}: cannot read{what}: {e}") from None
  if text is None:
    raise UserError(f"{path}: not found; a sweep workdir holds runs.jsonl once a run finishes")
  return text


def run_records(path: str) -> list[tuple[str, dict]]:
  """(path:line, record) of each run of a runs.jsonl, read by scaling/runs/records.py (a
  damaged line refused, a later line of a name replacing an earlier one), each of schema
  RUN_SCHEMA and status done or failed; a file with no runs is refused."""
  latest = records.read_runs(path)
  for where, rec in latest:
    if rec.get("schema") != RUN_SCHEMA:
      raise UserError(f"{where}: schema is {_short(rec.get('schema'))}, expected "
                      f"{RUN_SCHEMA!r}")
    if rec.get("status") not in ("done", "failed"):
      raise UserError(f"{where}: status is {_short(rec.get('status'))}, expected 'done' or "
                      "'failed'")
  if not latest:
    raise UserError(f"{path}: no runs in it")
  return latest


def read_records(path: str, workdir: str, params: str, flops: str):
  """The fit's rows and curves of a runs.jsonl (`run_records`), each field checked, in the
  order of the runs' names. The file's order is the order its runs finished, which varies
  with the executor (two cells at a time, a WSD job's branches as pieces), and the
  bootstrap's draws index the rows: so the same runs give the same law.json."""
  latest = run_records(path)
  rows, curves, failed = [], [], 0
  for where, rec in latest:
    if rec["status"] == "failed":
      failed += 1
      continue
    n_key = "N_total" if params == "total" else "N_non_embedding"
    get = lambda k: positive(f"{where} ({rec['name']})", k, rec.get(k))
    N, D, loss = get(n_key), get("D"), get("eval_loss")
    C = 6.0 * N * D if flops == "6ND" else get("flops_chinchilla")
    budget = math.nan if rec.get("budget") is None else get("budget")
    U = math.nan if rec.get("unique_tokens") is None else get("unique_tokens")
    rows.append(dict(name=rec["name"], N=N, D=D, C=C, loss=loss, budget=budget, U=U,
                     schedule=str(rec.get("schedule") or "cosine")))
    if rec.get("curve"):
      if not isinstance(rec["curve"], str):
        raise UserError(f"{where} ({rec['name']}): curve must be a file name such as "
                        f"'metrics.jsonl', got {_short(rec['curve'])}")
      curve_path = os.path.join(workdir, rec["name"], rec["curve"])
      if atomic.exists(curve_path):
        curves.append(read_curve(curve_path, rec["name"], N, C / D))
  rows.sort(key=lambda r: r["name"])
  curves.sort(key=lambda c: c.name)
  return rows, curves, failed


def read_curve(path: str, name: str, N: float, flops_per_token: float) -> Curve:
  """The eval losses of a metrics.jsonl (read by scaling/runs/records.py: a torn line is dropped)."""
  by_tokens = {}
  for m in records.read_metrics(path):
    where = f"{path} (step {m['step']})"
    if m.get("eval_loss") is None:
      continue
    if m.get("tokens") == 0:
      continue  # the step-0 eval has no C on a log axis
    tokens = positive(where, "tokens", m.get("tokens"))
    by_tokens[tokens] = positive(where, "eval_loss", m["eval_loss"])  # a resume's redo wins
  D = np.array(sorted(by_tokens), np.float64)
  loss = np.array([by_tokens[t] for t in sorted(by_tokens)], np.float64)
  return Curve(name, N, D, flops_per_token * D, loss)


def read_csv(path: str, flops: str):
  rows = csv_table(path, lambda header: check_columns(path, header, flops,
                                                      "--flops=chinchilla"))
  return table_rows(path, os.path.basename(path), rows)


def csv_table(path: str, check_header) -> list[tuple[int, dict]]:
  """(line, {column: text}) of each non-blank row of a CSV of runs, one value per column;
  `check_header(header)` checks the columns before a CSV without rows is refused."""
  text = _text(path, encoding="utf-8-sig", what=" as CSV")  # -sig: a spreadsheet's BOM
  try:
    reader = csv.reader(io.StringIO(text, newline=""))
    table = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
  except csv.Error as e:
    raise UserError(f"{path}: cannot read as CSV: {e}") from None
  if not table:
    raise UserError(f"{path}: empty; expected a header line such as N,D,loss and one row "
                    "per run")
  header = [h.strip() for h in table[0][1]]
  if len(header) == 1:
    for sep, word in ((";", "semicolon"), ("\t", "tab"), ("|", "bar")):
      if sep in header[0]:
        raise UserError(f"{path}: the header is {word}-separated; chinchax reads "
                        "comma-separated CSV (save it as CSV with commas)")
  repeated = sorted({h for h in header if header.count(h) > 1})
  if repeated:
    raise UserError(f"{path}: column {_short(repeated[0])} appears more than once in the header; "
                    "keep one")
  rows = []
  for line, cells in table[1:]:
    if len(cells) != len(header):
      kind = "short" if len(cells) < len(header) else "long"
      raise UserError(f"{path}:{line}: {len(cells)} values for the {len(header)} columns "
                      f"{_columns(header)} (a {kind} row); give one value per column")
    rows.append((line, dict(zip(header, cells))))
  check_header(header)
  if not rows:
    raise UserError(f"{path}: no rows")
  return rows


def is_missing(value: Any) -> bool:
  """An empty cell: a CSV's blank, or a DataFrame's None/NaN (how pandas shows a blank)."""
  if value is None:
    return True
  if isinstance(value, str):
    return not value.strip()
  try:
    return math.isnan(float(value))
  except (TypeError, ValueError, OverflowError):
    return False


def is_diverged(value: Any) -> bool:
  """A loss of nan or inf: the run diverged (data about the run, not a typo)."""
  try:
    return not math.isfinite(float(value))
  except (TypeError, ValueError, OverflowError):
    return False


def row(path: str, base: str, line: int, raw: dict) -> tuple[str, dict, str, str]:
  """(where, the row's values stripped, its name, its status) of one row of a table of runs:
  the name is the `run` (else `name`) column's, else `base`:line; the status is "" when
  the row has none."""
  r = {k: (v.strip() if isinstance(v, str) else v) for k, v in raw.items()}
  name = r.get("run") if not is_missing(r.get("run")) else r.get("name")
  name = str(name) if not is_missing(name) else f"{base}:{line}"
  status = "" if is_missing(r.get("status")) else str(r["status"])
  return f"{path}:{line}", r, name, status


def tokens_and_flops(where: str, r: dict, N: float) -> tuple[float, float]:
  """(D, C) of a row that gives D or C (or both): a missing D is C/(6N), a missing C 6·N·D."""
  D = None if is_missing(r.get("D")) else positive(where, "D", r["D"])
  C = None if is_missing(r.get("C")) else positive(where, "C", r["C"])
  if D is None and C is None:
    raise UserError(f"{where}: neither D nor C is given")
  D = C / (6.0 * N) if D is None else D
  C = 6.0 * N * D if C is None else C
  return D, C


def loss(where: str, value: Any) -> float:
  """A finished run's loss: a positive number (a run that failed says so in its status)."""
  try:
    return positive(where, "loss", value)
  except UserError as e:
    raise UserError(f"{e}; a run that failed is kept out with a status column "
                    "(status=failed)") from None


def check_names(path: str, names: list[str]) -> None:
  if len(set(names)) < len(names):
    raise UserError(f"{path}: the 'run' column repeats a name; give each row its own")


def table_rows(path: str, base: str, records):
  """Row dicts from (line, {column: value}) pairs of a CSV or a DataFrame; extra columns are
  ignored. Returns (rows, failed, diverged): `failed` counts status=failed rows, `diverged`
  names the rows whose loss is nan or inf, both kept out of the fit."""
  rows, failed, diverged = [], 0, []
  for line, raw in records:
    where, r, name, status = row(path, base, line, raw)
    if status == "failed":
      failed += 1
      continue
    if is_diverged(r["loss"]):
      diverged.append(name)
      continue
    N = positive(where, "N", r["N"])
    L = loss(where, r["loss"])
    D, C = tokens_and_flops(where, r, N)
    optional = lambda k: math.nan if is_missing(r.get(k)) else positive(where, k, r[k])
    schedule = "cosine" if is_missing(r.get("schedule")) else str(r["schedule"])
    rows.append(dict(name=name, N=N, D=D, C=C, loss=L, budget=optional("budget"),
                     U=optional("U"), schedule=schedule, status=status))
  check_names(path, [r["name"] for r in rows])
  return rows, failed, diverged
