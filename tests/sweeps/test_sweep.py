"""`chinchax sweep` and `chinchax report`: the whole pipeline on a known law, refusals.

Real training (resume after SIGKILL, the executors) is in test_executors.py."""

import json
import os

import pytest

from chinchax import cli
from chinchax.scaling.law import artifact as law_lib
from chinchax.sweeps import data, dry_run, grid, sweep, table
from chinchax.sweeps.chips import cpu_time
from chinchax.sweeps.configs import tiny
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.train import loop

from tests.helpers import sweep_helper
from tests.helpers.written_numbers import written
from tests.helpers.sweep_helper import FAILING_CELL, TRUTH, synthetic_argv, synthetic_train


def test_sweep_end_to_end_fits_the_known_law(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  opens = []
  real_open = data.open_dataset
  monkeypatch.setattr(data, "open_dataset", lambda cfg: opens.append(cfg) or real_open(cfg))
  sweep_helper.OPENED.clear()
  wd = tmp_path / "sweep"
  assert cli.run(["sweep", *synthetic_argv(wd)]) == 0
  # The preflight opened the data once and handed it, with the mesh, to every run.
  assert len(opens) == 1 and len(sweep_helper.OPENED) >= 10
  assert all(o is sweep_helper.OPENED[0] for o in sweep_helper.OPENED)
  assert sweep_helper.OPENED[0].dataset is not None and len(sweep_helper.OPENED[0].meshes) == 1
  out = capsys.readouterr().out
  assert f"{FAILING_CELL}: failed: RuntimeError: out of memory" in out

  lines = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  names = [l["name"] for l in lines]
  cells = [d for d in os.listdir(wd) if (wd / d / "result.json").exists()]
  assert sorted(names) == sorted(cells) and len(names) == len(set(names)) >= 10
  failed = [l for l in lines if l["status"] == "failed"]
  assert [l["name"] for l in failed] == [FAILING_CELL]
  assert failed[0]["reason"] == "RuntimeError: out of memory"

  law = law_lib.load_law(wd / "law.json")  # validates the schema
  for k in ("alpha", "beta"):
    assert law["law"][k] == pytest.approx(TRUTH[k], rel=1e-3)
  a_true = TRUTH["beta"] / (TRUTH["alpha"] + TRUTH["beta"])
  assert law["optimal"]["a"] == pytest.approx(a_true, rel=1e-3)
  assert law["data"]["points"] == len(names) - 1
  for stem in ("optimal", "law"):
    assert (wd / "plots" / f"{stem}.png").stat().st_size > 1000
  assert json.loads((wd / "sweep.json").read_text())["budgets"] == [1e12, 3e12, 1e13]

  report = (wd / "report.md").read_text()
  for section in ("## Runs", "## IsoFLOP minima", "## Fitted law",
                  "## Compute-optimal models at and past the sweep", "![law](plots/law.png)"):
    assert section in report
  assert f"| {FAILING_CELL} |" in report and "failed: RuntimeError" in report
  assert f"| alpha | {law['law']['alpha']:.4g} |" in report
  # Each budget's minimum in the report is the lowest loss of that budget's records.
  for C in (1e12, 3e12, 1e13):
    best = min((l for l in lines if l["budget"] == C and l["status"] == "done"),
               key=lambda l: l["eval_loss"])
    assert f"| {best['name']} | {best['N_total']:,} |" in report
  # The compute-optimal rows are the law's optimum beyond the top budget.
  scaling_law = law_lib.ScalingLaw.load(wd / "law.json")
  C_top = float(f"{law['data']['C'][1] * 10:.2g}")
  assert f"| {written(C_top, '.2g')} | {written(scaling_law.optimum(C_top)[0], '.3g')} [" in report
  assert "e+" not in report

  # `chinchax report` rebuilds the same file from runs.jsonl and law.json.
  (wd / "report.md").unlink()
  assert cli.run(["report", str(wd)]) == 0
  assert (wd / "report.md").read_text() == report

  # A rerun skips every done cell and retries only the failed one.
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(wd)]) == 0
  out = capsys.readouterr().out
  assert out.count("skipped, already done") == len(names) - 1
  assert "1 of " in out and f"{FAILING_CELL}: failed" in out
  # One count: the skipped cells are 1..n-1 of n, the retried one the n-th.
  n = len(names)
  counted = [l.split("]")[0] + "]" for l in out.splitlines() if l.startswith("[")]
  assert counted == [f"[{k}/{n}]" for k in range(1, n + 1)], counted


def test_dry_run_prints_one_row_per_cell(capsys):
  assert cli.run(["sweep", f"--config={sweep_helper.CONFIG}", "--dry-run"]) == 0
  out = capsys.readouterr().out
  cells, refusals = grid.make_grid(tiny.get_config())
  rows = [l for l in out.splitlines() if l.startswith("C") and "refused" not in l]
  assert [r.split()[0] for r in rows] == [c.name for c in cells]
  assert all(r.split()[-1].endswith("s") for r in rows)  # the time column
  assert out.count("refused:") == len(refusals)
  # On CPU each cell costs a start, a cost per step and its FLOPs (dry_run.time_model).
  for row, cell in zip(rows, cells):
    seconds = (cpu_time.CELL_S + cell.steps * cpu_time.STEP_S
               + cell.flops_chinchilla / cpu_time.FLOPS_PER_S)
    assert row.split()[-1] == table.duration(seconds), (row, seconds)
  total = sum(cpu_time.CELL_S + c.steps * cpu_time.STEP_S
              + c.flops_chinchilla / cpu_time.FLOPS_PER_S for c in cells)
  assert f"about {table.duration(total)} of training" in out


def test_dry_run_opens_no_data_and_writes_no_file(tmp_path, monkeypatch, capsys):
  opened = []
  for module in (data, pipeline):
    monkeypatch.setattr(module, "open_dataset", lambda *a, **k: opened.append(a))
  monkeypatch.chdir(tmp_path)
  wd, data_dir = tmp_path / "wd", tmp_path / "tfds"
  argv = [f"--config={sweep_helper.CONFIG}", f"--workdir={wd}",
          f"--config.train.data.data_dir={data_dir}", "--config.train.data.corpus=/nowhere"]
  assert cli.run(["sweep", *argv, "--dry-run"]) == 0
  out = capsys.readouterr().out
  cells, _ = grid.make_grid(tiny.get_config())
  assert f"{len(cells)} cells, 0 refused" in out and "checked when the data is opened" in out
  assert not opened and list(tmp_path.iterdir()) == []
  # Without --dry-run the same flags open the data (and refuse the missing corpus).
  monkeypatch.undo()
  assert cli.run(["sweep", *argv]) == 2
  assert "/nowhere" in capsys.readouterr().err and not wd.exists()


def test_cells_beyond_the_data_are_refused_when_it_is_opened(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "sweep"
  # A train split capped at 6000 tokens serves the cell of 4800 tokens, not that of 7360.
  argv = sweep_helper.argv(str(wd), "--config.train.data.unique_tokens_cap=6000", "--quiet")
  assert cli.run(["sweep", *argv]) == 1  # one run is too few to fit
  out = capsys.readouterr().out
  assert "C2e9-N4.44e4: refused: D=7360 tokens exceeds the data's 6000 unique" in out
  assert "1 of 1 cells to train" in out and "C2e9-N7.02e4: done" in out


@pytest.mark.parametrize("override, message", [
    ("--config.executor=slurm", "executor='slurm' is not one of local, packed, ray"),
    ("--config.vocab_size=300", "does not match the bytes tokenizer's 258 ids"),
    ("--config.budgets=()", "budgets is empty"),
    ("--config.sizes=(1000,)", "no runnable cells"),
    ("--config.devices_per_cell=0", "devices_per_cell=0"),
    ("--config.bootstrap=lots", "--config.bootstrap=lots: bootstrap takes an integer"),
    ("--config.train.model.tied=maybe", "train.model.tied takes true or false"),
    ("--config.train.optimizer.final_lr_ratio=x", "final_lr_ratio takes a number"),
    ("--config.bootstrap=-1", "bootstrap=-1 must be an integer >= 0"),
])
def test_bad_configs_are_refused_before_training(tmp_path, capsys, override, message):
  executor = ["--config.executor=packed"] if "devices_per_cell" in override else []
  wd = tmp_path / "wd"
  rc = cli.run(["sweep", f"--config={sweep_helper.CONFIG}", f"--workdir={wd}", override,
                *executor])
  err = capsys.readouterr().err.strip().splitlines()
  assert rc == 2 and len(err) == 1 and message in err[0], err
  assert not wd.exists()


def test_a_key_written_without_its_section_is_pointed_to_it(capsys):
  assert cli.run(["sweep", "--config.seed=1", "--dry-run"]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [
      "chinchax sweep: error: --config.seed: the config has no key 'seed'; did you mean "
      "--config.train.seed?"]


def test_unknown_override_of_the_default_config_is_one_line(capsys):
  # No --config: the smoke config is loaded with the overrides while the flag is defined.
  assert cli.run(["sweep", "--config.nokey=1", "--dry-run"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == ["chinchax sweep: error: --config.nokey: the config has no key 'nokey'; "
                 "check the spelling against the config file"]
