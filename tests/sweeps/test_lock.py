"""One writer per workdir: a second process is refused in one line naming the holder; a dead
holder (SIGKILL) does not hold the lock forever: on a local disk the kernel drops its flock,
on gs:// its lease runs out or its pid is seen dead on this host."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from chinchax.errors import UserError
from chinchax.sweeps import lock

from tests.helpers import sweep_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOST = socket.gethostname()


def test_a_second_holder_is_refused_in_one_line_naming_the_first(tmp_path):
  first = lock.acquire(str(tmp_path), "chinchax sweep")
  held = json.loads((tmp_path / lock.NAME).read_text())
  assert (held["pid"], held["host"], held["what"]) == (os.getpid(), HOST, "chinchax sweep")
  with pytest.raises(UserError) as e:
    lock.acquire(str(tmp_path), "chinchax train")
  assert str(e.value) == (
      f"{tmp_path} is in use by chinchax sweep (pid {os.getpid()} on {HOST}, since "
      f"{held['since']}); wait for it to end or stop it (kill {os.getpid()} on {HOST}), then "
      "rerun")
  first.release()
  assert (tmp_path / lock.NAME).read_text() == ""  # released: free, and says so
  lock.acquire(str(tmp_path), "chinchax train").release()


def test_a_refused_run_leaves_no_folder_behind(tmp_path):
  wd = tmp_path / "new"
  with pytest.raises(UserError):
    with lock.hold(str(wd), "chinchax sweep"):
      raise UserError("bad config")
  assert not wd.exists()
  with lock.hold(str(wd), "chinchax sweep"):
    (wd / "sweep.json").write_text("{}")
  assert sorted(os.listdir(wd)) == [lock.NAME, "sweep.json"]


HOLDER = r"""
import sys, time
from chinchax.sweeps import lock
held = lock.acquire(sys.argv[1], "chinchax sweep")
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_holder_killed_with_sigkill_does_not_hold_the_lock(tmp_path, caplog):
  proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], cwd=ROOT, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE)
  try:
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(UserError, match=f"in use by chinchax sweep \\(pid {proc.pid} on"):
      lock.acquire(str(tmp_path), "chinchax sweep")
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
  taken = lock.acquire(str(tmp_path), "chinchax sweep")  # the kernel dropped the dead one's flock
  assert json.loads((tmp_path / lock.NAME).read_text())["pid"] == os.getpid()
  assert f"its holder chinchax sweep (pid {proc.pid} on {HOST}" in caplog.text
  assert "ended without releasing it; taking over" in caplog.text
  taken.release()


# --------------------------------------------------------------------------- gs:// lease

URL = "gs://bkt/sweep"


def _holder(**fields):
  return {"what": "chinchax sweep", "pid": 4242, "host": "tpu-vm-7", "since": "then",
          "renewed": time.time(), "token": "theirs", **fields}


@pytest.fixture
def lease(fake_gcs, monkeypatch):  # noqa: F811
  monkeypatch.setattr(lock, "SETTLE_S", 0.0)
  return fake_gcs.local(f"{URL}/{lock.NAME}")


def test_gs_a_live_lease_is_refused_naming_its_holder(lease):
  lease.parent.mkdir(parents=True)
  lease.write_text(json.dumps(_holder()))
  with pytest.raises(UserError) as e:
    lock.acquire(URL, "chinchax sweep")
  assert str(e.value) == (
      f"{URL} is in use by chinchax sweep (pid 4242 on tpu-vm-7, since then); wait for it to "
      "end or stop it (kill 4242 on tpu-vm-7), then rerun; a holder that stops renewing "
      f"{lock.NAME} is ignored after {lock.LEASE_S:.0f} s")


@pytest.mark.parametrize("holder, why", [
    (_holder(renewed=time.time() - lock.LEASE_S - 5), "not renewed for"),
    (_holder(host=HOST, pid=2**22 + 12345), "its process is not running"),
])
def test_gs_a_stale_lease_is_taken_over(lease, caplog, holder, why):
  lease.parent.mkdir(parents=True)
  lease.write_text(json.dumps(holder))
  taken = lock.acquire(URL, "chinchax sweep")
  assert json.loads(lease.read_text())["pid"] == os.getpid()
  assert f"its holder chinchax sweep (pid {holder['pid']}" in caplog.text and why in caplog.text
  taken.release()
  assert lease.read_text() == ""


def test_gs_of_two_takers_at_once_the_one_overwritten_backs_off(lease, monkeypatch):
  def other_writes_meanwhile(seconds):
    del seconds
    lease.write_text(json.dumps(_holder(host=HOST, pid=os.getppid(), token="other")))

  monkeypatch.setattr(lock, "_wait", other_writes_meanwhile)
  with pytest.raises(UserError, match=f"pid {os.getppid()} on {HOST}"):
    lock.acquire(URL, "chinchax sweep")


def test_gs_the_lease_is_renewed_while_held(lease, monkeypatch):
  monkeypatch.setattr(lock, "RENEW_S", 0.05)
  held = lock.acquire(URL, "chinchax sweep")
  first = json.loads(lease.read_text())["renewed"]
  deadline = time.time() + 10
  while json.loads(lease.read_text() or "{}").get("renewed", first) == first:
    assert time.time() < deadline, "never renewed"
    time.sleep(0.02)
  held.release()
  assert lease.read_text() == ""


# --------------------------------------------------------------------------- two sweeps


@pytest.mark.slow
def test_a_second_sweep_on_the_same_workdir_is_refused_and_runs_jsonl_stays_whole(tmp_path):
  wd = tmp_path / "sweep"
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  cmd = [sys.executable, "-m", "chinchax.cli", "sweep", *sweep_helper.argv(str(wd))]
  first = subprocess.Popen(cmd, env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
  deadline = time.time() + 300
  while not ((wd / lock.NAME).exists() and (wd / lock.NAME).read_text()):
    assert first.poll() is None and time.time() < deadline, first.stderr.read()
    time.sleep(0.05)
  second = subprocess.run(cmd, env=env, cwd=ROOT, text=True, capture_output=True, timeout=300)
  _, err = first.communicate(timeout=600)
  assert second.returncode == 2
  assert second.stderr.splitlines() == [
      f"chinchax sweep: error: {wd} is in use by chinchax sweep (pid {first.pid} on {HOST}, "
      f"since {second.stderr.split('since ')[1].split(')')[0]}); wait for it to end or stop it "
      f"(kill {first.pid} on {HOST}), then rerun"]
  assert first.returncode == 1, err[-2000:]  # trained both cells; two are too few to fit
  lines = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  assert sorted(l["name"] for l in lines) == sorted(sweep_helper.results(str(wd)))
  assert len(lines) == 2 and all(l["status"] == "done" for l in lines)


def test_a_process_is_alive_until_it_has_ended_and_been_reaped():
  """`pids.alive`, which the stale-holder check above and the figure workers' watch share:
  the pid of a reaped child is gone, a running one's (and our own) is not."""
  from chinchax import pids  # pylint: disable=g-import-not-at-top
  child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
  try:
    assert pids.alive(os.getpid()) and pids.alive(child.pid)
  finally:
    child.kill()
    child.wait()
  assert not pids.alive(child.pid)
