"""sweeps/hosts/watch.py on a stand-in for the coordinator's key-value store: the processes' main
loops are threads that drift apart freely, one is signalled, all must stop at one check.
(tests/sweeps/test_multihost.py runs the real thing.)"""

import random
import threading
import time

import pytest

from chinchax.sweeps.hosts import watch
from chinchax.sweeps.train import stop as stop_lib


class FakeKV:
  """What Watch uses of jax's DistributedRuntimeClient."""

  def __init__(self):
    self.d, self.lock = {}, threading.Lock()

  def key_value_set(self, key, value, allow_overwrite=False):
    with self.lock:
      if key in self.d and not allow_overwrite:
        raise RuntimeError(f"ALREADY_EXISTS: {key}")
      self.d[key] = value

  def key_value_dir_get(self, prefix):
    with self.lock:
      return [(k, v) for k, v in self.d.items() if k.startswith(prefix)]


@pytest.fixture
def fast(monkeypatch):
  monkeypatch.setattr(watch, "POLL_S", 0.005)
  lost = []
  monkeypatch.setattr(watch, "_lost", lambda line, status: lost.append((line, status)))
  return lost


def loops(P, signal_at, seed, who):
  """P main loops over one store; the flag of each process in `who` is set when that loop
  reaches check `signal_at`. Returns each loop's (check it stopped at, reason)."""
  kv, rng = FakeKV(), random.Random(seed)
  watches = [watch.Watch(kv, p, P, heartbeat_s=60) for p in range(P)]
  flags = [stop_lib.StopFlag() for _ in range(P)]
  delays = [[rng.uniform(0, 0.004) for _ in range(400)] for _ in range(P)]
  out = [None] * P

  def main(p):
    for n in range(1, 400):
      if p in who and n == signal_at:
        flags[p].set("SIGTERM" if p == min(who) else "SIGINT")
      reason = watches[p].stop_reason(flags[p])
      if reason:
        out[p] = (n, reason, flags[p].reason)
        return
      time.sleep(delays[p][n])

  threads = [threading.Thread(target=main, args=(p,)) for p in range(P)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=30)
  for w in watches:
    w.close()
  return out


@pytest.mark.parametrize("P, who", [(2, {1}), (2, {0, 1}), (3, {2}), (4, {1, 3})])
def test_every_process_stops_at_the_same_check_with_one_reason(fast, P, who):
  for seed in range(3):
    out = loops(P, signal_at=20 + 7 * seed, seed=seed, who=who)
    assert None not in out, out
    checks = {n for n, _, _ in out}
    assert len(checks) == 1, out  # the same step everywhere
    assert checks.pop() >= 20 + 7 * seed  # not before the signal
    # One reason (the exit status) for all, one that was asked for, in the flags too.
    reasons = {(r, f) for _, r, f in out}
    assert len(reasons) == 1 and reasons.pop()[0] in ("SIGTERM", "SIGINT"), out
  assert fast == []


def test_a_process_that_stops_beating_or_failed_is_named_and_one_that_ended_well_is_not(fast):
  kv = FakeKV()
  kv.key_value_set(f"{watch.NS}/beat/1", "7")       # process 1 beat once, then nothing
  kv.key_value_set(f"{watch.NS}/beat/2", "done 0")  # process 2's command ended well
  kv.key_value_set(f"{watch.NS}/beat/3", "done 2")  # process 3's ended with a user error
  w = watch.Watch(kv, 0, 4, heartbeat_s=0.1)
  deadline = time.monotonic() + 5
  while len(set(fast)) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
  w.finish(143)
  # The exit statuses of chinchax/exit_codes.py: a lost process is 75 (restarted); a user
  # mistake on one process is one on all (2, not restarted).
  assert set(fast) == {("lost process 1 of the job: no heartbeat for 0.1 s", 75),
                       ("process 3 of the job ended with exit status 2", 2)}, fast
  assert kv.d[f"{watch.NS}/beat/0"] == "done 143"


def test_a_process_that_has_ended_reports_no_lost_process_afterwards(fast):
  """A poll in flight when the command ends must not then name a peer lost: the process would
  exit with that status instead of its own."""
  in_poll, release = threading.Event(), threading.Event()

  class SlowKV(FakeKV):
    block = False

    def key_value_dir_get(self, prefix):
      if self.block:
        in_poll.set()
        release.wait(5)
      return super().key_value_dir_get(prefix)

  kv = SlowKV()
  kv.key_value_set(f"{watch.NS}/beat/1", "7")  # process 1 beats once, then nothing
  w = watch.Watch(kv, 0, 2, heartbeat_s=0.05)
  deadline = time.monotonic() + 5
  while f"{watch.NS}/beat/0" not in kv.d and time.monotonic() < deadline:
    time.sleep(0.001)  # one poll done: process 1's beat is seen
  kv.block = True
  assert in_poll.wait(5)
  time.sleep(0.1)  # past heartbeat_s: the poll in flight would find process 1 lost
  ender = threading.Thread(target=w.finish, args=(0,))
  ender.start()
  time.sleep(0.05)
  release.set()
  ender.join(5)
  assert not ender.is_alive() and not w._thread.is_alive()  # pylint: disable=protected-access
  assert fast == []
  assert kv.d[f"{watch.NS}/beat/0"] == "done 0"


def test_one_process_reads_its_own_flag():
  flag = stop_lib.StopFlag()
  assert watch.stop_reason(flag) is None
  flag.set("SIGINT")
  assert watch.stop_reason(flag) == "SIGINT"
