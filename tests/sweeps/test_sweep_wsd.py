"""A sweep whose fixed-N series runs as one WSD run with cooldown branches (issue: WSD in sweeps)."""

import json
import os

import pytest

from chinchax.sweeps import cli


@pytest.mark.slow
def test_fixed_n_series_as_wsd_branches(tmp_path, tiny_sweep_argv):
  workdir = str(tmp_path / "wsd")
  args = tiny_sweep_argv(workdir, "--config.fixed_n.sizes=(44440,)",
                           "--config.fixed_n.tokens_per_param=(1.0,2.0)",
                           "--config.fixed_n.schedule=wsd", "--quiet")
  cli.run(["sweep", *args])  # the fit of a 4-run toy sweep may fail; the records matter here
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  wsd_rows = [r for r in rows if r.get("schedule") == "wsd"]
  iso_rows = [r for r in rows if r.get("budget")]
  assert len(iso_rows) == 2
  assert len(wsd_rows) == 2  # the two cooldown branches; the stable run is no scaling point
  assert {r["branch_of"] for r in wsd_rows} == {"N4.44e4-wsd"}
  assert sorted(r["D"] for r in wsd_rows)[1] > sorted(r["D"] for r in wsd_rows)[0]
  assert all(r["status"] == "done" and r["N_total"] == 44440 for r in wsd_rows)
  # A rerun trains nothing and keeps the same rows.
  mtimes = {r["name"]: os.path.getmtime(os.path.join(workdir, "N4.44e4-wsd", r["name"],
                                                     "result.json")) for r in wsd_rows}
  cli.run(["sweep", *args])
  for name, t in mtimes.items():
    assert os.path.getmtime(os.path.join(workdir, "N4.44e4-wsd", name, "result.json")) == t
  with open(os.path.join(workdir, "runs.jsonl")) as f:
    assert len([json.loads(line) for line in f]) == 4
