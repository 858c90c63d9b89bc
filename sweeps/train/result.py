"""The run record: the one writer of `result.json` and of the lines of `runs.jsonl`.

Schema `chinchax/run/v1` (`scaling.runs` reads it):

    name, status ("done" | "failed"), reason, budget (the cell's nominal C, or null),
    N_total, N_non_embedding, D (tokens trained), flops_6ND, flops_chinchilla,
    shape {...}, hparams {...}, train_loss, eval_loss, eval_bpb, curve ("metrics.jsonl"),
    schedule, unique_tokens, epochs, tokens_per_s, mfu, wall_s, steps, versions {...}

Both parameter conventions and both FLOP conventions are stored, so a fit can use either.
Every write is atomic (`scaling.atomic`, local or gs://); `runs.jsonl` is rewritten whole with
the cell's line replaced or added, as an object store has no append.

The cells' result.json files are the truth and runs.jsonl their index. Damage never blocks a
sweep: a result.json that does not parse reads as "not finished" (the cell resumes from its
checkpoints), with a warning naming the file; a line of runs.jsonl that does not parse is
dropped, and `sync_runs_jsonl` rebuilds the index from the records when the two disagree.
"""

import dataclasses
import importlib.metadata
import json
import logging
import os
import platform

from chinchax import atomic
from chinchax.scaling import conventions

SCHEMA = "chinchax/run/v1"


def versions() -> dict[str, str]:
  out = {"python": platform.python_version()}
  for dist in ("chinchax", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint"):
    try:
      out[dist] = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
      out[dist] = "unknown"
  return out


def make(*, name: str, shape: conventions.Shape, D: float, status: str = "done",
         reason: str | None = None, budget: float | None = None, **fields) -> dict:
  """A record with the counts of `scaling.conventions`; `fields` adds the measured values."""
  record = {"schema": SCHEMA, "name": name, "status": status, "reason": reason,
            "budget": budget, **conventions.counts(shape, D), "D": float(D),
            "shape": dataclasses.asdict(shape)}
  record.update(fields)
  record.setdefault("curve", "metrics.jsonl")
  record["versions"] = versions()
  return record


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


def _read_lines(path: str) -> tuple[list[dict], int]:
  """(the records of runs.jsonl, the number of lines dropped as damaged)."""
  lines, damaged = [], 0
  for line in _text(path).splitlines():
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError:
      record = None
    if isinstance(record, dict) and isinstance(record.get("name"), str):
      lines.append(record)
    else:
      damaged += 1
  return lines, damaged


def _text(path: str) -> str:
  """The file's text; bytes that are not UTF-8 (damage) become U+FFFD and fail to parse."""
  return (atomic.read_bytes(path) or b"").decode("utf-8", errors="replace")


def _write_lines(path: str, lines: list[dict]) -> None:
  atomic.write_text(path, "".join(json.dumps(l, allow_nan=False) + "\n" for l in lines))


def upsert_runs_jsonl(path: str, record: dict) -> None:
  """Adds the record's line to runs.jsonl, replacing an earlier line of the same name."""
  lines, _ = _read_lines(path)
  _write_lines(path, [l for l in lines if l.get("name") != record["name"]] + [record])


def sync_runs_jsonl(path: str, run_dirs: list[str]) -> None:
  """Makes runs.jsonl agree with the records of `run_dirs` (a run's name is its folder's).

  A run with a record has exactly its line; one without (not run yet, or its result.json
  damaged) has none. Lines of other names are kept; damaged lines and repeats are dropped.
  The file is rewritten only when it disagrees, with one warning line saying why.
  """
  lines, damaged = _read_lines(path)
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
  logging.warning("%s disagreed with the runs' result.json files (%d damaged, %d stale, %d "
                  "missing, %d repeated lines); rebuilt from the records", path, damaged,
                  stale, missing, repeats)
  _write_lines(path, want)
