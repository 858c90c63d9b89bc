"""The run record: the one writer of `result.json` and of the lines of `runs.jsonl`.

Schema `chinchax/run/v1` (`scaling.runs` reads it):

    name, status ("done" | "failed"), reason, budget (the cell's nominal C, or null),
    N_total, N_non_embedding, D (tokens trained), flops_6ND, flops_chinchilla,
    shape {...}, hparams {...}, train_loss, eval_loss, eval_bpb, curve ("metrics.jsonl"),
    schedule, unique_tokens, epochs, tokens_per_s, mfu, wall_s, steps, versions {...}

Both parameter conventions and both FLOP conventions are stored, so a fit can use either.
Every write is atomic (`scaling.atomic`, local or gs://); `runs.jsonl` is rewritten whole with
the cell's line replaced or added, as an object store has no append.
"""

import dataclasses
import importlib.metadata
import json
import os
import platform

from chinchax.scaling import atomic, conventions

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
  text = atomic.read_text(os.path.join(run_dir, "result.json"))
  return None if text is None else json.loads(text)


def upsert_runs_jsonl(path: str, record: dict) -> None:
  """Adds the record's line to runs.jsonl, replacing an earlier line of the same name."""
  text = atomic.read_text(path) or ""
  lines = [json.loads(l) for l in text.splitlines() if l.strip()]
  lines = [l for l in lines if l.get("name") != record["name"]] + [record]
  atomic.write_text(path, "".join(json.dumps(l, allow_nan=False) + "\n" for l in lines))
