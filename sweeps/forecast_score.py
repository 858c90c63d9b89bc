"""A forecast record (`chinchax forecast`, scaling.plan.forecast) scored against finished runs.

A sweep whose config names one (`forecast = "path/forecast.json"`), or a run given one
(`chinchax train --forecast=...`), scores it when its cells are done and writes
WORKDIR/forecast_score.json, which a sweep's report.md shows; the file is read before
anything trains, so a wrong path is refused first. `chinchax forecast --score=F PATH`
scores it against any run workdir (its result.json), sweep workdir (its runs.jsonl) or
runs.jsonl file.
"""

import json
import os

from chinchax import atomic, json_checks
from chinchax.errors import UserError
from chinchax.scaling.plan import forecast as forecast_lib
from chinchax.scaling.runs import records as records_lib

SCORE_FILE = "forecast_score.json"


def load(path: str) -> dict:
  """The forecast record at `path`; a UserError naming what is wrong."""
  return json_checks.load(path, "forecast", "chinchax forecast --law=law.json --flops=C "
                          "--out=forecast.json", forecast_lib.check)


def records_of(path: str) -> list[dict]:
  """The run records under `path`: a sweep workdir, a run workdir, or a runs.jsonl."""
  path = os.fspath(path)
  if path.endswith(".jsonl"):
    if not atomic.exists(path):
      raise UserError(f"{path}: no such file")
    return [r for _, r in records_lib.read_runs(path)]
  runs = os.path.join(path, "runs.jsonl")
  if atomic.exists(runs):
    return [r for _, r in records_lib.read_runs(runs)]
  record = records_lib.read_result(path)
  if record is None:
    raise UserError(f"{path}: neither a sweep workdir (runs.jsonl) nor a finished run "
                    "(result.json)")
  return [record]


def score_workdir(workdir: str, forecast_path: str) -> tuple[str, str]:
  """Scores the forecast against the sweep's runs; (the score file, its one-line summary)."""
  return score_records(workdir, forecast_path, records_of(workdir))


def score_records(workdir: str, forecast_path: str, records) -> tuple[str, str]:
  """Scores the forecast against `records` into WORKDIR/forecast_score.json; (its path, its
  one-line summary)."""
  score = forecast_lib.score(load(forecast_path), records)
  score["forecast_path"] = os.fspath(forecast_path)
  path = os.path.join(workdir, SCORE_FILE)
  atomic.write_json(path, score)
  return path, forecast_lib.score_line(score)


def read_score(workdir: str) -> dict | None:
  """WORKDIR/forecast_score.json, or None (no forecast, or unreadable: report.md skips it)."""
  text = atomic.read_text(os.path.join(workdir, SCORE_FILE))
  try:
    return json.loads(text) if text is not None else None
  except json.JSONDecodeError:
    return None
