"""sweeps/hosts/native.py in a process of its own: native writes land in its log, and jax's
fatal errors (the lines below are jax 0.10's own, from real runs) end it with one line and
chinchax's exit status instead of an abort's stack trace."""

import os
import subprocess
import sys

import pytest

from tests.helpers import train_util as tu

pytestmark = pytest.mark.slow

KILLED = """E1126 23:15:06.706798   18565 coordination_service_agent.cc:289] Polled an error from coordination service (this can be an error from this or another task).
F1126 23:15:06.706959   18565 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted unexpectedly or this task is experiencing network issues. Check earlier logs from 1) this task, 2) the leader (usually slice 0 task 0), and 3) cluster scheduler to debug further.
*** Check failure stack trace: ***
"""
FROZEN = """F1126 23:41:28.557095    5413 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: DEADLINE_EXCEEDED: Deadline Exceeded

RPC: /xla.coordination.CoordinationService/Heartbeat
*** Check failure stack trace: ***
"""
UNHEALTHY = """F1126 23:41:29.173549    5411 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):
1
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.
*** Check failure stack trace: ***
"""
OTHER = "F1126 00:00:00.000000 1 rendezvous.cc:1] Termination timeout for all reduce\n"

GLOO = "[Gloo] Rank 1 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1\n"
CHILD = """
import ctypes, os, sys
from chinchax.sweeps.hosts import native
path = native.aside(1, 2)
print(path, flush=True)
os.write(1, sys.argv[2].encode())
os.write(2, sys.argv[1].encode())
ctypes.CDLL(None).abort()
"""


@pytest.mark.parametrize("fatal, status, says", [
    (KILLED, 76, "lost the job's coordinator (process 0)"),
    (FROZEN, 76, "lost the job's coordinator (process 0)"),
    (UNHEALTHY, 75, "lost process 1 of the job"),
    (OTHER, -6, "jax's runtime aborted this process (exit status 134)"),
])
def test_jax_fatal_errors_are_one_line_and_chinchax_exit_status(tmp_path, fatal, status, says):
  env = {**os.environ, "PYTHONPATH": tu.ROOT, "TMPDIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-c", CHILD, fatal, GLOO], env=env, capture_output=True,
                     text=True, timeout=60)
  assert r.returncode == status, (r.returncode, r.stderr)
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"chinchax: error: process 1 of 2: {says}"), \
      r.stderr
  path = r.stdout.strip()  # stdout holds chinchax's line, not gloo's
  assert lines[0].endswith(f"is in {path}")  # kept, named, and it holds jax's own report
  with open(path) as f:
    assert f.read() == GLOO + fatal


ENDING = """
import os, sys
from chinchax.sweeps.hosts import native
print(native.aside(0, 2), flush=True)
os.write(1, sys.argv[1].encode())
native.ending(int(sys.argv[2]))
"""
# Two threads connecting at once interleave gloo's lines.
INTERLEAVED = ("[Gloo] Rank [Gloo] Rank 3 is connected to 3 peer ranks. Expected number of "
               "connected peer ranks is : 3\n2 is connected to 3 peer ranks. Expected number of "
               "connected peer ranks is : 3\n")
WARNING = "W1126 00:00:00.000000 1 cpu_client.cc:1] an XLA warning\n"


@pytest.mark.parametrize("native_lines, status, kept", [
    (GLOO + INTERLEAVED, 1, False),  # gloo's lines alone: nothing worth keeping
    (GLOO + WARNING, 0, False),      # the command succeeded
    (GLOO + WARNING, 1, True),       # it failed: kept, and a line names it
])
def test_a_native_log_is_removed_at_the_end_unless_a_failed_command_may_need_it(
    tmp_path, native_lines, status, kept):
  env = {**os.environ, "PYTHONPATH": tu.ROOT, "TMPDIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-c", ENDING, native_lines, str(status)], env=env,
                     capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  path = r.stdout.strip()
  assert os.path.exists(path) == kept
  if kept:
    assert r.stderr == (f"chinchax: process 0 of 2: what native libraries printed (XLA, gloo) "
                        f"is in {path}\n")
  else:
    assert r.stderr == ""


CLAIMED = """
import ctypes, os, sys
from chinchax.sweeps.hosts import native
native.aside(1, 2)
os.write(2, sys.argv[1].encode())  # jax's fatal report lands in the log
# watch.py's thread finds the coordinator gone first: it claims, and its line hands the log
# over (`kept`)...
assert native.claim_exit(76) is None and native.claim_exit(75) == 76
print("chinchax: error: process 1 of 2: lost the job's coordinator (process 0)" + native.kept(),
      file=sys.stderr, flush=True)
ctypes.CDLL(None).abort()  # ...and jax's abort comes before that thread's os._exit
"""


CLAIMED_BEFORE_ITS_LINE = """
import ctypes, os, sys, threading, time
from chinchax.sweeps.hosts import native
native.aside(1, 2)
os.write(2, sys.argv[1].encode())  # jax's fatal report lands in the log
def watcher():  # watch.py's thread claims the exit first, and says its line a moment later
  assert native.claim_exit(76) is None
  time.sleep(0.5)
  print("chinchax: error: process 1 of 2: lost the job's coordinator (process 0)"
        + native.kept(), file=sys.stderr, flush=True)
  os._exit(76)
threading.Thread(target=watcher).start()
time.sleep(0.1)
ctypes.CDLL(None).abort()  # jax's abort, between the watcher's claim and its line
"""


def test_an_abort_between_another_paths_claim_and_its_line_waits_for_the_line(tmp_path):
  """The multi-host test's race once in CI: process 1 ended 76 with an empty stderr, the
  abort handler having ended the process between the watcher's claim and the watcher's line."""
  env = {**os.environ, "PYTHONPATH": tu.ROOT, "TMPDIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-c", CLAIMED_BEFORE_ITS_LINE, KILLED], env=env,
                     capture_output=True, text=True, timeout=60)
  assert r.returncode == 76, (r.returncode, r.stderr)
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "chinchax: error: process 1 of 2: lost the job's coordinator (process 0); what native"), \
      r.stderr


def test_an_abort_while_another_path_ends_the_process_keeps_that_paths_line_and_status(
    tmp_path):
  """The multi-host test's race (tests/sweeps/test_multihost.py, the coordinator killed): the
  watcher's line said 76, then the abort handler, finding the log handed over, said 134 too
  and the process died of SIGABRT. The first path to claim the exit speaks; the other ends
  the process with its status, silently."""
  env = {**os.environ, "PYTHONPATH": tu.ROOT, "TMPDIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-c", CLAIMED, KILLED], env=env, capture_output=True,
                     text=True, timeout=60)
  assert r.returncode == 76, (r.returncode, r.stderr)
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      "chinchax: error: process 1 of 2: lost the job's coordinator (process 0); what native"), \
      r.stderr
