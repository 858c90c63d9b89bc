"""A run stopped mid-way, or whose latest checkpoint is damaged, and rerun ends exactly where
one never stopped would.

The runs are child processes of `chinchax train` on the tiny preset (24 steps, a checkpoint
every 8, a loss logged every step). A run killed with SIGKILL after its first checkpoint, a run
sent SIGTERM (which saves where it is and exits with the "stopped" status), and a finished run
whose result.json is gone and whose latest checkpoint was emptied (a save cut off by
preemption) or had bytes flipped, are each rerun in the same workdir; every per-step train
loss, every eval loss and the final losses of the record must equal those of an uninterrupted
run bit for bit (float32 on CPU is deterministic), and metrics.jsonl is no shorter than before.
"""

import os
import re
import shutil
import signal
import time

import pytest

from tests.helpers import train_util as tu

pytestmark = pytest.mark.slow  # every test trains, in child processes

STEPS, EVERY = 24, 8
OVERRIDES = ("--config.log_every=1", f"--config.checkpoint.every_steps={EVERY}",
             f"--config.eval_every={EVERY}", "--config.checkpoint.every_minutes=0")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp("resume")
  return {"data": str(root / "tfds"), "cache": str(root / "xla_cache"), "root": root}


@pytest.fixture(scope="module")
def reference(dirs):
  """An uninterrupted run: its losses are the truth the interrupted ones must meet."""
  workdir = str(dirs["root"] / "reference")
  p = tu.run(tu.tiny_args(workdir, dirs["data"], *OVERRIDES), tu.child_env(dirs["cache"]))
  assert p.returncode == 0, p.stderr
  assert "resumed" not in p.stdout
  got = tu.losses(workdir)
  assert [s for s, _ in got["train_loss"]] == list(range(1, STEPS + 1))
  assert [s for s, _ in got["eval_loss"]] == [8, 16, 24]
  return got, tu.result(workdir)


def checkpoint_done(workdir, step: int) -> bool:
  # orbax writes into a temporary directory and renames it when the save is committed.
  return os.path.exists(os.path.join(workdir, "checkpoints", str(step), "_CHECKPOINT_METADATA"))


def start_paused(dirs, workdir):
  """A run that pauses before every step after the first checkpoint, started in the background."""
  env = tu.child_env(dirs["cache"], pause_from=EVERY, pause_s=1.0)
  return tu.start(tu.tiny_args(workdir, dirs["data"], *OVERRIDES), env)


def wait_for_checkpoint(proc, workdir, step: int, timeout: float = 120.0) -> None:
  deadline = time.time() + timeout
  while not checkpoint_done(workdir, step):
    if proc.poll() is not None:
      pytest.fail(f"the run ended (status {proc.returncode}) before checkpoint {step}: "
                  f"{proc.stderr.read()}")
    if time.time() > deadline:
      proc.kill()
      pytest.fail(f"no checkpoint {step} after {timeout} s")
    time.sleep(0.05)


def rerun_and_compare(dirs, workdir, reference, resumed_from: int):
  p = tu.run(tu.tiny_args(workdir, dirs["data"], *OVERRIDES), tu.child_env(dirs["cache"]))
  assert p.returncode == 0, p.stderr
  assert f"resumed from step {resumed_from}" in p.stdout
  ref_losses, ref_result = reference
  got = tu.losses(workdir)
  assert got["train_loss"] == ref_losses["train_loss"]  # every step, exactly
  assert got["eval_loss"] == ref_losses["eval_loss"]
  res = tu.result(workdir)
  assert res["status"] == "done" and res["steps"] == STEPS
  assert res["train_loss"] == ref_result["train_loss"]
  assert res["eval_loss"] == ref_result["eval_loss"]
  return p


def test_sigkill_after_first_checkpoint_then_rerun_is_exact(dirs, reference):
  workdir = str(dirs["root"] / "killed")
  proc = start_paused(dirs, workdir)
  wait_for_checkpoint(proc, workdir, EVERY)
  proc.send_signal(signal.SIGKILL)
  proc.communicate(timeout=60)
  assert proc.returncode == -signal.SIGKILL
  assert tu.result(workdir) is None
  # The killed run logged steps past its checkpoint; the rerun drops and redoes them.
  assert max(r["step"] for r in tu.rows(workdir)) >= EVERY
  done = sorted(int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit()
                and checkpoint_done(workdir, int(d)))
  assert done and done[-1] < STEPS
  rerun_and_compare(dirs, workdir, reference, resumed_from=done[-1])


def test_sigterm_saves_where_it_stopped_then_rerun_is_exact(dirs, reference):
  workdir = str(dirs["root"] / "terminated")
  proc = start_paused(dirs, workdir)
  wait_for_checkpoint(proc, workdir, EVERY)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 143, err
  m = re.search(r"stopped by SIGTERM at step (\d+); checkpoint saved", out)
  assert m, out
  stopped_at = int(m.group(1))
  assert EVERY < stopped_at < STEPS
  assert checkpoint_done(workdir, stopped_at)
  assert tu.result(workdir) is None
  assert max(r["step"] for r in tu.rows(workdir)) == stopped_at
  rerun_and_compare(dirs, workdir, reference, resumed_from=stopped_at)


def damaged_copy(dirs, name: str, damage) -> str:
  """The finished reference run, its result.json removed and `damage` done to checkpoint 24."""
  workdir = dirs["root"] / name
  shutil.copytree(dirs["root"] / "reference", workdir)
  (workdir / "result.json").unlink()
  damage(workdir / "checkpoints" / str(STEPS))
  return str(workdir)


def rerun_through_damage(dirs, workdir, reference, skipped: str):
  rows_before = len(tu.rows(workdir))
  p = rerun_and_compare(dirs, workdir, reference, resumed_from=STEPS - EVERY)
  lines = [l for l in p.stderr.splitlines() if "skipped step" in l]
  assert len(lines) == 1, p.stderr
  assert re.search(skipped, lines[0]), lines[0]
  assert lines[0].endswith(f"; restoring step {STEPS - EVERY}")
  assert len(tu.rows(workdir)) >= rows_before
  assert os.listdir(os.path.join(workdir, "checkpoints.damaged"))[0].startswith(f"{STEPS}-")


def test_empty_latest_checkpoint_folder_resumes_from_the_one_before(dirs, reference):
  def empty(step_dir):
    shutil.rmtree(step_dir)
    step_dir.mkdir()  # what a save cut off on a filesystem without atomic rename leaves

  workdir = damaged_copy(dirs, "empty-latest", empty)
  rerun_through_damage(dirs, workdir, reference, rf"skipped step {STEPS} \(no orbax metadata")


def test_flipped_bytes_in_the_latest_checkpoint_resume_from_the_one_before(dirs, reference):
  def flip(step_dir):
    data_file = max((p for p in step_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = bytearray(data_file.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 64):
      data[i] ^= 0xFF
    data_file.write_bytes(bytes(data))

  workdir = damaged_copy(dirs, "flipped-latest", flip)
  rerun_through_damage(dirs, workdir, reference,
                       rf"skipped step {STEPS} \((checksum mismatch|does not load)")
