"""--help on every subcommand, --version, named configs from any folder, and one-line errors
for missing or broken config files (in-process through the dispatcher, chinchax.cli.run)."""

import os
import subprocess
import sys

import pytest

import chinchax
from chinchax import cli
from chinchax.cli import flags
from chinchax.sweeps import configs
from chinchax.sweeps.configs import keys
from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps.configs import train as train_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(capsys, *argv):
  rc = cli.run(list(argv))
  out, err = capsys.readouterr()
  return rc, out, err


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_subcommand_has_help(capsys, command, flag):
  rc, out, err = run(capsys, command, flag)
  assert rc == 0, err
  assert err == ""
  assert f"chinchax {command}" in out  # its own usage line or text
  assert "--" in out  # and its flags
  if command not in ("sweep", "train"):  # argparse's: usage, blank, the description, blank
    description = out.split("\n\n")[1].strip()
    assert description.endswith((".", ")")), description  # a whole sentence, not cut off


@pytest.mark.slow  # a process of its own: this one has imported jax
def test_help_and_refused_flags_of_the_training_commands_import_no_jax():
  # What trains is imported once the flags are read: --help and a refusal answer at once.
  code = ("import sys; from chinchax import cli\n"
          "rcs = [cli.run(a) for a in (['sweep', '--help'], ['sweep', '--list-configs'],\n"
          "       ['sweep', '--config.nope=1'], ['train', '--help'], ['train', '--config.x=1'])]\n"
          "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'flax', 'optax',\n"
          "                'orbax', 'grain', 'tensorflow_datasets'})\n"
          "print(rcs, heavy, file=sys.stderr)")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr[-2000:]
  assert r.stderr.splitlines()[-1] == "[0, 0, 2, 0, 2] []", r.stderr[-2000:]


@pytest.mark.slow  # a process of its own: this one has imported jax
def test_every_subcommands_help_imports_no_jax():
  # 0.1-0.6 s each, where `next`, `data`, `tokenizer` and `models` took 0.8-1.9 s.
  code = ("import sys; from chinchax import cli\n"
          "HEAVY = {'jax', 'flax', 'optax', 'orbax', 'grain'}\n"
          "for command in sorted(cli.COMMANDS):\n"
          "  rc = cli.run([command, '--help'])\n"
          "  heavy = sorted({m.split('.')[0] for m in sys.modules} & HEAVY)\n"
          "  print(command, rc, heavy, file=sys.stderr)\n")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr[-2000:]
  rows = [line for line in r.stderr.splitlines() if line.split(" ")[0] in cli.COMMANDS]
  assert rows == [f"{c} 0 []" for c in sorted(cli.COMMANDS)], r.stderr[-2000:]


def test_config_commands_list_every_key_with_default_and_meaning(capsys):
  rc, out, _ = run(capsys, "sweep", "--help")
  assert rc == 0
  rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
  smoke = flags.load(configs.path("smoke"))
  for key, value in flags.flat(smoke):
    assert key in rows, key
    assert flags.meaning(key, sweep=True) in rows[key]
  # The defaults, as an override would be typed.
  assert "(5e10, 1e11, 2e11, 4e11, 8e11, 1.5e12)" in rows["budgets"]
  assert smoke.budgets == (5e10, 1e11, 2e11, 4e11, 8e11, 1.5e12)
  assert "(default runs/smoke)" in out
  rc, out, _ = run(capsys, "train", "--help", "--config=train:tiny")
  assert rc == 0 and "--config=train:tiny" in out
  rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
  assert "8" in rows["batch_size"].split()[1] and "sequences per optimizer step" in rows[
      "batch_size"]


@pytest.mark.parametrize("name", configs.NAMES)
def test_every_key_of_every_named_config_has_a_meaning(name):
  c = flags.load(configs.path(name))
  sweep = "train" in c
  missing = [k for k, _ in flags.flat(c) if flags.meaning(k, sweep) is None]
  assert not missing, f"{name}: declare these in sweeps/configs/train.py or sweep.py: {missing}"


def test_version(capsys):
  rc, out, _ = run(capsys, "--version")
  assert rc == 0 and out.strip() == f"chinchax {chinchax.__version__}"


def test_list_configs(capsys):
  rc, out, _ = run(capsys, "sweep", "--list-configs")
  assert rc == 0
  for name in configs.NAMES:
    line = next(x for x in out.splitlines() if x.split()[:1] == [name])
    assert configs.summary(configs.path(name)) in line and len(line.split()) > 3
  # One column: every summary starts where the others do, after the longest name.
  starts = {x.index(configs.summary(configs.path(x.split()[0])))
            for x in out.splitlines()[1:] if x.strip()}
  assert starts == {2 + max(map(len, configs.NAMES)) + 2}, starts


@pytest.mark.parametrize("text", ["gpu_node", "tiny:", "sweeps/configs/tiny.py", "tiny.py"])
def test_named_configs_resolve_from_any_folder(tmp_path, monkeypatch, text):
  monkeypatch.chdir(tmp_path)
  f = flags.parse_config_flags([f"--config={text}", "--config.bootstrap=7"], "chinchax sweep",
                               configs.path("smoke"))
  assert f.config.bootstrap == 7
  name = "gpu_node" if "gpu" in text else "tiny"
  assert configs.resolve(text).split(":")[0] == configs.path(name)
  assert f.config.name == flags.load(configs.path(name)).name


def test_a_local_file_wins_over_a_name(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "tiny.py").write_text(
      "from chinchax.sweeps.configs import tiny\n"
      "def get_config(arg=None):\n  c = tiny.get_config()\n  c.name = 'mine'\n  return c\n")
  assert configs.resolve("tiny.py") == str(tmp_path / "tiny.py")
  f = flags.parse_config_flags(["--config=tiny.py"], "chinchax sweep", configs.path("smoke"))
  assert f.config.name == "mine"


@pytest.mark.parametrize("body, expect", [
    (None, "no such file, and not a named config"),
    ("def get_config(:\n", "could not load it: SyntaxError"),
    ("def get_config(arg=None):\n  raise ValueError('no preset x\\nsecond line')\n",
     "could not load it: ValueError: second line"),
    ("x = 1\n", "defines no get_config()"),
])
def test_missing_or_broken_config_is_one_line(capsys, tmp_path, monkeypatch, body, expect):
  monkeypatch.chdir(tmp_path)
  if body is not None:
    (tmp_path / "c.py").write_text(body)
  for command in ("sweep", "train"):
    rc, out, err = run(capsys, command, "--config=c.py", "--dry-run")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and expect in err, err
  assert list(tmp_path.iterdir()) == ([] if body is None else [tmp_path / "c.py"])


@pytest.mark.slow
def test_installed_names_and_dry_runs_from_outside_the_checkout(tmp_path):
  """The issue's 'done when': from a folder outside the checkout, a named sweep config's dry
  run prints the grid without data, and `train --dry-run` writes nothing."""
  env = dict(os.environ, PYTHONPATH=ROOT, TFDS_DATA_DIR=str(tmp_path / "no_data"))
  out = {}
  for argv in (["sweep", "--config=gpu_node", "--dry-run"],
               ["train", "--config=train", "--dry-run", f"--workdir={tmp_path}/w"]):
    p = subprocess.run([sys.executable, "-m", "chinchax.cli", *argv], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert list(tmp_path.iterdir()) == []
    out[argv[0]] = p.stdout
  assert "C1e17-N8.84e6" in out["sweep"] and "35 cells" in out["sweep"]
  assert "391 steps" in out["train"]


def test_convention_flags_are_named_as_in_fit(capsys, tmp_path):
  rc, out, err = run(capsys, "models", "--max=1e7", "--params-convention=non_embedding")
  assert rc == 0 and "targets count non_embedding parameters" in out and err == ""
  rc, old, err = run(capsys, "models", "--max=1e7", "--convention=non_embedding")
  assert rc == 0 and old == out  # the old spelling still works, with one line of note
  assert err.strip() == "chinchax models: --convention is now --params-convention"
  rc, _, err = run(capsys, "plan", "--preset=hoffmann2022", "--flops=1e21",
                   "--flops-convention=chinchilla")
  assert rc == 2 and "counts flops as '6ND'" in err and len(err.strip().splitlines()) == 1
  rc, out, _ = run(capsys, "plan", "--preset=hoffmann2022", "--flops=1e21",
                   "--flops-convention=6ND", "--params-convention=total")
  assert rc == 0 and "parameters N*" in out
  rc, _, err = run(capsys, "fit", "x.csv", "--flops=6ND")
  assert rc == 2 and "--flops-convention" in err  # --flops is a budget, in plan


@pytest.mark.parametrize("declared", [train_config.KEYS, sweep_config.KEYS])
def test_each_key_is_declared_once_and_the_config_holds_exactly_the_declared_keys(declared):
  names = [k.name for k in declared]
  assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
  built = dict(flags.flat(keys.config(declared)))
  assert sorted(built) == sorted(names)
  assert all(built[k.name] == k.default for k in declared)
  assert all(k.meaning.strip() for k in declared)


def test_the_configs_are_built_from_the_declarations():
  assert dict(flags.flat(train_config.get_config())) == {
      k.name: k.default for k in train_config.KEYS}
  base = sweep_config.base_config(train_config.get_config())
  assert {k for k, _ in flags.flat(base)} == {k.name for k in sweep_config.KEYS} | {
      "train." + k.name for k in train_config.KEYS}
