"""Runs carry their schedule; `load_runs(..., schedule=)` and `chinchax fit --schedule` keep
cosine runs, WSD cooldown branches, or both."""

import json

import numpy as np
import pytest

from chinchax.cli import fit as cli_fit
from chinchax.errors import UserError
from chinchax.scaling.runs.table import load_runs


def record(name, N, D, loss, schedule):
  rec = {"schema": "chinchax/run/v1", "name": name, "status": "done", "reason": None,
         "budget": None, "N_total": N, "N_non_embedding": N, "D": D, "flops_6ND": 6 * N * D,
         "flops_chinchilla": 6 * N * D, "eval_loss": loss, "curve": None, "schedule": schedule}
  if schedule == "wsd":
    rec["branch_of"] = f"wsd-N{N}"
  return rec


def test_schedule_filter(tmp_path):
  path = tmp_path / "runs.jsonl"
  rows = [record("cos-a", 1e6, 2e7, 3.0, "cosine"), record("cos-b", 2e6, 4e7, 2.9, "cosine"),
          record("wsd-a", 1e6, 2e7, 2.98, "wsd"), {**record("old", 4e6, 8e7, 2.8, "x"),
                                                   "schedule": None}]
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  every = load_runs([str(path)])
  assert every.name == ("cos-a", "cos-b", "old", "wsd-a")  # in the order of their names
  assert every.schedule == ("cosine", "cosine", "cosine", "wsd")  # no schedule: cosine
  wsd = load_runs([str(path)], schedule="wsd")
  assert wsd.name == ("wsd-a",) and wsd.loss.tolist() == [2.98]
  cos = load_runs([str(path)], schedule="cosine")
  assert cos.name == ("cos-a", "cos-b", "old")
  assert cos.subset(np.array([2, 0])).schedule == ("cosine", "cosine")
  with pytest.raises(UserError, match="unknown schedule"):
    load_runs([str(path)], schedule="linear")
  assert cli_fit.parse_args([str(path), "--schedule=wsd"]).schedule == "wsd"


def test_no_runs_of_that_schedule_is_refused(tmp_path):
  path = tmp_path / "runs.jsonl"
  path.write_text(json.dumps(record("cos-a", 1e6, 2e7, 3.0, "cosine")) + "\n")
  with pytest.raises(UserError, match="no wsd runs"):
    load_runs([str(path)], schedule="wsd")
