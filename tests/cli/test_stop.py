"""Exit statuses that mean something: Ctrl-C is 130 with the resume hint; a reader that leaves
(`chinchax sweep | head`) is a stop, neither a failed cell nor a traceback."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from chinchax import cli
from chinchax.cli import exit_status
from tests.helpers import sweep_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_stopped_status_per_reason(capsys):
  assert exit_status.stopped("chinchax sweep", "SIGINT") == 130
  assert "stopped by Ctrl-C" in capsys.readouterr().err
  assert exit_status.stopped("chinchax sweep", "SIGTERM") == 143
  assert exit_status.stopped("chinchax train", "SIGPIPE") == 141
  err = capsys.readouterr().err
  assert "broken pipe" in err and err.count("rerun the same command to resume") == 2


def test_ctrl_c_before_the_run_is_130_with_the_hint(capsys, monkeypatch):
  def interrupted(argv):
    raise KeyboardInterrupt

  monkeypatch.setattr("chinchax.cli.models.main", interrupted)
  assert cli.run(["models"]) == 130
  err = capsys.readouterr().err
  assert "interrupted; rerun the same command to resume" in err and "Traceback" not in err


def _sweep(workdir, **kw):
  env = dict(os.environ, PYTHONPATH=ROOT)
  return subprocess.Popen(
      [sys.executable, "-m", "chinchax.cli", "sweep",
       *sweep_helper.argv(str(workdir), "--config.train.log_every=1")],
      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _no_failed_cell(workdir):
  for name, result in sweep_helper.results(str(workdir)).items():
    assert result["status"] != "failed", (name, result)
  path = os.path.join(workdir, "runs.jsonl")
  rows = [json.loads(x) for x in open(path)] if os.path.exists(path) else []
  assert all(r["status"] != "failed" for r in rows)


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_exits_130_and_fails_no_cell(tmp_path):
  p = _sweep(tmp_path)
  assert p.stdout.readline().startswith("sweep ")  # the study and its workdir
  assert "cells to train" in p.stdout.readline()  # the stop flag is installed from here on
  time.sleep(3)
  p.send_signal(signal.SIGINT)
  out, err = p.communicate(timeout=300)
  assert p.returncode == 130, err
  assert "rerun the same command to resume" in err and "Traceback" not in err
  assert (out + err).count("rerun the same command") == 1, out + err  # said once, not twice
  _no_failed_cell(tmp_path)


@pytest.mark.slow
def test_a_closed_pipe_stops_the_sweep_without_a_failed_cell(tmp_path):
  p = _sweep(tmp_path)
  p.stdout.readline()
  p.stdout.close()  # `| head -1`: the reader leaves
  err = p.stderr.read()
  p.wait(timeout=300)
  assert p.returncode == 141, err
  assert "broken pipe" in err and "Traceback" not in err
  _no_failed_cell(tmp_path)
  # and the stopped sweep resumes to the end
  q = subprocess.run([sys.executable, "-m", "chinchax.cli", "sweep",
                      *sweep_helper.argv(str(tmp_path))], env=dict(os.environ, PYTHONPATH=ROOT),
                     capture_output=True, text=True, timeout=600)
  assert q.returncode in (0, 1), q.stderr  # 1: the two-cell grid has too few runs to fit
  assert len(sweep_helper.results(str(tmp_path))) == 2
  _no_failed_cell(tmp_path)
