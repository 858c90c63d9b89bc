"""A workdir holds one study (sweeps/configs/identity.py): a sweep's default workdir is named
for its config; a rerun that changes what a cell trains is refused naming the key, with
nothing written; one that adds budgets extends the study and refits; free keys are allowed
and recorded; a run's resume checks its config.json; a missing or garbled identity file with
runs beside it is a damaged workdir, refused."""

import json
import os
import subprocess
import sys

import pytest

from chinchax import cli
from chinchax.sweeps import configs, sweep
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import loop
from chinchax.errors import UserError
from tests.helpers import sweep_helper
from tests.helpers.sweep_helper import synthetic_argv, synthetic_train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = loop.train  # the real one: the fixtures' sweeps train synthetic runs


@pytest.mark.parametrize("config, workdir", [
    ("smoke", "runs/smoke"), ("tiny", "runs/tiny"), ("sweeps/configs/gpu_node.py", "runs/gpu_node"),
    ("/a/b/mine.py:big", "runs/mine-big"), ("train:tiny", "runs/train-tiny")])
def test_the_default_workdir_is_named_for_the_config(config, workdir):
  assert configs.default_workdir(config) == workdir


def _bytes(folder) -> dict[str, bytes]:
  return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
          if p.is_file()}


def test_a_sweep_with_no_workdir_leaves_another_studys_untouched(tmp_path, monkeypatch):
  monkeypatch.setattr(loop, "train", synthetic_train)
  monkeypatch.chdir(tmp_path)
  smoke = tmp_path / "runs" / "smoke"
  smoke.mkdir(parents=True)
  (smoke / "law.json").write_text('{"the smoke": "law"}\n')
  (smoke / "runs.jsonl").write_text('{"name": "C5e10-N1e4"}\n')
  before = _bytes(smoke)
  argv = [a for a in synthetic_argv("unused") if not a.startswith("--workdir=")]
  assert cli.run(["sweep", *argv]) == 0
  assert _bytes(smoke) == before
  assert (tmp_path / "runs" / "tiny" / "law.json").exists()


@pytest.fixture
def study(tmp_path, monkeypatch):
  """A finished synthetic study of 15 cells (3 budgets x 5 sizes)."""
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "study"
  assert cli.run(["sweep", *synthetic_argv(wd)]) == 0
  return wd


def test_a_changed_recipe_is_refused_naming_the_key_and_nothing_is_written(study, capsys):
  before = _bytes(study)
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(study), "--config.recipe.lr_ref=1.2e-3"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1, err
  assert f"{study} holds the study of another config: recipe.lr_ref 6e-4 -> 0.0012;" in err
  assert "pass another --workdir" in err
  assert _bytes(study) == before  # law.json, sweep.json, runs.jsonl: to the bit


def test_a_change_in_the_ninth_digit_reads_as_a_change(study, capsys):
  before = _bytes(study)
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(study), "--config.recipe.lr_ref=6.0000001e-4"]) == 2
  err = capsys.readouterr().err
  assert "recipe.lr_ref 6e-4 -> 6.0000001e-4;" in err, err
  assert _bytes(study) == before


def test_a_new_budget_extends_the_study_and_refits(study, capsys):
  law = json.loads((study / "law.json").read_text())
  lines = (study / "runs.jsonl").read_text().splitlines()
  capsys.readouterr()
  argv = [a.replace("--config.budgets=(1e12,3e12,1e13)", "--config.budgets=(1e12,3e12,1e13,3e13)")
          for a in synthetic_argv(study)]
  assert cli.run(["sweep", *argv]) == 0
  out = capsys.readouterr().out
  assert out.splitlines()[0] == (f"sweep 'tiny' in {study}; extending the study in {study}: "
                                 "budgets [1e12, 3e12, 1e13] -> [1e12, 3e12, 1e13, 3e13]")
  assert "6 of 20 cells to train" in out  # 5 new, and sweep_helper's cell that always fails
  assert len((study / "runs.jsonl").read_text().splitlines()) == len(lines) + 5
  refit = json.loads((study / "law.json").read_text())
  assert refit["data"]["points"] == law["data"]["points"] + 5


def test_a_free_key_is_allowed_and_recorded(study, capsys):
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(study), "--config.bootstrap=7"]) == 0
  out = capsys.readouterr().out
  assert "1 of 15 cells to train" in out  # sweep_helper's cell that always fails, retried
  assert json.loads((study / "sweep.json").read_text())["bootstrap"] == 7


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.unlink(), "sweep.json is missing but"),
    (lambda p: p.write_text('{"name": "tiny", '), "sweep.json does not parse"),
])
def test_a_damaged_identity_file_is_refused(study, capsys, damage, message):
  damage(study / "sweep.json")
  before = _bytes(study)
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(study)]) == 2
  err = capsys.readouterr().err
  assert message in err and "pass another --workdir" in err and err.count("\n") == 1, err
  assert _bytes(study) == before


def _run_folder(tmp_path, c, *, checkpoints=True):
  wd = tmp_path / "run"
  (wd / "checkpoints" if checkpoints else wd).mkdir(parents=True)
  (wd / "config.json").write_text(c.to_json_best_effort(indent=2))
  return str(wd)


def test_a_stopped_run_of_another_config_is_not_resumed(tmp_path):
  c = train_config.get_config("tiny")
  wd = _run_folder(tmp_path, c)
  changed = train_config.get_config("tiny")
  changed.optimizer.peak_lr, changed.seed = 1e-2, 3
  with pytest.raises(UserError) as e:
    run_config.check_resume(changed, wd)
  assert str(e.value) == (f"{wd} holds a run trained with another config: "
                          "optimizer.peak_lr 0.003 -> 0.01, seed 0 -> 3; a resume may change only "
                          "logging, checkpoint cadence and the mesh; pass another --workdir to "
                          "train this config")
  free = train_config.get_config("tiny")
  free.log_every, free.checkpoint.keep, free.mesh.fsdp = 1, 5, 2
  run_config.check_resume(free, wd)  # allowed


def test_runs_without_their_config_are_a_damaged_folder(tmp_path):
  wd = tmp_path / "run"
  (wd / "checkpoints").mkdir(parents=True)
  with pytest.raises(UserError, match="config.json is missing but .* holds runs"):
    run_config.check_resume(train_config.get_config("tiny"), str(wd))
  run_config.check_resume(train_config.get_config("tiny"), str(tmp_path / "fresh"))  # a start


@pytest.mark.slow
def test_a_finished_run_rerun_with_another_config_exits_2(tmp_path):
  wd = str(tmp_path / "w")
  env = dict(os.environ, PYTHONPATH=ROOT)
  train = lambda *more: subprocess.run(  # noqa: E731
      [sys.executable, "-m", "chinchax.cli", "train", "--config=train:tiny", f"--workdir={wd}",
       *more], capture_output=True, text=True, timeout=600, env=env)
  first = train()
  assert first.returncode == 0, first.stderr
  result = open(os.path.join(wd, "result.json"), "rb").read()
  for flag, said in (("--config.optimizer.peak_lr=1e-2", "optimizer.peak_lr 0.003 -> 0.01"),
                     ("--config.tokens=3e5", "tokens 6144 -> 3e5")):
    p = train(flag)
    assert p.returncode == 2, p.stdout + p.stderr
    assert said in p.stderr and "Traceback" not in p.stderr and "already done" not in p.stdout
  assert open(os.path.join(wd, "result.json"), "rb").read() == result
  same = train("--config.log_every=2")
  assert same.returncode == 0 and "already done" in same.stdout


SYNTHETIC = os.path.join(ROOT, "tests", "helpers", "synthetic_sweep.py")


def _sweep_process(cwd, *argv):
  return subprocess.run([sys.executable, SYNTHETIC, "sweep", *argv, "--quiet"], cwd=cwd,
                        capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.mark.slow
def test_as_processes_no_workdir_keeps_smoke_and_a_recipe_change_exits_2(tmp_path):
  smoke = tmp_path / "runs" / "smoke"
  smoke.mkdir(parents=True)
  (smoke / "law.json").write_text('{"the smoke": "law"}\n')
  before = _bytes(smoke)
  argv = [a for a in synthetic_argv("unused") if not a.startswith("--workdir=")]
  first = _sweep_process(tmp_path, *argv)
  assert first.returncode == 0, first.stderr[-2000:]
  assert first.stdout.splitlines()[0] == "sweep 'tiny' in runs/tiny"
  assert _bytes(smoke) == before
  tiny = tmp_path / "runs" / "tiny"
  law = (tiny / "law.json").read_bytes()
  again = _sweep_process(tmp_path, *argv, "--config.recipe.lr_ref=1.2e-3")
  assert again.returncode == 2
  assert again.stderr == (f"chinchax sweep: error: runs/tiny holds the study of another config: "
                          "recipe.lr_ref 6e-4 -> 0.0012; a rerun may add budgets or sizes, or "
                          "change where cells run and what is logged; pass another --workdir "
                          "for a new study\n")
  assert (tiny / "law.json").read_bytes() == law


def test_a_run_into_a_sweeps_workdir_is_refused_and_nothing_is_written(study, capsys,
                                                                        monkeypatch):
  """`chinchax train` into a sweep's folder would write its config.json, checkpoints and
  metrics beside the sweep's cells: another study in the same workdir."""
  monkeypatch.setattr(loop, "train", TRAIN)
  before = _bytes(study)
  capsys.readouterr()
  assert cli.run(["train", "--config=train:tiny", f"--workdir={study}"]) == 2
  err = capsys.readouterr().err
  assert err == (f"chinchax train: error: {study} holds a sweep (sweep.json), another study: a "
                 "run trains in a folder of its own; pass another --workdir (a sweep's cell "
                 "trains with `chinchax train --config=SWEEP --cell=NAME`)\n")
  assert _bytes(study) == before


def test_a_sweep_into_a_runs_workdir_is_refused_and_nothing_is_written(tmp_path, monkeypatch,
                                                                       capsys):
  monkeypatch.setattr(loop, "train", synthetic_train)
  wd = tmp_path / "run"
  _run_folder(tmp_path, train_config.get_config("tiny"))
  (wd / "chinchax.lock").write_text("")  # a run's folder holds its lock, which a sweep takes
  before = _bytes(wd)
  capsys.readouterr()
  assert cli.run(["sweep", *synthetic_argv(wd)]) == 2
  err = capsys.readouterr().err
  assert err == (f"chinchax sweep: error: {wd} holds a run of `chinchax train` (config.json), "
                 "another study: a sweep needs a workdir of its own; pass another --workdir\n")
  assert _bytes(wd) == before
