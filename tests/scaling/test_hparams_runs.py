"""fit-hparams reads its runs as `chinchax fit` does: runs.jsonl through scaling/runs/records.py
(schema, status, damaged lines refused, a later line of a name replacing an earlier one) and
CSVs through scaling/runs/files.py's rules, keeping what is its own (lr, batch_tokens, a
failed or diverged run kept as diverged: its LR bounds the optimum from above)."""

import json
import math

import numpy as np
import pytest

from chinchax import cli
from chinchax.errors import UserError
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax.scaling.hparams import runs as hparams_runs
from chinchax.scaling.runs import files
from tests.scaling import hparams_synthetic as S

SEQ = 64


def _record(i, r, **edit):
  rec = {"schema": "chinchax/run/v1", "name": f"cell-{i}", "status": "done", "reason": None,
         "budget": None, "N_total": r.N, "N_non_embedding": 0.9 * r.N, "D": r.D,
         "flops_6ND": 6 * r.N * r.D, "eval_loss": None if math.isnan(r.loss) else r.loss,
         "schedule": "cosine", "curve": None,
         "hparams": {"peak_lr": r.lr, "batch_size": r.B / SEQ, "seq_len": SEQ,
                     "schedule": "cosine"}}
  rec.update(edit)
  return rec


def _write(path, recs):
  path.write_text("".join(json.dumps(r) + "\n" for r in recs))
  return path


@pytest.fixture(name="grid", scope="module")
def _grid():
  return S.runs(np.random.default_rng(0))


def _rerun_workdir(tmp_path, grid, cell=100):
  """A workdir whose runs.jsonl logs cell `cell` twice: first a bad loss, then its rerun."""
  wd = tmp_path / "wd"
  wd.mkdir()
  recs = [_record(i, r) for i, r in enumerate(grid)]
  first = dict(recs[cell], eval_loss=grid[cell].loss + 0.5)
  _write(wd / "runs.jsonl", recs[:cell] + [first] + recs[cell:])
  return wd


def test_a_rerun_cell_counts_once_and_its_later_line_wins(tmp_path, grid):
  wd = _rerun_workdir(tmp_path, grid)
  runs, _ = hparams_runs.read([str(wd)])
  assert len(runs) == len(grid)
  by_name = {r.name: r.loss for r in runs}
  assert len(by_name) == len(grid) and by_name["cell-100"] == grid[100].loss
  # The rows `chinchax fit` reads from the same file: the same runs, the same losses.
  rows, _, failed = files.read_records(str(wd / "runs.jsonl"), str(wd), "total", "6ND")
  assert failed == 0 and {r["name"]: r["loss"] for r in rows} == by_name
  doc = hparams_fit.fit([str(wd)], bootstrap=0)
  assert sum(p["runs"] for p in doc["points"]) == len(grid)
  clean = hparams_fit.fit(grid, bootstrap=0)
  assert doc["points"] == clean["points"] and doc["lr"]["exponents"] == clean["lr"]["exponents"]


def test_the_command_counts_a_rerun_once(tmp_path, grid, capsys):
  wd = _rerun_workdir(tmp_path, grid)
  assert cli.run(["fit-hparams", str(wd), f"--out={tmp_path}/h.json", "--json",
                  "--bootstrap=0"]) == 0
  doc = json.loads(capsys.readouterr().out)
  assert sum(p["runs"] for p in doc["points"]) == len(grid)


def test_a_failed_run_is_diverged_and_one_that_never_trained_is_left_out(tmp_path, grid):
  # The trainer writes a diverged run as failed, with its hparams (its LR bounds the optimum);
  # a job that failed before training (sweeps/job.py) writes a record without hparams.
  recs = [_record(i, r) for i, r in enumerate(grid)]
  recs[3] = dict(recs[3], status="failed", reason="non-finite training loss", eval_loss=None)
  recs[4] = dict(recs[4], status="failed", reason="loss spike at step 9")  # a finite loss
  recs[5] = {k: v for k, v in recs[5].items() if k not in ("hparams", "eval_loss")}
  recs[5].update(status="failed", reason="RESOURCE_EXHAUSTED: out of memory")
  path = _write(tmp_path / "runs.jsonl", recs)
  runs, meta = hparams_runs.read([str(path)])
  assert len(runs) == len(grid) - 1 and "cell-5" not in {r.name for r in runs}
  loss = {r.name: r.loss for r in runs}
  assert math.isnan(loss["cell-3"]) and math.isnan(loss["cell-4"])
  assert loss["cell-6"] == grid[6].loss
  assert meta["not_trained"] == ["cell-5"]
  doc = hparams_fit.fit([str(path)], bootstrap=0)
  assert sum(p["runs"] for p in doc["points"]) == len(grid) - 1
  assert sum(p["diverged"] for p in doc["points"]) >= 2
  assert any("cell-5" in w and "left out" in w for w in doc["warnings"]), doc["warnings"]


@pytest.mark.parametrize("edit, message", [
    (lambda recs: recs[:2] + ['{"name": "cell-2", "sta'] + recs[3:], ":3: not valid JSON"),
    (lambda recs: [{**recs[0], "schema": "chinchax/run/v0"}] + recs[1:],
     ":1: schema is 'chinchax/run/v0', expected 'chinchax/run/v1'"),
    (lambda recs: recs[:1] + [{**recs[1], "status": "running"}] + recs[2:],
     ":2: status is 'running', expected 'done' or 'failed'"),
    (lambda recs: [{k: v for k, v in recs[0].items() if k != "name"}] + recs[1:],
     ":1: record has no name"),
    (lambda recs: [{**recs[0], "hparams": {"lr": 1e-3}}] + recs[1:],
     "a run record without hparams.peak_lr"),
    (lambda recs: [{**recs[0], "D": -1}] + recs[1:], "D must be a positive finite number"),
    (lambda recs: [], "no runs in it"),
])
def test_bad_runs_jsonl_is_one_line(tmp_path, grid, capsys, edit, message):
  recs = [_record(i, r) for i, r in enumerate(grid[:10])]
  lines = edit(recs)
  path = tmp_path / "runs.jsonl"
  path.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
  out = tmp_path / "h.json"
  assert cli.run(["fit-hparams", str(path), f"--out={out}"]) == 2
  err = capsys.readouterr().err
  assert message in err and len(err.strip().splitlines()) == 1, err
  assert not out.exists()


HEAD = "N,D,lr,batch_tokens,loss"


@pytest.mark.parametrize("text, message", [
    ("N;D;lr;batch_tokens;loss\n1e7;2e8;1e-3;512;2.0\n", "the header is semicolon-separated"),
    (HEAD + "\n1e7,2e8,1e-3,512\n", ":2: 4 values for the 5 columns"),
    (HEAD + ",lr\n1e7,2e8,1e-3,512,2.0,1e-3\n", "column 'lr' appears more than once"),
    ("", "empty; expected a header line"),
    (HEAD + "\n", "no rows"),
    ("N,lr,batch_tokens,loss\n1e7,1e-3,512,2.0\n", "needs a column 'D' (tokens) or 'C'"),
    ("N,D,batch_tokens,loss\n1e7,2e8,512,2.0\n", "missing column lr"),
    (HEAD + ",run\n1e7,2e8,1e-3,512,2.0,a\n1e7,2e8,2e-3,512,2.1,a\n",
     "the 'run' column repeats a name"),
    (HEAD + "\n1e7,2e8,1e-3,512,x\n", "loss is not a number: 'x'"),
    (HEAD + "\n1e7,2e8,1e-3,512,-2\n", "loss must be a positive finite number"),
])
def test_bad_csv_is_one_line(tmp_path, capsys, text, message):
  path = tmp_path / "bad.csv"
  path.write_text(text)
  assert cli.run(["fit-hparams", str(path), f"--out={tmp_path}/h.json"]) == 2
  err = capsys.readouterr().err
  assert message in err and len(err.strip().splitlines()) == 1, err


def test_csv_with_a_bom_c_instead_of_d_and_its_own_statuses(tmp_path):
  path = tmp_path / "runs.csv"
  path.write_text("\ufeffN,C,lr,batch_tokens,loss,status,seq_len\n"
                  "1e7,1.2e16,1e-3,512,2.5,done,64\n1e7,1.2e16,2e-3,512,,done,64\n"
                  "1e7,1.2e16,4e-3,512,2.4,failed,64\n1e7,1.2e16,8e-3,512,2.6,running,64\n")
  runs, meta = hparams_runs.read([str(path)])
  assert [r.D for r in runs] == [pytest.approx(2e8)] * 4
  assert [r.loss for r in runs][0] == 2.5 and runs[3].loss == 2.6
  assert math.isnan(runs[1].loss) and math.isnan(runs[2].loss)
  assert meta["seq_len"] == [64] and [r.name for r in runs][0] == "runs.csv:2"


def test_the_reader_refuses_rather_than_guesses_an_empty_input(tmp_path):
  with pytest.raises(UserError, match="not found"):
    hparams_runs.read([str(tmp_path / "nothing")])
