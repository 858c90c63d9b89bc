"""`chinchax train --config=SWEEP --cell=NAME`: every named config trains where `train --help`
lists it. A sweep config without --cell is one line naming --cell and `chinchax sweep`; with
--cell it trains that run of the grid, as the sweep would (the same N, D, budget, LR, batch)."""

import json
import os
import subprocess
import sys
import sysconfig

import pytest

from chinchax import cli
from chinchax.cli import flags
from chinchax.sweeps import configs, spec as spec_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWEEPS = [n for n in configs.NAMES if n != "train"]
SMALL_CORPUS = os.path.join(sysconfig.get_paths()["stdlib"], "*.py")


def run(capsys, *argv):
  rc = cli.run(list(argv))
  out, err = capsys.readouterr()
  return rc, out, err


def jobs(name: str) -> list[str]:
  return [j.name for j in spec_lib.resolve(flags.load(configs.path(name)), "w").jobs]


def refusal(rc, out, err) -> str:
  assert rc == 2 and out == "", (rc, out, err)
  lines = err.splitlines()
  assert len(lines) == 1 and lines[0].startswith("chinchax train: error: "), err
  assert len(lines[0]) < 400, lines[0]
  return lines[0]


@pytest.mark.parametrize("name", SWEEPS)
def test_a_sweep_config_without_cell_is_one_line_naming_cell_and_sweep(capsys, tmp_path, name):
  line = refusal(*run(capsys, "train", f"--config={name}", f"--workdir={tmp_path}/w"))
  assert f"--config={name} is a sweep config" in line
  assert "--cell=NAME" in line and jobs(name)[0] in line
  assert f"`chinchax sweep --config={name}`" in line
  assert f"`chinchax sweep --config={name} --dry-run`" in line
  assert list(tmp_path.iterdir()) == []


def test_tiny_cell_dry_run_is_the_dry_runs_cell(capsys):
  """The plan of --cell is the sweep's cell: its N, D, steps, batch, LR and warmup."""
  (cell,) = [c for c in spec_lib.resolve(flags.load(configs.path("tiny")), "w").cells
             if c.name == "C2.5e11-N3.2e4"]
  rc, out, err = run(capsys, "train", "--config=tiny", "--cell=C2.5e11-N3.2e4", "--dry-run")
  assert rc == 0, err
  assert (cell.N, cell.D, cell.steps, cell.batch_size) == (31968, 1304064.0, 849, 24)
  assert out.startswith("run 'C2.5e11-N3.2e4': 849 steps of 24 x 64 tokens")
  assert "D = 1.304e6 tokens" in out and "model: N = 31,968 (" in out
  assert f"peak LR {cell.peak_lr:.3g} after {cell.warmup_steps} warmup steps" in out
  assert "C = 2.501e11 FLOPs (6ND)" in out


@pytest.mark.parametrize("name", ["smoke", "hparams_smoke"])
def test_a_wsd_sweeps_run_is_its_series(capsys, name):
  """A WSD sweep trains a series of cells as one run: --cell takes the run's name."""
  first = jobs(name)[0]
  assert first.endswith("-wsd")
  rc, out, err = run(capsys, "train", f"--config={name}", f"--cell={first}", "--dry-run")
  assert rc == 0, err
  assert out.startswith(f"run '{first}'") and "WSD: a constant-LR run, then a cooldown" in out


def test_a_cell_of_a_wsd_run_names_the_run_to_train(capsys):
  line = refusal(*run(capsys, "train", "--config=smoke", "--cell=C5e10-N1.01e4", "--dry-run"))
  assert "--cell=C5e10-N1.01e4 is a cooldown branch of the WSD run C-N1.01e4-wsd" in line
  assert line.endswith("train it with --cell=C-N1.01e4-wsd")


@pytest.mark.parametrize("config, cell, near", [
    ("tiny", "C2.5e11-N3.2e5", "C2.5e11-N3.2e4"),   # a typo: the nearest name first
    ("tiny", "nope", "C2.5e11-N3.2e4"),
    ("smoke", "C-N1.01e4", "C-N1.01e4-wsd"),
])
def test_a_cell_not_in_the_grid_names_valid_ones(capsys, config, cell, near):
  line = refusal(*run(capsys, "train", f"--config={config}", f"--cell={cell}", "--dry-run"))
  assert f"--cell={cell} is not a run of --config={config}; its runs: {near}, " in line
  assert " more" in line and f"`chinchax sweep --config={config} --dry-run`" in line


def test_a_refused_cell_says_why(capsys):
  """A cell the grid refuses (here: below the recipe's floor) is named with the grid's reason."""
  floor = "--config.recipe.min_d_model=40"
  rc, out, err = run(capsys, "sweep", "--config=tiny", floor, "--dry-run")
  assert rc == 0 and "C2.5e11-N3.2e4: refused: shape below the recipe's floor" in out
  line = refusal(*run(capsys, "train", "--config=tiny", floor, "--cell=C2.5e11-N3.2e4",
                      "--dry-run"))
  assert ("the grid of --config=tiny refuses that cell (shape below the recipe's floor: "
          "d_model=32 < recipe.min_d_model=40); its runs: C2.5e11-N4.64e4, ") in line


def test_overrides_that_rename_the_cells_are_named(capsys):
  """Overrides change the grid: the names to pick from are the overridden grid's."""
  line = refusal(*run(capsys, "train", "--config=tiny", "--config.vocab_size=300",
                      "--cell=C2.5e11-N3.2e4", "--dry-run"))
  assert "its runs: C2.5e11-N3.18e4, " in line
  assert "`chinchax sweep --config=tiny --dry-run` (with the same --config. overrides)" in line


def test_the_sweeps_vocabulary_is_checked_as_the_sweep_checks_it(capsys):
  """The grid sized its cells for vocab_size: a tokenizer of another size would train
  another N than the dry run's, and the sweep refuses it."""
  line = refusal(*run(capsys, "train", "--config=tiny", "--config.vocab_size=300",
                      "--cell=C2.5e11-N3.18e4", "--dry-run"))
  assert "model vocab_size=300 does not match the bytes tokenizer's 258 ids" in line


@pytest.mark.parametrize("argv, expect", [
    (["--config=train:tiny", "--cell=C2.5e11-N3.2e4"],
     "--cell=C2.5e11-N3.2e4 picks a run of a sweep config, but --config=train:tiny is one "
     "run's config"),
    (["--config=tiny", "--cell="], "--cell needs a value"),
    (["--config=tiny", "--cell"], "--cell needs a value"),
])
def test_cell_misused_is_one_line(capsys, argv, expect):
  assert expect in refusal(*run(capsys, "train", *argv, "--dry-run"))


def test_train_help_says_which_configs_and_what_cell_does(capsys):
  rc, out, _ = run(capsys, "train", "--help")
  assert rc == 0
  flag = next(line for line in out.splitlines() if line.strip().startswith("--cell=NAME"))
  assert "with a sweep config: train its run NAME" in flag
  text = " ".join(out.split())
  assert "--config takes a train config (the named config `train`, `train:PRESET`" in text
  assert "or a sweep config (the other named configs, or a sweep file) with --cell=NAME" in text
  assert "`chinchax sweep --config=X --dry-run` lists" in text
  for name in configs.NAMES:  # the named configs it speaks of are listed
    assert any(line.split()[:1] == [name] for line in out.splitlines()), name


def _cli(*argv, cwd=ROOT):
  env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}
  return subprocess.run([sys.executable, "-m", "chinchax.cli", *argv], cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_train_a_tiny_cell_as_a_process(tmp_path):
  """The issue's case from the command line: without --cell one line, exit 2, nothing written;
  with the grid's smallest cell it trains it, and result.json has the dry run's N, D, C."""
  wd, data = tmp_path / "run", tmp_path / "data"
  p = _cli("train", "--config=tiny", f"--workdir={wd}")
  assert p.returncode == 2 and p.stdout == "", p.stderr[-2000:]
  (line,) = p.stderr.splitlines()
  assert "--cell=NAME" in line and "`chinchax sweep --config=tiny`" in line
  assert not wd.exists()

  p = _cli("sweep", "--config=tiny", "--dry-run", "--json")
  assert p.returncode == 0, p.stderr[-2000:]
  grid = json.loads(p.stdout)["cells"]
  smallest = min(grid, key=lambda c: c["N"])
  assert smallest["name"] == "C2.5e11-N3.2e4"
  p = _cli("train", "--config=tiny", f"--cell={smallest['name']}", f"--workdir={wd}", "--quiet",
           f"--config.train.data.corpus={SMALL_CORPUS}", f"--config.train.data.data_dir={data}")
  assert p.returncode == 0, p.stderr[-3000:]
  with open(wd / "result.json") as f:
    r = json.load(f)
  assert r["status"] == "done" and r["name"] == smallest["name"]
  assert (r["N_total"], r["D"]) == (smallest["N"], smallest["D"])
  assert r["budget"] == 2.5e11 and r["steps"] == 849
  assert r["hparams"]["batch_size"] == 24 and 0 < r["eval_loss"] < 5.55  # below ln(258)
