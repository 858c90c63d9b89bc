"""The packed executor splits a WSD job: its stable run is one piece, then each cooldown branch
is a piece any device group may take. Stand-in runs check the order, the hand-over of the
outcome, a stop and a failure; a real tiny WSD run split over two groups gives the losses the
same run gives in one piece."""

import os
import threading
import time

import jax
import pytest

from chinchax.scaling.runs import records
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps import executors, job as job_lib, wsd
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.job import Job
from chinchax.sweeps.train import loop

SHAPE = Shape(d_model=16, n_layers=1, n_heads=2, d_ff=32, vocab_size=258, seq_len=64)


def _wsd_job(name: str, steps: tuple[int, ...], root) -> Job:
  c = train_config.get_config("tiny")
  T = c.batch_size * c.seq_len
  c.name = name
  c.optimizer.warmup_steps = 1
  c.wsd.branches = tuple(float(s * T) for s in steps)
  return Job(name, c, str(root / name), SHAPE, max(steps) * T, None)


class FakeRuns:
  """loop.train replaced: each run sleeps `seconds_per_step` per step it trains and records
  when it ran, on which group, and as what; `fail` names runs that raise, `stop_at` one that
  returns stopped."""

  def __init__(self, seconds_per_step=2e-4, fail=(), stop_at=None):
    self.seconds_per_step, self.fail, self.stop_at = seconds_per_step, fail, stop_at
    self.runs, self.lock = [], threading.Lock()

  def __call__(self, c, workdir, *, stop=None, quiet=False, devices=None, checkpoint_lock=None,
               progress=None, opened=None):
    del stop, quiet, checkpoint_lock, progress, opened
    start = time.monotonic()
    steps = round(c.tokens / (c.batch_size * c.seq_len))
    if c.init_from:  # a branch: only its decay trains, from .../branch_points/step_<s>
      steps -= int(c.init_from.rsplit("_", 1)[1])
    time.sleep(steps * self.seconds_per_step)
    with self.lock:
      self.runs.append((c.name, (threading.current_thread().name, tuple(devices)), start,
                        time.monotonic()))
    if c.name in self.fail:
      raise RuntimeError(f"{c.name} ran out of memory")
    if c.name == self.stop_at:
      return {"name": c.name, "status": "stopped", "reason": "SIGTERM"}
    return {"name": c.name, "status": "done", "eval_loss": 1.0, "D": c.tokens}


def _branch(job: Job, steps: int) -> str:
  """The name of `job`'s branch at `steps` steps (wsd.branch_name)."""
  D = steps * job.config.batch_size * job.config.seq_len
  return job.name + f"-D{D:.3g}".replace("+", "")


def _run(jobs, fake, monkeypatch, groups=(("d0",), ("d1",))):
  monkeypatch.setattr(loop, "train", fake)
  seen = []
  finished = executors.run_packed(jobs, lambda job, o: seen.append((job.name, o)),
                                  groups=list(groups), stop=None, split=True)
  return finished, seen


def test_the_branches_of_the_last_job_train_on_both_groups(tmp_path, monkeypatch):
  """A long WSD job and a short one on two groups: the short job's worker, once idle, takes
  branches of the long one. Each job is handed over once, its branch records in D order, and
  no branch starts before its stable run has ended."""
  long = _wsd_job("long", (400, 800, 1200, 1600), tmp_path)
  short = _wsd_job("short", (200, 300), tmp_path)
  fake = FakeRuns()
  finished, seen = _run([short, long], fake, monkeypatch)
  assert finished
  assert sorted(name for name, _ in seen) == ["long", "short"]
  outcomes = dict(seen)
  assert [r["name"] for r in outcomes["long"].records] == [
      _branch(long, s) for s in (400, 800, 1200, 1600)]
  assert [r["name"] for r in outcomes["short"].records] == [_branch(short, s) for s in (200, 300)]
  assert all(o.status == "done" for o in outcomes.values())
  ran = {name: (where, t0, t1) for name, where, t0, t1 in fake.runs}
  (main_worker, home), _, main_end = ran["long"]  # the stable run
  long_branches = [v for k, v in ran.items() if k.startswith("long-D")]
  assert len(long_branches) == 4 and all(t0 >= main_end for _, t0, _ in long_branches)
  # Both workers train them, each on the stable run's group (its programs are compiled).
  assert {worker for (worker, _), _, _ in long_branches} == {
      "chinchax-cell_0", "chinchax-cell_1"}
  assert {devices for (_, devices), _, _ in long_branches} == {home}


def test_one_group_trains_each_job_whole_in_the_given_order(tmp_path, monkeypatch):
  a, b = _wsd_job("a", (200, 300), tmp_path), _wsd_job("b", (200,), tmp_path)
  fake = FakeRuns()
  finished, seen = _run([a, b], fake, monkeypatch, groups=(("d0",),))
  assert finished and [name for name, _ in seen] == ["a", "b"]
  assert [name for name, *_ in fake.runs] == ["a", _branch(a, 200), _branch(a, 300), "b",
                                              _branch(b, 200)]


class _Chip:
  def __init__(self, platform: str, i: int):
    self.platform, self.i = platform, i

  def __repr__(self):
    return f"{self.platform}{self.i}"


@pytest.mark.parametrize("platform, split", [("gpu", False), ("tpu", False), ("cpu", True)])
def test_jobs_split_by_default_only_on_cpu_devices(tmp_path, monkeypatch, platform, split):
  """On accelerators a moved branch would compile again for its new chips: each job stays
  with the worker of its stable run. CPU devices share one thread pool: split."""
  long = _wsd_job("long", (400, 800, 1200, 1600), tmp_path)
  fake = FakeRuns()
  monkeypatch.setattr(loop, "train", fake)
  seen = []
  assert executors.run_packed([long, _wsd_job("short", (200,), tmp_path)],
                              lambda job, o: seen.append(job.name),
                              groups=[[_Chip(platform, 0)], [_Chip(platform, 1)]], stop=None)
  assert sorted(seen) == ["long", "short"]
  workers = {worker for name, (worker, _), *_ in fake.runs if name.startswith("long")}
  assert (len(workers) == 2) == split


def test_a_stopped_branch_ends_the_run_and_hands_over_no_job_it_cut(tmp_path, monkeypatch):
  """The longest branch (taken first) stops while branches are left to take: none starts
  after it, and the job it belongs to is not handed over."""
  long = _wsd_job("long", (400, 800, 1200, 1600, 2000, 3000), tmp_path)
  cut = _branch(long, 3000)
  fake = FakeRuns(seconds_per_step=1e-3, stop_at=cut)
  finished, seen = _run([long, _wsd_job("short", (200,), tmp_path)], fake, monkeypatch)
  assert not finished
  assert [name for name, _ in seen] == ["short"]  # `long` is left to the rerun
  stopped_at = next(t1 for name, _, _, t1 in fake.runs if name == cut)
  assert all(t0 < stopped_at for _, _, t0, _ in fake.runs)  # nothing started after the stop


def test_a_branch_that_raises_fails_its_job_with_the_others_records(tmp_path, monkeypatch):
  long = _wsd_job("long", (400, 800, 1200), tmp_path)
  bad = _branch(long, 800)
  fake = FakeRuns(fail=(bad,))
  finished, seen = _run([long, _wsd_job("short", (200,), tmp_path)], fake, monkeypatch)
  assert finished  # a failed job is an outcome, not a stop
  outcomes = dict(seen)
  assert outcomes["short"].status == "done"
  failed = outcomes["long"]
  assert failed.status == "failed" and failed.reason == f"RuntimeError: {bad} ran out of memory"
  assert [r["status"] for r in failed.records] == ["done", "failed", "done"]
  # The failure is the branch's: its name, D and folder; the stable run's folder keeps none.
  bad_record = failed.records[1]
  assert (bad_record["name"], bad_record["D"]) == (bad, 800.0 * long.config.batch_size
                                                  * long.config.seq_len)
  assert records.read_result(str(tmp_path / "long" / bad))["status"] == "failed"
  assert records.read_result(str(tmp_path / "long")) is None


def test_in_one_piece_a_branch_that_raises_is_its_own_failed_record(tmp_path, monkeypatch):
  """`job.run` (the local executor, one device group) trains a WSD job's parts in turn: a
  raising branch is that branch's failed record in its own folder, the stable run's folder
  keeps none, and the branch after it still trains."""
  job = _wsd_job("long", (400, 800, 1200), tmp_path)
  bad = _branch(job, 800)
  fake = FakeRuns(fail=(bad,))
  monkeypatch.setattr(loop, "train", fake)
  outcome = job_lib.run(job, devices=("d0",))
  assert [name for name, *_ in fake.runs] == ["long", _branch(job, 400), bad, _branch(job, 1200)]
  assert outcome.status == "failed" and outcome.reason == f"RuntimeError: {bad} ran out of memory"
  assert [r["status"] for r in outcome.records] == ["done", "failed", "done"]
  assert outcome.records[1]["name"] == bad
  assert records.read_result(str(tmp_path / "long" / bad))["status"] == "failed"
  assert records.read_result(str(tmp_path / "long")) is None


def test_in_one_piece_a_stopped_branch_ends_the_job(tmp_path, monkeypatch):
  job = _wsd_job("long", (400, 800, 1200), tmp_path)
  fake = FakeRuns(stop_at=_branch(job, 800))
  monkeypatch.setattr(loop, "train", fake)
  outcome = job_lib.run(job, devices=("d0",))
  assert outcome.status == "stopped" and outcome.records == ()
  assert [name for name, *_ in fake.runs] == ["long", _branch(job, 400), _branch(job, 800)]


@pytest.mark.slow
def test_a_wsd_run_split_over_two_groups_gives_the_losses_of_one_piece(tmp_path, tiny_config):
  """Real training: the tiny preset as a WSD run with three branches, once as one piece
  (`wsd.train_wsd`) and once split by the packed executor over two groups (this process's
  first device twice: the groups' threads share it): the same branch losses, bit for bit."""
  c = tiny_config
  T = c.batch_size * c.seq_len
  c.name = "w"
  c.wsd.branches = (12.0 * T, 16.0 * T, 24.0 * T)
  c.checkpoint.every_steps = 1000
  whole = wsd.train_wsd(c, str(tmp_path / "whole"), quiet=True)
  assert whole.status == "done"
  dev = jax.devices()[0]
  seen = []
  job = Job("w", c, str(tmp_path / "split"), SHAPE, 24.0 * T, None)
  assert executors.run_packed([job], lambda j, o: seen.append(o), groups=[[dev], [dev]],
                              stop=None)
  (outcome,) = seen
  assert outcome.status == "done"
  assert [r["eval_loss"] for r in outcome.records] == [r["eval_loss"] for r in whole.branches]
  assert [r["name"] for r in outcome.records] == [r["name"] for r in whole.branches]
  for r in outcome.records:  # each branch's result.json as the sweep's runs.jsonl reads it
    on_disk = records.read_result(os.path.join(str(tmp_path / "split"), r["name"]))
    assert on_disk["eval_loss"] == r["eval_loss"] and on_disk["branch_of"] == "w"
