"""`chinchax forecast` and its scoring: the record a law writes before a run, scored by a
sweep that names it (report.md), by `--score`, and refused when it cannot be."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from chinchax.scaling.plan import forecast as forecast_lib
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.numerics import optimum as opt
from chinchax import cli
from chinchax.sweeps.train import loop
from tests.helpers.sweep_helper import TRUTH, synthetic_argv, synthetic_train

THETA = [TRUTH[k] for k in ("E", "A", "B", "alpha", "beta")]


def _law_file(tmp_path, samples=True) -> str:
  rng = np.random.default_rng(0)
  draws = np.array(THETA) * (1 + 0.002 * rng.standard_normal((200, 5))) if samples else None
  path = tmp_path / "law.json"
  law_lib.save_law(path, law_lib.build_law(**TRUTH, samples=draws, N=[1e4, 2e5],
                                           D=[1e6, 1e8], C=[1e12, 1e13]))
  return str(path)


def test_forecast_record_of_a_budget_and_of_a_model(tmp_path, capsys):
  law = _law_file(tmp_path)
  out = tmp_path / "f.json"
  assert cli.run(["forecast", f"--law={law}", "--flops=1e14", f"--out={out}"]) == 0
  rec = json.loads(out.read_text())
  N, D = opt.optimum(1e14, THETA)
  assert rec["what"] == "compute-optimal"
  assert rec["N"] == pytest.approx(float(N)) and rec["D"] == pytest.approx(float(D))
  assert rec["loss"] == pytest.approx(float(opt.loss(N, D, THETA)), rel=1e-12)
  samples = np.array(law_lib.load_law(law)["bootstrap"]["samples"])
  assert rec["loss_ci"] == pytest.approx(
      np.quantile(opt.optimal_loss(1e14, samples), [0.05, 0.95]).tolist())
  assert rec["law"]["sha256"] == forecast_lib.law_hash(law_lib.ScalingLaw.load(law))
  assert any("extrapolates" in w for w in rec["warnings"])  # 10x past the fitted 1e13
  printed = capsys.readouterr().out
  assert f"loss {rec['loss']:.4f} [" in printed and f"wrote {out}" in printed
  # A model (N, D): the law's L(N, D) there.
  assert cli.run(["forecast", f"--law={law}", "--params=1e5", "--tokens=2e7",
                  f"--out={out}"]) == 0
  rec = json.loads(out.read_text())
  assert rec["what"] == "given N and D" and rec["C"] == pytest.approx(6 * 1e5 * 2e7)
  assert rec["loss"] == pytest.approx(float(opt.loss(1e5, 2e7, THETA)))


@pytest.mark.parametrize("argv,message", [
    (["--flops=1e14", "--law=NOPE.json"], "cannot read law file NOPE.json"),
    (["--params=1e5"], "no law: give --law=law.json"),
    (["--score=NOPE.json", "x"], "cannot read forecast file NOPE.json: No such file"),
])
def test_bad_forecast_inputs_are_one_line(capsys, argv, message):
  assert cli.run(["forecast", *argv]) == 2
  err = capsys.readouterr().err.strip()
  assert message in err and len(err.splitlines()) == 1


def test_an_allocation_law_has_no_loss_to_forecast(tmp_path, capsys):
  path = tmp_path / "alloc.json"
  law_lib.save_law(path, law_lib.build_power_law(a=0.5, b=0.5, log_kN=-1.0, log_kD=-0.8))
  assert cli.run(["forecast", f"--law={path}", "--flops=1e20"]) == 2
  assert "predicts no loss" in capsys.readouterr().err


def test_score_matches_the_run_and_says_inside_or_not():
  law = law_lib.ScalingLaw.from_dict(law_lib.build_law(**TRUTH, samples=np.array([THETA] * 3)
                                                       * [[1.0], [0.99], [1.01]]))
  rec = forecast_lib.make(law, N=1e5, D=2e7)
  lo, hi = rec["loss_ci"]
  runs = [{"name": "far", "status": "done", "eval_loss": 1.0, "N_total": 3e5, "D": 2e7},
          {"name": "it", "status": "done", "eval_loss": hi + 0.01, "N_total": 1.05e5,
           "D": 1.98e7},
          {"name": "failed", "status": "failed", "eval_loss": None, "N_total": 1e5, "D": 2e7}]
  s = forecast_lib.score(rec, runs)
  assert s["run"] == "it" and s["inside"] is False
  assert s["error"] == pytest.approx((hi + 0.01) / rec["loss"] - 1)
  assert "OUTSIDE its 90% interval" in forecast_lib.score_line(s)
  runs[1]["eval_loss"] = (lo + hi) / 2
  assert forecast_lib.score(rec, runs)["inside"] is True
  assert forecast_lib.score(rec, runs[:1])["status"] == "no run"


def test_a_sweep_scores_its_forecast_in_report_md(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  f = tmp_path / "forecast.json"
  assert cli.run(["forecast", f"--law={_law_file(tmp_path)}", "--flops=1e13",
                  f"--out={f}"]) == 0
  wd = tmp_path / "sweep"
  assert cli.run(["sweep", *synthetic_argv(wd), f"--config.forecast={f}"]) == 0
  score = json.loads((wd / "forecast_score.json").read_text())
  rec = json.loads(f.read_text())
  lines = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  top = [l for l in lines if l["budget"] == 1e13 and l["status"] == "done"]
  near = [l for l in top if abs(np.log(l["N_total"] / rec["N"])) <= np.log(1.1)
          and abs(np.log(l["D"] / rec["D"])) <= np.log(1.1)]
  expected = near[0] if near else min(top, key=lambda l: l["eval_loss"])
  assert score["status"] == "scored" and score["run"] == expected["name"]
  assert score["actual"] == expected["eval_loss"] and score["forecast"] == rec["loss"]
  lo, hi = rec["loss_ci"]
  assert score["inside"] == (lo <= expected["eval_loss"] <= hi)
  line = forecast_lib.score_line(score)
  assert line in capsys.readouterr().out
  report = (wd / "report.md").read_text()
  assert "## Forecast" in report and line in report


def test_a_sweep_refuses_a_missing_forecast_before_training(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "sweep"
  assert cli.run(["sweep", *synthetic_argv(wd), "--config.forecast=nope.json"]) == 2
  assert "forecast nope.json: no such file" in capsys.readouterr().err
  assert not (wd / "runs.jsonl").exists()


@pytest.mark.slow
def test_forecast_and_score_as_processes(tmp_path):
  """The console script end to end: write a forecast, score it against a runs.jsonl."""
  law, out, score = _law_file(tmp_path), tmp_path / "f.json", tmp_path / "s.json"
  cmd = [sys.executable, "-m", "chinchax.cli"]
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  p = subprocess.run([*cmd, "forecast", f"--law={law}", "--params=1e5", "--tokens=2e7",
                      f"--out={out}"], capture_output=True, text=True, env=env, check=False)
  assert p.returncode == 0, p.stderr
  rec = json.loads(out.read_text())
  runs = tmp_path / "runs.jsonl"
  runs.write_text(json.dumps({"name": "r", "status": "done", "eval_loss": rec["loss"],
                              "N_total": 1e5, "D": 2e7}) + "\n")
  p = subprocess.run([*cmd, "forecast", f"--score={out}", str(runs), f"--out={score}"],
                     capture_output=True, text=True, env=env, check=False)
  assert p.returncode == 0, p.stderr
  assert "actual" in p.stdout and "inside its 90% interval" in p.stdout
  assert json.loads(score.read_text())["inside"] is True
  p = subprocess.run([*cmd, "forecast", f"--score={out}"], capture_output=True, text=True,
                     env=env, check=False)
  assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--score needs the runs" in p.stderr


def test_a_run_given_a_forecast_scores_it(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "run"
  # The run's N from a dry stand-in first, then a forecast for exactly that model.
  assert cli.run(["train", "--config=train", f"--workdir={tmp_path / 'probe'}",
                  "--config.tokens=2e6"]) == 0
  probe = json.loads((tmp_path / "probe" / "result.json").read_text())
  f = tmp_path / "f.json"
  assert cli.run(["forecast", f"--law={_law_file(tmp_path)}", f"--params={probe['N_total']}",
                  "--tokens=2e6", f"--out={f}"]) == 0
  capsys.readouterr()
  assert cli.run(["train", "--config=train", f"--workdir={wd}", "--config.tokens=2e6",
                  f"--forecast={f}"]) == 0
  score = json.loads((wd / "forecast_score.json").read_text())
  rec = json.loads(f.read_text())
  # synthetic_train's loss is the law itself, so the forecast is exact and inside.
  assert score["actual"] == pytest.approx(rec["loss"], rel=1e-9) and score["inside"] is True
  assert forecast_lib.score_line(score) in capsys.readouterr().out
  assert cli.run(["train", "--config=train", f"--workdir={tmp_path / 'x'}",
                  "--forecast=nope.json"]) == 2
  assert not (tmp_path / "x" / "result.json").exists()
