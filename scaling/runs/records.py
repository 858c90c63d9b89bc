"""Run records on disk: the one reader and writer of `result.json`, `runs.jsonl` and the rows
of `metrics.jsonl`, with one policy for damage.

- `WORKDIR/<run>/result.json`: one finished run (schema `chinchax/run/v1`), made by `make`:

      name, status ("done" | "failed"), reason, budget (the cell's nominal C, or null),
      N_total, N_non_embedding, D (tokens trained), flops_6ND, flops_chinchilla,
      shape {...}, hparams {...}, train_loss, eval_loss, eval_bpb, curve ("metrics.jsonl"),
      schedule, unique_tokens, epochs, tokens_per_s, mfu, wall_s, steps, versions {...},
      and, for a run that scored tasks (config.tasks), tasks {name: {loss, accuracy,
      loss_unit, chance, items, sha256, evaluations [...]}} (sweeps/train/tasks.py)

  Both parameter and both FLOP conventions are stored, so a fit can use either.
- `WORKDIR/runs.jsonl`: one line per finished run, the index of the result.json files (the
  fit's input). A later line of a name replaces an earlier one.
- `WORKDIR/<run>/metrics.jsonl`: one row per logged step (written by the trainer's
  `MetricsWriter`, sweeps/train/metrics.py, which appends through this schema).

Damage: result.json is the truth. One that does not parse reads as "not finished" (the run
resumes from its checkpoints), with a warning naming the file. runs.jsonl is rebuilt from
the records by the sweep that owns it (`sync_runs`) before it is read; a reader with no
records to rebuild from (`chinchax fit runs.jsonl`, `chinchax report`) refuses a damaged line
with its file and line (`read_runs`). metrics.jsonl is append-only, so a torn line is a crash
mid-append and is dropped, the lines around it kept (`read_metrics`).

Every write is atomic (`chinchax.atomic`, local or gs://); runs.jsonl is rewritten whole with
the run's line replaced or added, as an object store has no append.
"""

import dataclasses
import json
import logging
import os
import platform

from chinchax import atomic
from chinchax import versions as versions_lib
from chinchax.errors import UserError
from chinchax.scaling.runs import conventions

SCHEMA = "chinchax/run/v1"


def versions() -> dict[str, str]:
  out = {"python": platform.python_version()}
  for dist in ("chinchax", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint"):
    out[dist] = versions_lib.of(dist) or "unknown"
  return out


def make(*, name: str, shape: conventions.Shape, D: float, status: str = "done",
         reason: str | None = None, budget: float | None = None, **fields) -> dict:
  """A record with the counts of `scaling.runs.conventions`; `fields` adds the measured values."""
  record = {"schema": SCHEMA, "name": name, "status": status, "reason": reason,
            "budget": budget, **conventions.counts(shape, D), "D": float(D),
            "shape": dataclasses.asdict(shape)}
  record.update(fields)
  record.setdefault("curve", "metrics.jsonl")
  record["versions"] = versions()
  return record


# result.json


def write_result(run_dir: str, record: dict) -> str:
  path = os.path.join(run_dir, "result.json")
  atomic.write_json(path, record)
  return path


def read_result(run_dir: str) -> dict | None:
  """The run's record; None when it has none or one that does not parse (then: a warning)."""
  path = os.path.join(run_dir, "result.json")
  data = atomic.read_bytes(path)
  if data is None:
    return None
  try:
    record = json.loads(data.decode("utf-8"))
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    record = e
  if not (isinstance(record, dict) and isinstance(record.get("name"), str)
          and isinstance(record.get("status"), str)):
    logging.warning("%s is not a valid run record (%s); the run counts as not finished and "
                    "resumes from its checkpoints", path,
                    record if isinstance(record, Exception) else "no name or status")
    return None
  return record


# runs.jsonl


def _text(path: str) -> str | None:
  """The file's text; bytes that are not UTF-8 (damage) become U+FFFD and fail to parse."""
  data = atomic.read_bytes(path)
  return None if data is None else data.decode("utf-8", errors="replace")


def _parse_line(line: str):
  """The line's JSON object, or the reason it is not one."""
  try:
    obj = json.loads(line)
  except json.JSONDecodeError as e:
    return f"not valid JSON ({e.msg})"
  except RecursionError:
    return "JSON nested too deep; expected one flat run record per line"
  except ValueError as e:  # e.g. an integer of more digits than Python will convert
    return f"not a readable JSON value ({e})"
  return obj if isinstance(obj, dict) else "expected a JSON object per line"


def json_lines(path: str, missing: str):
  """(path:line, object) for each line of a JSON-lines file; a damaged line is a UserError
  naming its file and line; a missing file is a UserError ending with `missing`."""
  text = _text(path)
  if text is None:
    raise UserError(f"{path}: not found; {missing}")
  for i, line in enumerate(text.splitlines(), 1):
    if line.strip():
      obj = _parse_line(line)
      if isinstance(obj, str):
        raise UserError(f"{path}:{i}: {obj}")
      yield f"{path}:{i}", obj


def read_runs(path: str) -> list[tuple[str, dict]]:
  """(path:line, record) of each run of runs.jsonl, the last line of each name, in the log's
  order (a re-run moves to the end). A damaged line is refused (see the module docstring)."""
  latest = {}
  for where, rec in json_lines(path, "a sweep workdir holds runs.jsonl once a run finishes"):
    if not isinstance(rec.get("name"), str) or not rec["name"]:
      raise UserError(f"{where}: record has no name")
    latest.pop(rec["name"], None)
    latest[rec.get("name")] = (where, rec)
  return list(latest.values())


def _index(path: str) -> tuple[list[dict], int]:
  """(the records of runs.jsonl, the number of lines dropped as damaged): what `sync_runs`
  rebuilds from."""
  lines, damaged = [], 0
  for line in (_text(path) or "").splitlines():
    if line.strip():
      rec = _parse_line(line)
      if isinstance(rec, dict) and isinstance(rec.get("name"), str):
        lines.append(rec)
      else:
        damaged += 1
  return lines, damaged


def _write_index(path: str, lines: list[dict]) -> None:
  atomic.write_text(path, "".join(json.dumps(l, allow_nan=False) + "\n" for l in lines))


def upsert_runs(path: str, record: dict) -> None:
  """Adds the record's line to runs.jsonl, replacing an earlier line of the same name."""
  lines, _ = _index(path)
  _write_index(path, [l for l in lines if l.get("name") != record["name"]] + [record])


def sync_runs(path: str, run_dirs: list[str]) -> None:
  """Makes runs.jsonl agree with the records of `run_dirs` (a run's name is its folder's).

  A run with a record has exactly its line; one without (not run yet, or its result.json
  damaged) has none. Lines of other names are kept; damaged lines and repeats are dropped.
  The file is rewritten only when it disagrees, with one warning line saying why when a line
  was damaged, stale or repeated (runs finished since it was written are added quietly).
  """
  lines, damaged = _index(path)
  records = {os.path.basename(os.path.normpath(d)): read_result(d) for d in run_dirs}
  want, seen = [], set()
  for line in lines:  # the file's order, each name once
    name = line["name"]
    if name in seen:
      continue
    seen.add(name)
    if name not in records:
      want.append(line)
    elif records[name] is not None:
      want.append(records[name])
  want += [r for n, r in records.items() if r is not None and n not in seen]
  if want == lines and not damaged:
    return
  stale = sum(1 for l in lines if l["name"] in records and l != records[l["name"]])
  missing = sum(1 for n, r in records.items() if r is not None and n not in seen)
  repeats = len(lines) - len(seen)
  if not (damaged or stale or repeats):
    # Only runs finished since it was last written (a sweep stopped with branches done): the
    # index catches up with its records, which is no disagreement to warn of.
    _write_index(path, want)
    return
  logging.warning("%s disagreed with the runs' result.json files (%d damaged, %d stale, %d "
                  "missing, %d repeated lines); rebuilt from the records", path, damaged,
                  stale, missing, repeats)
  _write_index(path, want)


# metrics.jsonl


def read_metrics(path: str) -> list[dict]:
  """The rows of a metrics.jsonl (none when it is missing); a torn or foreign line is dropped."""
  return parse_metrics(_text(path) or "")


def metrics_text(path: str) -> str | None:
  """metrics.jsonl as it is on disk (None: missing), for a writer that cuts it back."""
  return _text(path)


def parse_metrics(text: str) -> list[dict]:
  rows = []
  for line in text.splitlines():
    row = _parse_line(line) if line.strip() else None
    if isinstance(row, dict) and isinstance(row.get("step"), int):
      rows.append(row)
  return rows
