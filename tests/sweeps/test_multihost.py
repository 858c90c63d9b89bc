"""Real multi-host jobs on this machine: 2 processes x 2 CPU devices joined by jax.distributed
(tests/helpers/multiproc.py), running `chinchax train` with the state sharded over all 4
devices (fsdp=4: every parameter split across both processes).

One uninterrupted 2-process run is the reference (module fixture); against it: a 1-process x
4-device run (same eval loss), a run stopped by SIGTERM on one process then resumed past a
damaged checkpoint (the same losses to the bit), a run whose process 1 is killed -9 (process 0
fails in seconds, naming it), a run whose process 0 is frozen by SIGSTOP (the watchdog ends
process 1 within its deadline, process 0 once thawed; the rerun is the reference to the bit),
processes that disagree on the config (one
line each), and a second job on a busy workdir (refused on each of its processes). Then a
2-process sweep of two cells: stopped by SIGINT on every process, rerun, its done cell not trained again
and its shared files written once; and one whose process 0 is killed -9 mid-sweep (process 1
says so in one line of its own, not jax's abort, and exits with a restarted status).
"""

import json
import os
import shutil
import signal
import tempfile

import pytest

from chinchax import exit_codes
from tests.helpers import multiproc as mp
from tests.helpers import sweep_helper
from tests.helpers import train_util as tu

pytestmark = pytest.mark.slow

FSDP = ("--config.mesh.data=1", "--config.mesh.fsdp=4")
OVERRIDES = ("--config.log_every=1", "--config.checkpoint.every_steps=8",
             "--config.checkpoint.every_minutes=0", *FSDP)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
  """The corpus and the XLA cache every job of this module shares."""
  return tmp_path_factory.mktemp("multihost")


def train_args(shared, workdir, *more):
  return ["train", *tu.tiny_args(str(workdir), str(shared / "data"), *OVERRIDES, *more)]


def env(shared, **kw):
  return mp.env(str(shared / "xla-cache"), **kw)


def run_job(shared, tmp, args, deadline_s=150, **env_kw) -> list[mp.Result]:
  with mp.Job(args, tmp=tmp, base_env=env(shared, **env_kw), deadline_s=deadline_s) as job:
    return job.wait()


def stopped_step(text: str) -> int:
  line = next(l for l in text.splitlines() if l.startswith("stopped by"))
  return int(line.split(" at step ")[1].split(";")[0])


@pytest.fixture(scope="module")
def reference(shared):
  """An uninterrupted 2-process run: its workdir."""
  wd = shared / "reference"
  results = run_job(shared, shared / "reference-logs", train_args(shared, wd))
  assert [r.rc for r in results] == [0, 0], "\n".join(r.out + r.err for r in results)
  return wd


def test_two_processes_are_one_job_with_the_losses_of_one_process(shared, reference, tmp_path):
  record = tu.result(reference)
  # Joined: one job of 4 devices, not two jobs of 2 (today's `train` ran each alone).
  assert record["hardware"]["process_count"] == 2
  assert record["hardware"]["device_count"] == 4
  # Written once: process 0 alone writes the metrics and TensorBoard.
  steps = [r["step"] for r in tu.rows(reference) if "train_loss" in r]
  assert steps == list(range(1, 25)), steps
  events = [f for _, _, fs in os.walk(reference / "tensorboard") for f in fs]
  assert len(events) == 1, events
  # The same config, batch and seed on 1 process x 4 devices.
  one = tmp_path / "one"
  r = tu.run(tu.tiny_args(str(one), str(shared / "data"), *OVERRIDES),
             tu.child_env(str(shared / "xla-cache"), devices=4), timeout=150)
  assert r.returncode == 0, r.stderr
  two_loss, one_loss = record["eval_loss"], tu.result(one)["eval_loss"]
  rel = abs(two_loss - one_loss) / one_loss
  print(f"eval loss: 2 processes x 2 devices {two_loss!r}, 1 process x 4 devices "
        f"{one_loss!r}, relative difference {rel:.2e}")
  assert rel <= 1e-4


def test_each_process_loads_its_own_rows_of_every_batch(shared, tmp_path):
  script = os.path.join(tu.ROOT, "tests", "helpers", "multihost_rows.py")
  with mp.Job([], tmp=tmp_path, base_env=env(shared), deadline_s=90, script=script) as job:
    results = job.wait()
  assert [r.rc for r in results] == [0, 0], job.report()
  said = [json.loads(r.out.strip().splitlines()[-1]) for r in results]
  for mesh in ("data", "fsdp"):  # the batch split 4 ways over the devices of both processes
    rows = [set(s["rows"][mesh]) for s in said]
    assert not rows[0] & rows[1], (mesh, rows)           # no row fed twice
    assert rows[0] | rows[1] == set(range(8)), (mesh, rows)  # none skipped
    assert all(s["equal"][mesh] for s in said), said    # each in its place


def test_sigterm_to_one_process_stops_every_process_at_one_step_and_resumes_exactly(
    shared, reference, tmp_path):
  wd = tmp_path / "w"
  args = train_args(shared, wd)
  with mp.Job(args, tmp=tmp_path / "a", base_env=env(shared, pause_from=10, pause_s=1.0),
              deadline_s=150) as job:
    job.wait_for(lambda: job.saw("step 10/"), timeout=120)
    # A second job on the busy workdir is refused on each of its processes, in one line.
    second = run_job(shared, tmp_path / "b", args, deadline_s=60)
    for r in second:
      assert r.rc == 2 and "is in use by chinchax train" in r.err, (r.rank, r.err)
      assert len(r.err.strip().splitlines()) == 1, r.err
    t = job.signal(signal.SIGTERM, ranks=[1])  # a maintenance event on one host
    results = job.wait(timeout=60)
  waited = [r.wall_s - (t - job.t0) for r in results]
  print(f"SIGTERM to process 1: processes exited {waited[0]:.1f} s and {waited[1]:.1f} s later")
  assert [r.rc for r in results] == [143, 143], job.report()
  steps = {stopped_step(r.out) for r in results}
  assert len(steps) == 1, job.report()
  k = steps.pop()
  ck = wd / "checkpoints"
  saved = sorted(int(d) for d in os.listdir(ck) if d.isdigit())
  assert saved[-1] == k and len(saved) == 2, saved
  # Damage the stopped step: the previous step's arrays in its place load fine, only the
  # checksum (taken on every process's shards) tells them apart; the rerun must set it aside
  # and resume from the previous one.
  shutil.rmtree(ck / str(k) / "default")
  shutil.copytree(ck / str(saved[0]) / "default", ck / str(k) / "default")
  with mp.Job(args, tmp=tmp_path / "c", base_env=env(shared), deadline_s=150) as job:
    results = job.wait()
  assert [r.rc for r in results] == [0, 0], job.report()
  for r in results:
    assert f"resumed from step {saved[0]}" in r.out, r.out
  assert f"skipped step {k} (checksum mismatch" in results[0].err, results[0].err
  assert tu.losses(wd) == tu.losses(reference)  # the uninterrupted trajectory, to the bit
  assert tu.result(wd)["eval_loss"] == tu.result(reference)["eval_loss"]


def test_a_killed_process_fails_the_others_in_seconds_naming_it(shared, tmp_path):
  wd = tmp_path / "w"
  args = train_args(shared, wd)
  heartbeat = 3
  with mp.Job(args, tmp=tmp_path / "a", deadline_s=150,
              base_env={**env(shared, pause_from=10, pause_s=0.3),
                        "CHINCHAX_HEARTBEAT_S": str(heartbeat)}) as job:
    # Killed once step 8's checkpoint is committed (its save is asynchronous: under load it can
    # finish after step 10), so the rerun has it to resume from.
    committed = wd / "checkpoints" / "8" / "_CHECKPOINT_METADATA"
    job.wait_for(lambda: job.saw("step 10/") and os.path.exists(committed), timeout=120)
    t = job.signal(signal.SIGKILL, ranks=[1])
    results = job.wait(timeout=60)
  lost_after = results[0].wall_s - (t - job.t0)
  print(f"kill -9 of process 1: process 0 exited {lost_after:.1f} s later "
        f"(heartbeat {heartbeat} s)")
  assert results[0].rc == 75, job.report()  # exit_codes.LOST: the launchers restart it
  lines = [l for l in results[0].err.splitlines() if "lost process" in l]
  assert len(lines) == 1 and "lost process 1 of the job" in lines[0], results[0].err
  assert lost_after < heartbeat + 10
  # What a rerun resumes from (the rerun itself: the SIGTERM test above) is still there.
  assert os.path.exists(committed)


def test_a_frozen_coordinator_ends_every_process_by_the_watchdog_and_the_rerun_resumes_exactly(
    shared, reference, tmp_path):
  wd = tmp_path / "w"
  args = train_args(shared, wd)
  # The watchdog's deadline is 10 x the slowest step, the compile's at first: over 100 s on a
  # loaded host, past jax's own heartbeat timeout (3 x CHINCHAX_HEARTBEAT_S), which would
  # find the frozen coordinator first (exit 76); a long heartbeat leaves it to the watchdog.
  with mp.Job(args, tmp=tmp_path / "a", deadline_s=240,
              base_env={**env(shared, pause_from=10, pause_s=0.3),
                        "CHINCHAX_WATCHDOG_S": "8", "CHINCHAX_HEARTBEAT_S": "60"}) as job:
    committed = wd / "checkpoints" / "8" / "_CHECKPOINT_METADATA"
    job.wait_for(lambda: job.saw("step 11/") and os.path.exists(committed), timeout=120)
    t = job.signal(signal.SIGSTOP, ranks=[0])  # process 0 frozen mid-step: a paused VM
    job.wait_for(lambda: 1 in job.ended, timeout=170)
    job.signal(signal.SIGCONT, ranks=[0])  # thawed, it finds its deadline long past
    results = job.wait(timeout=60 + 40)
  lines = [r.err.strip().splitlines() for r in results]
  assert [len(l) for l in lines] == [1, 1], job.report()
  # Process 1 ran on, waiting in a collective: its own watchdog ended it, within the deadline,
  # with exit_codes.STUCK (restarted).
  assert results[1].rc == 77, job.report()
  assert "process 1 of 2: train step " in lines[1][0], lines
  deadline = float(lines[1][0].split("deadline is ")[1].split(" s")[0])
  assert results[1].wall_s - (t - job.t0) <= deadline + 5, (results[1].wall_s, t, deadline)
  # Process 0, thawed, ends by its watchdog, or on learning process 1's end: a peer's failed
  # end is acted on once it is CHINCHAX_HEARTBEAT_S (60 s here) old (sweeps/hosts/watch.py).
  assert results[0].rc in (75, 77), job.report()
  assert results[0].wall_s - results[1].wall_s < 60 + 30, job.report()
  # Each process's native log (gloo's lines, XLA's): removed, or kept and named in its line.
  for r, q in zip(results, job.procs):
    log = os.path.join(tempfile.gettempdir(), f"chinchax-native-{r.rank}-{q.pid}.log")
    assert os.path.exists(log) == (log in r.err), (log, r.err)
  with mp.Job(args, tmp=tmp_path / "b", base_env=env(shared), deadline_s=150) as job:
    results = job.wait()
  assert [r.rc for r in results] == [0, 0], job.report()
  assert tu.losses(wd) == tu.losses(reference)  # the uninterrupted trajectory, to the bit


def test_processes_that_disagree_on_the_config_each_say_so_in_one_line(shared, tmp_path):
  wd = tmp_path / "w"
  results = run_job(shared, tmp_path / "a", lambda rank: train_args(
      shared, wd, f"--config.seed={rank}"), deadline_s=60)
  for r in results:
    assert r.rc == 2, (r.rank, r.err)
    assert r.err.strip().splitlines() == [
        "chinchax train: error: the processes of this job disagree on the config: process 1 "
        "has another than process 0's; start every process with the same command line (and "
        "config file)"], r.err
  assert not os.path.exists(wd / "checkpoints")


def test_a_sweep_stopped_on_every_process_reruns_without_training_a_done_cell_again(
    shared, tmp_path):
  wd = tmp_path / "sweep"
  args = ["sweep", *sweep_helper.argv(str(wd)), "--config.recipe.batch_multiple=4",
          f"--config.train.data.corpus={tu.SMALL_CORPUS}",
          f"--config.train.data.data_dir={shared / 'data'}", "--verbose"]
  with mp.Job(args, tmp=tmp_path / "a", base_env=env(shared, pause_from=3, pause_s=0.5),
              deadline_s=150) as job:
    job.wait_for(lambda: ": done, eval loss" in job.text(0, "out"), timeout=120)
    job.signal(signal.SIGINT)  # Ctrl-C on the launcher: every process
    results = job.wait(timeout=60)
  assert [r.rc for r in results] == [130, 130], job.report()
  first, _ = sorted(sweep_helper.results(wd))[:1] + [None]
  done = {name: (wd / name / "metrics.jsonl").read_bytes()
          for name, r in sweep_helper.results(wd).items() if r["status"] == "done"}
  assert list(done) == [first], done
  with mp.Job(args, tmp=tmp_path / "b", base_env=env(shared), deadline_s=150) as job:
    results = job.wait()
  assert all(r.rc in (0, 1) for r in results), job.report()  # 1: two cells are too few to fit
  assert f"{first}: skipped, already done" in results[0].out
  assert (wd / first / "metrics.jsonl").read_bytes() == done[first]  # not trained again
  # Written once, by process 0: a line per cell in runs.jsonl, one report.
  lines = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines() if l.strip()]
  assert sorted(l["name"] for l in lines) == sorted(sweep_helper.results(wd)), lines
  assert len(lines) == 2 and (wd / "report.md").exists()
  assert "wrote" not in results[1].out  # process 1 writes no shared file
  # gloo's "[Gloo] Rank 0 is connected to ..." lines go to a log file, not to stdout.
  assert not [r.rank for r in results if "[Gloo]" in r.out + r.err], job.report()


def sweep_args(shared, wd):
  return ["sweep", *sweep_helper.argv(str(wd)), "--config.recipe.batch_multiple=4",
          f"--config.train.data.corpus={tu.SMALL_CORPUS}",
          f"--config.train.data.data_dir={shared / 'data'}", "--verbose"]


def test_a_coordinator_killed_mid_sweep_is_one_line_and_a_restarted_status(shared, tmp_path):
  with mp.Job(sweep_args(shared, tmp_path / "sweep"), tmp=tmp_path / "a", deadline_s=150,
              base_env=env(shared, pause_from=3, pause_s=0.5)) as job:
    job.wait_for(lambda: ": done, eval loss" in job.text(0, "out"), timeout=120)
    t = job.signal(signal.SIGKILL, ranks=[0])  # the coordinator's VM gone, mid-sweep
    results = job.wait(timeout=60)
  after = results[1].wall_s - (t - job.t0)
  print(f"kill -9 of process 0: process 1 exited {after:.1f} s later")
  # jax's client sees the coordination service gone first and aborts (exit 134, a fatal log
  # line and a C++ stack trace on stderr); chinchax turns that into its own line.
  assert results[1].rc == exit_codes.COORDINATOR, job.report()
  assert exit_codes.restart(results[1].rc)
  lines = results[1].err.strip().splitlines()
  assert len(lines) == 1, results[1].err
  assert lines[0].startswith("chinchax: error: process 1 of 2: lost the job's coordinator "
                             "(process 0)"), lines
  assert "stack trace" not in results[1].err + results[1].out
  assert after < 10
  # Whichever saw the coordinator gone first: jax's client (its abort, read by chinchax, whose
  # line names the log that keeps jax's report), or chinchax's own watch thread (its next
  # heartbeat fails; the log is named only if it holds more than gloo's routine lines).
  # When both see it at once, the first to end the process says the line, and the log may
  # already have been judged by the other.
  if " is in " in lines[0]:
    log = lines[0].split(" is in ")[1]
    with open(log) as f:
      said = f.read()
    if "jax's client can no longer reach it" in lines[0]:
      assert "Terminating process because the JAX distributed service" in said
    os.remove(log)
