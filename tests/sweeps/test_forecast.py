"""`chinchax forecast` and its scoring: the record a law writes before a run, scored by a
sweep that names it (report.md), by `--score`, and refused when it cannot be."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

from chinchax.scaling.plan import forecast as forecast_lib
from chinchax.scaling.law import artifact as law_lib
from chinchax import cli
from chinchax.sweeps.train import loop
from tests.helpers.sweep_helper import TRUTH, synthetic_argv, synthetic_train

THETA = [TRUTH[k] for k in ("E", "A", "B", "alpha", "beta")]


def _draws():
  rng = np.random.default_rng(0)
  return np.array(THETA) * (1 + 0.002 * rng.standard_normal((200, 5)))


def _law_file(tmp_path, samples=True) -> str:
  path = tmp_path / "law.json"
  law_lib.save_law(path, law_lib.build_law(**TRUTH, samples=_draws() if samples else None,
                                           N=[1e4, 2e5], D=[1e6, 1e8], C=[1e12, 1e13]))
  return str(path)


# Closed forms in float64, written out here (Hoffmann et al. 2022, App. D.2), not the code's.
def _loss(N, D, theta):
  E, A, B, alpha, beta = np.moveaxis(np.asarray(theta, np.float64), -1, 0)
  return E + A / np.float64(N)**alpha + B / np.float64(D)**beta


def _optimum(C, theta):
  """(N*, D*, L*) at budget C: N* = G·(C/6)^(β/(α+β)), D* = (C/6)^(α/(α+β))/G,
  G = (αA/(βB))^(1/(α+β))."""
  E, A, B, alpha, beta = np.moveaxis(np.asarray(theta, np.float64), -1, 0)
  G = (alpha * A / (beta * B))**(1.0 / (alpha + beta))
  N = G * (np.float64(C) / 6.0)**(beta / (alpha + beta))
  D = (np.float64(C) / 6.0)**(alpha / (alpha + beta)) / G
  return N, D, E + A / N**alpha + B / D**beta


def _rounded_draws():
  """The draws as law.json stores them: each to 7 significant digits (scaling.law.build)."""
  return np.array([[float(f"{x:.7g}") for x in row] for row in _draws()])


def _sha256_of_law_file(path) -> str:
  """What forecast.law_hash says it hashes, rebuilt from the file by hand: the law's JSON
  with bootstrap.samples as the rows the packed string holds (base64, zlib, one
  comma-separated row per line), keys sorted, no spaces."""
  with open(path) as f:
    doc = json.load(f)
  boot = dict(doc["bootstrap"])
  text = zlib.decompress(base64.b64decode(boot.pop("samples_zlib"))).decode("ascii")
  del boot["samples_encoding"]
  boot["samples"] = [[float(x) for x in line.split(",")] for line in text.splitlines() if line]
  doc["bootstrap"] = boot
  return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
                        ).hexdigest()


def test_forecast_record_of_a_budget_and_of_a_model(tmp_path, capsys):
  law = _law_file(tmp_path)
  out = tmp_path / "f.json"
  assert cli.run(["forecast", f"--law={law}", "--flops=1e14", f"--out={out}"]) == 0
  rec = json.loads(out.read_text())
  N, D, L = _optimum(1e14, THETA)
  assert rec["what"] == "compute-optimal" and rec["C"] == 1e14
  assert rec["N"] == pytest.approx(N, rel=1e-9) and rec["D"] == pytest.approx(D, rel=1e-9)
  assert rec["N"] * rec["D"] == pytest.approx(1e14 / 6, rel=1e-9)
  assert rec["loss"] == pytest.approx(L, rel=1e-12)
  # The 5th and 95th percentiles (numpy's linear interpolation) of L* over the stored draws.
  want = np.quantile(_optimum(1e14, _rounded_draws())[2], [0.05, 0.95])
  assert rec["loss_ci"] == pytest.approx(want.tolist(), rel=1e-9)
  assert rec["loss_ci"][0] < rec["loss"] < rec["loss_ci"][1]
  sha = _sha256_of_law_file(law)
  assert rec["law"]["sha256"] == sha and len(sha) == 64
  # Reformatted (indented, keys reordered) the file keeps its hash; one number changed, not.
  with open(law) as f:
    doc = json.load(f)
  moved = tmp_path / "moved.json"
  moved.write_text(json.dumps(dict(reversed(list(doc.items()))), indent=2))
  assert cli.run(["forecast", f"--law={moved}", "--flops=1e14", f"--out={out}"]) == 0
  assert json.loads(out.read_text())["law"]["sha256"] == sha
  doc["law"]["E"] = 1.7
  moved.write_text(json.dumps(doc))
  assert cli.run(["forecast", f"--law={moved}", "--flops=1e14", f"--out={out}"]) == 0
  assert json.loads(out.read_text())["law"]["sha256"] == _sha256_of_law_file(moved) != sha
  assert any("extrapolates" in w for w in rec["warnings"])  # 10x past the fitted 1e13
  printed = capsys.readouterr().out
  assert f"loss {rec['loss']:.4f} [" in printed and f"wrote {out}" in printed
  # A model (N, D): the law's L(N, D) there.
  assert cli.run(["forecast", f"--law={law}", "--params=1e5", "--tokens=2e7",
                  f"--out={out}"]) == 0
  rec = json.loads(out.read_text())
  assert rec["what"] == "given N and D" and rec["C"] == pytest.approx(6 * 1e5 * 2e7)
  assert rec["loss"] == pytest.approx(_loss(1e5, 2e7, THETA), rel=1e-12)
  want = np.quantile(_loss(1e5, 2e7, _rounded_draws()), [0.05, 0.95])
  assert rec["loss_ci"] == pytest.approx(want.tolist(), rel=1e-9)


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
  """The synthetic sweep's top budget (1e13) has sizes 9.09e4 .. 9.03e5; the law's N* there
  is 4.45e5, no size within 10% of it (5.08e5 is 14% off), so the forecast is scored against
  that budget's lowest loss: its runs' losses are the law itself (synthetic_train), lowest at
  5.08e5. Every number of the expected text is checked against the closed forms here."""
  monkeypatch.setattr(loop, "train", synthetic_train)
  f = tmp_path / "forecast.json"
  law = _law_file(tmp_path)
  assert cli.run(["forecast", f"--law={law}", "--flops=1e13", f"--out={f}"]) == 0
  wd = tmp_path / "sweep"
  assert cli.run(["sweep", *synthetic_argv(wd), f"--config.forecast={f}"]) == 0
  score = json.loads((wd / "forecast_score.json").read_text())
  top = {l["name"]: l for l in map(json.loads, (wd / "runs.jsonl").read_text().splitlines())
         if l["budget"] == 1e13 and l["status"] == "done"}
  assert sorted(top) == ["C1e13-N1.61e5", "C1e13-N2.89e5", "C1e13-N5.08e5", "C1e13-N9.03e5",
                         "C1e13-N9.09e4"]
  N_star, D_star, L_star = _optimum(1e13, THETA)
  assert not any(abs(np.log(r["N_total"] / N_star)) <= np.log(1.1) for r in top.values())
  truth = {k: _loss(r["N_total"], r["D"], THETA) for k, r in top.items()}
  assert min(truth, key=truth.get) == "C1e13-N5.08e5"
  lo, hi = np.quantile(_optimum(1e13, _rounded_draws())[2], [0.05, 0.95])
  # The expected text, by hand; then its numbers against the closed forms.
  line = ("forecast 12.4996 [12.38, 12.62] at C = 1e13, actual 12.5094 (+0.08%; "
          "C1e13-N5.08e5, the lowest loss at the forecast's budget): inside its 90% interval")
  assert abs(L_star - 12.4996) < 5e-5 and abs(truth["C1e13-N5.08e5"] - 12.5094) < 5e-5
  assert abs(100 * (truth["C1e13-N5.08e5"] / L_star - 1) - 0.08) < 0.005
  assert abs(lo - 12.38) < 0.005 and abs(hi - 12.62) < 0.005 and lo < 12.5094 < hi
  assert score["status"] == "scored" and score["run"] == "C1e13-N5.08e5"
  assert score["actual"] == pytest.approx(truth["C1e13-N5.08e5"], rel=1e-12)
  assert score["forecast"] == pytest.approx(L_star, rel=1e-12) and score["inside"] is True
  assert line in capsys.readouterr().out
  report = (wd / "report.md").read_text()
  assert f"## Forecast\n\n{line}\n" in report
  assert abs(N_star - 4.45e5) < 5e2 and abs(D_star - 3.75e6) < 5e3
  assert "| forecast | 1e13 | 4.45e5 | 3.75e6 | 12.4996 [12.3829, 12.6243] |" in report
  assert abs(lo - 12.3829) < 5e-5 and abs(hi - 12.6243) < 5e-5
  assert "| actual (C1e13-N5.08e5) |  | 5.08e5 | 3.28e6 | 12.5094 |" in report
  assert (top["C1e13-N5.08e5"]["N_total"], top["C1e13-N5.08e5"]["D"]) == (507888, 3.28e6)
  assert f"law sha256 {_sha256_of_law_file(law)[:12]}..." in report


def test_a_sweep_refuses_a_missing_forecast_before_training(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "sweep"
  assert cli.run(["sweep", *synthetic_argv(wd), "--config.forecast=nope.json"]) == 2
  err = capsys.readouterr().err
  assert "cannot read forecast file nope.json: No such file or directory" in err
  assert len(err.strip().splitlines()) == 1
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
