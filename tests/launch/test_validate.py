"""The launchers check the sweep config here, as `chinchax sweep --dry-run` does, before they
create anything; the SentencePiece model and the config file travel to every host."""

import os
import shlex

import pytest

from chinchax.launch import gke, gpu, local, tpu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TPU = ["--name=chin-a", "--project=p", "--zone=us-east5-a", "--accelerator=v5p-32",
       "--repo=https://github.com/o/chinchax", "--workdir=gs://b/w"]


def plan(capsys, main, *argv):
  rc = main([*argv, "--dry-run"])
  out, err = capsys.readouterr()
  return rc, [shlex.split(x[4:]) for x in out.splitlines() if x.startswith("  $ ")], out, err


@pytest.mark.parametrize("main, argv", [
    (tpu.main, ["all", *TPU]),
    (gpu.main, ["--hosts=g0,g1", "--workdir=gs://b/w"]),
    (gke.main, ["up", "--name=chin", "--tpu=v5p:2x2x4", "--workdir=gs://b/w"]),
    (local.main, ["--no-install"]),
])
def test_a_key_the_config_lacks_is_refused_before_any_step(capsys, monkeypatch, main, argv):
  monkeypatch.chdir(REPO)
  rc, steps, out, err = plan(capsys, main, *argv, "--config=sweeps/configs/tpu_v5p.py",
                             "--config.seed=1")  # the key is train.seed
  assert rc == 2 and steps == [] and out == ""
  assert len(err.strip().splitlines()) == 1 and "seed" in err
  rc, steps, _, err = plan(capsys, main, *argv, "--config=tpu_v5p", "--config.train.seed=1")
  assert rc == 0 and steps, err


def test_a_grid_that_cannot_run_is_refused_here(capsys, monkeypatch):
  monkeypatch.chdir(REPO)
  rc, steps, out, err = plan(capsys, tpu.main, "up", *TPU, "--config=tpu_v5p",
                             "--config.budgets=()")
  assert rc == 2 and steps == [] and err.count("\n") == 1


def test_the_tokenizer_and_config_reach_every_tpu_worker(capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "cfg.py").write_text(
      "from chinchax.sweeps.configs import tpu_v5p\n"
      "def get_config(arg=None):\n  return tpu_v5p.get_config(arg)\n")
  (tmp_path / "spm.model").write_bytes(b"model")
  rc, steps, _, err = plan(capsys, tpu.main, "up", *TPU, "--config=cfg.py",
                           f"--config.train.data.spm_model={tmp_path}/spm.model")
  assert rc == 0, err
  scp = [s for s in steps if "scp" in s]
  assert [s[s.index("scp") + 1] for s in scp] == ["cfg.py", f"{tmp_path}/spm.model"]
  assert all("--worker=all" in s for s in scp)
  assert scp[1][s_index(scp[1])] == f"chin-a:{tpu.RUN_DIR}/tokenizer/spm.model"
  start = steps[-1][-1]
  assert f"--config.train.data.spm_model=tokenizer/spm.model" in start  # the last one wins
  assert start.index(f"spm_model={tmp_path}") < start.index("spm_model=tokenizer/spm.model")
  install = next(s[-1] for s in steps if "pip" in s[-1])
  assert f"{tpu.RUN_DIR}/tokenizer" in install  # the folder exists before the copy


def s_index(argv):
  return argv.index("scp") + 2


def test_the_tokenizer_reaches_every_gpu_host(capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "spm.model").write_bytes(b"model")
  rc, steps, _, err = plan(capsys, gpu.main, "--hosts=g0,g1", "--workdir=gs://b/w",
                           "--config=tpu_v5p", "--config.train.data.spm_model=spm.model")
  assert rc == 0, err
  copies = [s for s in steps if s[0] == "scp"]
  assert copies == [["scp", "spm.model", f"{h}:chinchax/tokenizer/spm.model"]
                    for h in ("g0", "g1")]
  starts = [s[-1] for s in steps if s[0] == "ssh" and "chinchax.cli" in s[-1]]
  assert len(starts) == 2 and all("spm_model=tokenizer/spm.model" in s for s in starts)


def test_gke_refuses_a_tokenizer_on_this_machines_disk(capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(REPO)
  model = tmp_path / "spm.model"
  model.write_bytes(b"model")
  rc, steps, _, err = plan(capsys, gke.main, "up", "--name=chin", "--tpu=v5p:2x2x4",
                           "--workdir=gs://b/w", "--config=tpu_v5p",
                           f"--config.train.data.spm_model={model}")
  assert rc == 2 and steps == [] and "gs://" in err
