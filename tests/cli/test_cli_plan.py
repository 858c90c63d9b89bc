"""`chinchax plan` in-process through the dispatcher (chinchax.cli.run)."""

import json

import numpy as np
import pytest

from chinchax.scaling.numerics import fmt
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.law import presets
from chinchax import cli

THETA = np.array([1.8172, 482.01, 2085.43, 0.3478, 0.3658])


@pytest.fixture
def law_path(tmp_path):
  rng = np.random.default_rng(0)
  samples = THETA * (1 + 0.02 * rng.standard_normal((40, 5)))
  doc = law_lib.build_law(E=THETA[0], A=THETA[1], B=THETA[2], alpha=THETA[3], beta=THETA[4],
                          samples=samples, N=[1e7, 1e9], D=[1e9, 1e11], inputs=["runs.jsonl"])
  path = tmp_path / "law.json"
  law_lib.save_law(path, doc)
  return path


def run(capsys, *argv):
  rc = cli.run(["plan", *argv])
  out, err = capsys.readouterr()
  return rc, out, err


def test_table_for_a_budget(capsys, law_path):
  rc, out, err = run(capsys, f"--law={law_path}", "--flops=1e21")
  assert rc == 0 and err == ""
  N, D = law_lib.ScalingLaw.load(law_path).optimum(1e21)
  assert "parameters N*" in out and f"{fmt.num(N)} (" in out and f"{fmt.num(D)} (" in out
  assert "90% interval" in out and "e+" not in out  # numbers read 1.2e12, not 1.2e+12
  rc, out, _ = run(capsys, f"--law={law_path}", "--flops=1e21", "--ci=0.5")
  lo, hi = law_lib.ScalingLaw.load(law_path).interval("N", 1e21, level=0.5)
  assert "50% interval" in out and fmt.interval((lo, hi)) in out


def test_json_for_a_budget(capsys, law_path):
  rc, out, _ = run(capsys, f"--law={law_path}", "--flops", "1e21", "--json")
  assert rc == 0
  result = json.loads(out)
  law = law_lib.ScalingLaw.load(law_path)
  N, D = law.optimum(1e21)
  assert result["optimum"]["N"] == pytest.approx(N, rel=1e-12)
  assert result["optimum"]["D"] == pytest.approx(D, rel=1e-12)
  assert result["optimum"]["interval"]["N"] == pytest.approx(list(law.interval("N", 1e21)))
  assert result["budget"]["source"] == "flops"


def test_all_sections_with_a_preset(capsys):
  argv = ["--preset=besiroglu2024", "--params=70B", "--tokens=1.4T", "--unique-tokens=300B",
          "--inference-tokens=1e13"]
  rc, out, _ = run(capsys, *argv)
  assert rc == 0
  for heading in ("your (N, D)", "data-constrained", "inference-aware", "saving"):
    assert heading in out
  assert "warning: D = 1.4e12 is 4.7 epochs" in out
  assert "R_D*=15.4, R_N*=5.31, the published values" in out
  rc, out, _ = run(capsys, *argv, "--json")
  result = json.loads(out)
  assert result["given"]["N"] == 70e9 and result["given"]["D"] == 1.4e12
  assert result["budget"]["C"] == pytest.approx(6 * 70e9 * 1.4e12)
  expected = presets.preset("besiroglu2024").predict(70e9, 1.4e12)
  assert result["given"]["loss"] == pytest.approx(expected)
  assert result["inference"]["inference_optimal"]["N"] < result["optimum"]["N"]


def test_inconsistent_triple_is_reported(capsys):
  rc, out, _ = run(capsys, "--preset=hoffmann2022", "--params=1e9", "--tokens=2e10",
                   "--flops=5e20")
  assert rc == 0 and "using the consistent value C = 1.2e20" in out


@pytest.mark.parametrize("argv,message", [
    (["--flops=1e21"], "no law: give --law=law.json or --preset=NAME"),
    (["--preset=hoffmann2022", "--law=x.json", "--flops=1e21"], "either --law or --preset"),
    (["--preset=hoffmann2022"], "nothing to plan"),
    (["--preset=hoffmann2022", "--flops=-3"], "must be a positive finite number, got '-3'"),
    (["--preset=hoffmann2022", "--flops=lots"], "not a number: 'lots'"),
    (["--preset=hoffmann2022", "--flops=1e21", "--bogus"], "unrecognized arguments: --bogus"),
    (["--preset=kaplan", "--flops=1e21"], "unknown preset 'kaplan'"),
    (["--law=/nonexistent/law.json", "--flops=1e21"], "cannot read law file"),
    (["--preset=hoffmann2022", "--flops=1e21", "--ci=90"], "must be strictly between 0 and 1"),
    (["--preset=hoffmann2022", "--flop=1e21"], "unrecognized arguments: --flop=1e21"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
  rc, out, err = run(capsys, *argv)
  assert rc == 2 and out == ""
  assert err.count("\n") == 1 and err.startswith("chinchax plan: error: ")
  assert message in err


def test_broken_law_file_exits_2_naming_the_field(capsys, law_path):
  doc = json.loads(law_path.read_text())
  doc["law"]["alpha"] = -1
  law_path.write_text(json.dumps(doc))
  rc, _, err = run(capsys, f"--law={law_path}", "--flops=1e21")
  assert rc == 2 and err.count("\n") == 1
  assert "law.alpha: expected a positive finite number, got -1" in err


def test_help_exits_0(capsys):
  rc, out, _ = run(capsys, "--help")
  assert rc == 0 and "--unique-tokens" in out


def test_extrapolated_plan_prints_the_factors_and_an_in_range_one_does_not(capsys, law_path):
  # The law was fitted on N in [1e7, 1e9], D in [1e9, 1e11], C in [6e16, 6e20].
  rc, out, _ = run(capsys, f"--law={law_path}", "--params=1.7e10", "--tokens=1e11")
  assert rc == 0
  (warning,) = [l for l in out.splitlines() if l.startswith("warning:")]
  assert "extrapolates beyond the fitted runs by N 17x, D inside, C 17x" in warning
  assert "N [1e7, 1e9] (17x outside)" in out
  rc, out, _ = run(capsys, f"--law={law_path}", "--params=3e8", "--tokens=3e10", "--json")
  plan = json.loads(out)
  assert plan["warnings"] == [] and plan["extrapolation"]["factors"] == {"N": 1, "D": 1,
                                                                          "C": 1}
  lo, hi = plan["given"]["loss_interval"]
  assert lo < plan["given"]["loss"] < hi


def test_a_nesting_form_law_plans_its_own_loss(capsys, tmp_path):
  """law.json of E + (A/N^alpha + B/D^beta)^gamma, draws with six columns: the plan prints the
  form, and its loss at (N, D) is that sum by hand; the allocation is the inner sum's."""
  E, A, B, alpha, beta, gamma = 0.3, 1.5e10, 4.2e12, 0.79, 0.98, 0.106
  rng = np.random.default_rng(0)
  theta = np.array([E, A, B, alpha, beta, gamma])
  doc = law_lib.build_law(E=E, A=A, B=B, alpha=alpha, beta=beta, gamma=gamma,
                          samples=theta * (1 + 0.01 * rng.standard_normal((40, 6))),
                          N=[5e7, 3e9], D=[5e7, 1.2e11], inputs=["runs.csv"])
  path = tmp_path / "law.json"
  law_lib.save_law(path, doc)
  rc, out, err = run(capsys, f"--law={path}", "--params=3e10", "--tokens=6e11")
  assert rc == 0 and err == ""
  assert "L = 0.3 + (1.5e10/N^0.79 + 4.2e12/D^0.98)^0.106" in out
  loss = E + (A / 3e10**alpha + B / 6e11**beta)**gamma
  assert f"loss                      {loss:.4f}" in out
  C = 6 * 3e10 * 6e11
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  assert f"{fmt.num(G * (C / 6)**(beta / (alpha + beta)))} (" in out
