"""Every launcher command in launch/README.md, and every dry run of the sweep without
--compile, runs as written from the checkout root."""

import importlib
import os
import re
import shlex

import pytest

from chinchax import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def commands() -> list[list[str]]:
  with open(os.path.join(REPO, "launch", "README.md"), encoding="utf-8") as f:
    text = f.read()
  out = []
  for block in re.findall(r"```\n(.*?)```", text, flags=re.S):
    for line in block.replace("\\\n", " ").splitlines():
      argv = shlex.split(line, comments=True)
      if argv[:2] == ["python", "-m"] and argv[2].startswith("chinchax.launch."):
        out.append(argv)
      elif argv[:2] == ["chinchax", "sweep"] and "--dry-run" in argv and not any(
          a.startswith("--compile") for a in argv):
        out.append(argv)
  return out


def readme_commands() -> list[list[str]]:
  """The `chinchax ...` example lines of README.md."""
  with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
    text = f.read()
  out = []
  for block in re.findall(r"```(?:bash)?\n(.*?)```", text, flags=re.S):
    for line in block.replace("\\\n", " ").splitlines():
      if line.startswith("chinchax ") and "[" not in line and "|" not in line:
        out.append(shlex.split(line, comments=True))
  return out


# What each README command needs that a test cannot give it: training and fitting real runs,
# and the artifacts (a forecast, an hparams.json) that an earlier line of README makes.
def _as_tested(argv: list[str]) -> list[str]:
  made_earlier = ("forecast.json", "hparams.json", "tasks.json")
  if any(a.split("=", 1)[-1].split(":", 1)[-1].endswith(made_earlier) for a in argv[2:]):
    return [argv[1], "--help"]
  if argv[1] in ("sweep", "train"):
    return argv[1:] + ["--dry-run"]  # the plan, from the config alone
  if argv[1] in ("fit", "fit-hparams", "fit-tasks", "next", "forecast", "report", "eval",
                 "tokenizer", "data"):
    return [argv[1], "--help"]  # they read runs, laws or corpora the checkout does not hold
  return argv[1:]


def test_readme_has_the_commands_it_shows():
  commands = {a[1] for a in readme_commands()}
  assert {"plan", "fit", "sweep", "train"} <= commands


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda a: " ".join(a[:3]))
def test_each_readme_command_runs(argv, monkeypatch, capsys, tmp_path):
  monkeypatch.chdir(tmp_path)  # from a folder outside the checkout, as after pip install
  monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
  rc = cli.run(_as_tested(argv))
  out, err = capsys.readouterr()
  assert rc == 0, err
  assert out.strip()
  # Dry runs write nothing; a command that writes its --out (`chinchax law`) writes that alone.
  outs = sorted(a.split("=", 1)[1] for a in _as_tested(argv) if a.startswith("--out="))
  assert sorted(p.name for p in tmp_path.iterdir()) == outs


def test_the_readme_has_commands_of_every_launcher():
  modules = {a[2] for a in commands() if a[0] == "python"}
  assert modules == {f"chinchax.launch.{m}" for m in ("tpu", "gke", "gpu", "local",
                                                                 "multiproc")}


@pytest.mark.parametrize("argv", commands(), ids=lambda a: " ".join(a[:4]))
def test_each_command_runs_dry(argv, monkeypatch, capsys, tmp_path):
  monkeypatch.chdir(REPO)
  monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))  # no dataset: the dry run reads none
  if argv[0] == "chinchax":
    rc = cli.run(argv[1:])
  else:
    module = importlib.import_module(argv[2])
    rest = argv[3:] + ([] if "--dry-run" in argv or argv[3] == "render" else ["--dry-run"])
    rc = module.main(rest)
  out, err = capsys.readouterr()
  assert rc == 0, err
  assert out.strip()
  assert not os.path.exists(os.path.join(REPO, "chin-v5p.jobset.yaml"))
