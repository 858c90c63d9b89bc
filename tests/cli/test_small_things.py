"""Small confusions of a first hour: fit's default --out replacing a law.json says so and
--help states the defaults; a budget with both an exponent and a suffix is refused; the
hoffmann2022 preset at Chinchilla's budget says why it is not 70B / 1.4T."""

import re

import pytest

from chinchax import cli
from tests.helpers import synthetic_law as syn


def _csv(path):
  runs = syn.isoflop(budgets=(1e18, 1e19, 1e20), sizes=5, noise=0.003)
  path.write_text("N,D,loss\n" + "".join(
      f"{n:.17g},{d:.17g},{l:.17g}\n" for n, d, l in zip(runs["N"], runs["D"], runs["loss"])))
  return str(path)


def test_fit_without_out_says_it_replaced_the_law_json(tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  runs = _csv(tmp_path / "runs.csv")
  assert cli.run(["fit", runs, "--bootstrap=0"]) == 0
  first = capsys.readouterr().out
  assert (tmp_path / "law.json").exists() and "replacing" not in first
  assert cli.run(["fit", runs, "--bootstrap=0"]) == 0
  assert re.search(r"wrote law\.json \(replacing the law\.json made at 20\d\d-",
                   capsys.readouterr().out)


def test_fit_help_states_every_default(capsys):
  with pytest.raises(SystemExit):
    from chinchax.cli import fit  # pylint: disable=g-import-not-at-top
    fit._parser().parse_args(["--help"])  # pylint: disable=protected-access
  text = " ".join(capsys.readouterr().out.split())
  for flag, default in (("--out", "./law.json"), ("--bootstrap", "1000"), ("--ci", "0.9"),
                        ("--plots", "none"), ("--params-convention", "total"),
                        ("--flops-convention", "6ND"), ("--schedule", "all"),
                        ("--delta", "0.001"), ("--seed", "0")):
    help_of_flag = text.split(flag, 2)[-1][:300]
    assert f"default: {default}" in help_of_flag, (flag, help_of_flag)


@pytest.mark.parametrize("budget", ["1e22B", "5.76e23T"])
def test_a_budget_with_an_exponent_and_a_suffix_is_refused(budget, capsys):
  assert cli.run(["plan", "--preset=hoffmann2022", f"--flops={budget}"]) == 2
  err = capsys.readouterr().err
  assert len(err.splitlines()) == 1 and "both an exponent and a suffix" in err


def test_the_chinchilla_preset_at_chinchillas_budget_says_why_it_is_not_70b(capsys):
  assert cli.run(["plan", "--preset=hoffmann2022", "--flops=5.76e23"]) == 0
  out = capsys.readouterr().out
  assert "3.22e10 (32.2B)" in out and "not Chinchilla's 70B and 1.4T" in out
  assert cli.run(["plan", "--preset=hoffmann2022", "--flops=70B"]) == 0  # a suffix alone


def test_report_says_what_its_wall_time_counts():
  from chinchax.sweeps import report  # pylint: disable=g-import-not-at-top
  records = [{"name": "C1e11-N1e4", "status": "done", "budget": 1e11, "N_total": 10_000,
              "D": 1.6e6, "eval_loss": 2.3, "wall_s": 12.0, "schedule": "wsd"}]
  text = "\n".join(report.runs_section(records))
  assert "| 12 |" in text and "a WSD branch: its cooldown" in text
  assert "does not add up to the sweep's time" in text


@pytest.mark.parametrize("argv, rc", [
    (["-h"], 141), (["--version"], 141), (["plan", "--preset=hoffmann2022", "--flops=1e21"], 141),
    (["plan", "--help"], 0),  # argparse swallows the write's error itself: quiet, exit 0
])
def test_a_closed_pipe_ends_quietly(argv, rc):
  """`chinchax -h | head -0`: the reader is gone before anything is written."""
  import os, subprocess, sys  # pylint: disable=import-outside-toplevel,multiple-imports
  read_end, write_end = os.pipe()
  os.close(read_end)
  p = subprocess.run([sys.executable, "-m", "chinchax.cli", *argv], stdout=write_end,
                     stderr=subprocess.PIPE, text=True, timeout=120)
  os.close(write_end)
  assert p.returncode == rc, p.stderr
  assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
