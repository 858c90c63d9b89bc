"""A multi-host job started wrongly, as real processes (tests/helpers/multiproc.py): each
mistake is one line on every process within seconds (sweeps/hosts/rollcall.py), with the
exit status of chinchax/exit_codes.py, where jax alone waited 300 s and aborted with a stack
trace naming nothing (or segfaulted, or saw nothing wrong at all)."""

import signal
import socket

import pytest

from tests.helpers import multiproc as mp
from tests.helpers import train_util as tu

pytestmark = pytest.mark.slow

JOIN_S = 5  # CHINCHAX_JOIN_TIMEOUT_S


def start_wrongly(tmp_path, processes: int, overrides, port: int = 0) -> list[mp.Result]:
  args = ["train", *tu.tiny_args(str(tmp_path / "wd"), str(tmp_path / "data"))]
  base = {**mp.env(str(tmp_path / "xla-cache")), "CHINCHAX_JOIN_TIMEOUT_S": str(JOIN_S)}
  with mp.Job(args, tmp=tmp_path / "logs", processes=processes, base_env=base, deadline_s=60,
              overrides=overrides, port=port) as job:
    results = job.wait()
  for r in results:  # one line, no stack trace, within 30 s
    assert len(r.err.strip().splitlines()) == 1, job.report()
    assert r.wall_s < 30, job.report()
  assert not (tmp_path / "wd" / "checkpoints").exists()  # nothing trained
  return results


def test_a_process_missing_is_named_after_the_join_timeout(tmp_path):
  (r,) = start_wrongly(tmp_path, 1, lambda rank: {"JAX_NUM_PROCESSES": "2"})
  assert r.rc == 78, r.err  # exit_codes.JOIN: restarted
  assert r.err.startswith("chinchax train: error: process 0 of 2: process 1 did not join at "
                          f"127.0.0.1:"), r.err
  assert f"within {JOIN_S} s (CHINCHAX_JOIN_TIMEOUT_S)" in r.err
  assert r.out.startswith("process 0 of 2: waiting at 127.0.0.1:"), r.out


def test_two_processes_with_one_id_are_refused_on_every_process(tmp_path):
  results = start_wrongly(tmp_path, 3, lambda rank: {"JAX_PROCESS_ID": str(min(rank, 1))})
  for r in results:
    assert r.rc == 2 and r.err.strip() == (
        "chinchax train: error: two processes were started as process 1 (JAX_PROCESS_ID=1); "
        "each process needs its own, 0 to 2"), r.err


def test_processes_told_different_counts_are_refused_on_every_process(tmp_path):
  # Process 0 told 2, process 1 told 3: the order jax did not notice at all.
  results = start_wrongly(tmp_path, 2, lambda rank: {"JAX_NUM_PROCESSES": str(2 + rank)})
  for r in results:
    assert r.rc == 2 and r.err.strip() == (
        "chinchax train: error: the processes of this job disagree on their count: process 0 "
        "was told JAX_NUM_PROCESSES=2, process 1 3; start every process with the same "
        "JAX_NUM_PROCESSES"), r.err


def test_a_coordinator_port_in_use_is_refused_by_process_0_before_jax_starts(tmp_path):
  with socket.create_server(("", 0)) as busy:  # listens, never answers
    port = busy.getsockname()[1]
    p0, p1 = start_wrongly(tmp_path, 2, None, port=port)
  assert p0.rc == 2, p0.err
  assert p0.err.startswith(f"chinchax train: error: the coordinator's port {port} "
                           f"(127.0.0.1:{port}) is in use (Address already in use)"), p0.err
  assert p1.rc == 78 and "no process 0 of this job answered" in p1.err, p1.err


def test_sigterm_while_waiting_to_join_is_one_line_and_a_restartable_status(tmp_path):
  args = ["train", *tu.tiny_args(str(tmp_path / "wd"), str(tmp_path / "data"))]
  with mp.Job(args, tmp=tmp_path / "logs", processes=1, base_env=mp.env(str(tmp_path / "x")),
              deadline_s=60, overrides=lambda rank: {"JAX_NUM_PROCESSES": "2"}) as job:
    job.wait_for(lambda: job.saw("waiting at"), timeout=50)  # for process 1, in vain
    t = job.signal(signal.SIGTERM)
    (r,) = job.wait(timeout=20)
  assert r.rc == 143, job.report()  # exit_codes.SIGTERM: the JobSet restarts it
  assert r.err.strip().splitlines() == [
      "chinchax train: stopped by SIGTERM outside a run (starting, joining the job or ending); "
      "nothing is lost: rerun the same command"], r.err
  assert r.wall_s - (t - job.t0) < 5
