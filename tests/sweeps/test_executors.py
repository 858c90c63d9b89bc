"""Real training of a two-cell grid: a `local` sweep killed after its first cell resumes
without retraining it; `packed` (8 fake CPU devices) and `ray` give the same eval losses; a
stop flag ends a `ray` sweep; on a Ray cluster of two nodes, a cell whose node is lost is rerun on
the other. The executors' bookkeeping on stand-in runs."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from chinchax.scaling.runs import conventions
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps.train import checkpoint
from chinchax.sweeps.train import stop as stop_lib
from chinchax.sweeps import executors, spec as spec_lib, sweep
from chinchax.sweeps.chips import cpu_time
from chinchax.cli import flags
from chinchax.cli import sweep as cli_sweep
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.job import Job
from chinchax.sweeps.train import loop

from tests.helpers import sweep_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = Shape(d_model=64, n_layers=1, n_heads=1, d_ff=64, vocab_size=258, seq_len=64)


def _config(workdir, *more):
  return flags.parse_config_flags(sweep_helper.argv(str(workdir), *more), "chinchax sweep",
                                  cli_sweep.DEFAULT_CONFIG).config


class StopAfter:
  """A stop flag that turns true at its n-th look."""

  def __init__(self, n: int):
    self.n, self.reason = n, "test"

  def __bool__(self) -> bool:
    self.n -= 1
    return self.n <= 0


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
  """A local sweep SIGKILLed once its first cell's result.json appears, then rerun."""
  wd = tmp_path_factory.mktemp("local") / "sweep"
  env = dict(os.environ, PYTHONPATH=ROOT)
  cmd = [sys.executable, "-m", "chinchax.cli", "sweep", *sweep_helper.argv(str(wd))]
  proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  deadline = time.time() + 300
  try:
    while time.time() < deadline and not sweep_helper.results(str(wd)):
      assert proc.poll() is None, "the sweep ended before it was killed"
      time.sleep(0.05)
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
  first = sweep_helper.results(str(wd))
  (name,) = first
  files = {f: (wd / name / f).read_bytes() for f in ("result.json", "metrics.jsonl")}
  stamp = (wd / name / "result.json").stat().st_mtime_ns
  rerun = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
  return dict(wd=wd, name=name, files=files, stamp=stamp, rerun=rerun,
              results=sweep_helper.results(str(wd)))


@pytest.fixture(scope="module")
def local_losses(resumed):
  results = resumed["results"]
  assert len(results) == 2 and all(r["status"] == "done" for r in results.values())
  return {k: r["eval_loss"] for k, r in results.items()}


@pytest.mark.slow
def test_killed_sweep_resumes_without_retraining_finished_cells(resumed):
  wd, name, rerun = resumed["wd"], resumed["name"], resumed["rerun"]
  # Two cells of one budget are too few for a fit: the rerun trains the rest, then exits 1
  # with everything written kept.
  assert rerun.returncode == 1, rerun.stderr[-2000:]
  assert f"{name}: skipped, already done" in rerun.stdout
  assert "1 of 2 cells to train" in rerun.stdout
  assert "the fit failed: Approach 3 fits 5 parameters" in rerun.stderr
  assert (wd / name / "result.json").stat().st_mtime_ns == resumed["stamp"]
  for f, content in resumed["files"].items():
    assert (wd / name / f).read_bytes() == content
  records = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  assert sorted(r["name"] for r in records) == sorted(resumed["results"])
  assert all(r["status"] == "done" and r["eval_loss"] > 0 for r in records)
  assert "The fit failed" in (wd / "report.md").read_text()


@pytest.mark.slow
def test_packed_on_8_devices_matches_local(tmp_path, local_losses):
  env = dict(os.environ, PYTHONPATH=ROOT,
             XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "helpers", "sweep_helper.py"),
                        str(tmp_path / "packed"), "packed", "1"],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=400)
  assert out.returncode == 0, out.stderr[-3000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])
  assert got["rc"] == 1  # trained, then too few runs to fit
  assert set(got["results"]) == set(local_losses)
  for name, r in got["results"].items():
    assert r["status"] == "done" and r["devices"] == 1
    assert r["eval_loss"] == pytest.approx(local_losses[name], abs=1e-5)


@pytest.mark.slow
def test_packed_on_a_cpu_split_in_two_matches_local(tmp_path, local_losses):
  """`cpu_devices=2` (the smoke sweep's setting) without XLA_FLAGS: two jax CPU devices, a
  cell on each, the same losses."""
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "helpers", "sweep_helper.py"),
                        str(tmp_path / "split"), "packed", "1", "--config.cpu_devices=2"],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=400)
  assert out.returncode == 0, out.stderr[-3000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])
  assert set(got["results"]) == set(local_losses) and got["host_devices"] == 2
  for name, r in got["results"].items():
    assert r["devices"] == 1
    assert r["eval_loss"] == pytest.approx(local_losses[name], abs=1e-5)


@pytest.mark.slow
def test_split_cpu_only_before_jax_starts():
  code = ("import logging, jax\n"
          "from chinchax.sweeps import executors\n"
          "print(executors.split_cpu(3), len(jax.devices()))\n"
          "print(executors.split_cpu(3), executors.split_cpu(2), len(jax.devices()))\n")
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  # Asked again for the count it has: yes; for another once jax runs: no, with a warning.
  assert out.stdout.split() == ["True", "3", "True", "False", "3"]
  assert "cpu_devices=2 has no effect" in out.stderr


def test_packed_starts_the_longest_job_first(monkeypatch):
  started, gate = [], []

  def fake_train(c, workdir, *, stop=None, quiet=False, devices=None, checkpoint_lock=None):
    del c, stop, quiet, checkpoint_lock
    started.append(os.path.basename(workdir))
    if gate and len(started) <= 2:  # both workers hold their first job before either takes more
      gate[0].wait(timeout=30)
    return {"name": os.path.basename(workdir), "status": "done"}

  monkeypatch.setattr(loop, "train", fake_train)
  c = train_config.get_config("tiny")
  wide = Shape(d_model=128, n_layers=2, n_heads=2, d_ff=256, vocab_size=258, seq_len=64)
  jobs = [Job("small-short", c, "/w/small-short", SHAPE, 1e5, 1.0),
          Job("wide-long", c, "/w/wide-long", wide, 1e6, 1.0),
          Job("small-long", c, "/w/small-long", SHAPE, 1e6, 1.0),
          Job("wide-short", c, "/w/wide-short", wide, 1e5, 1.0)]
  assert [j.name for j in executors.longest_first(jobs)] == [
      "wide-long", "small-long", "wide-short", "small-short"]
  executors.run_packed(jobs, lambda job, r: None, groups=[("d0",)], stop=None)
  assert started == [j.name for j in jobs]  # one worker: the given order
  started.clear()
  gate.append(threading.Barrier(2))
  executors.run_packed(jobs, lambda job, r: None, groups=[("d0",), ("d1",)], stop=None)
  assert sorted(started[:2]) == ["small-long", "wide-long"]


def test_longest_first_counts_steps_beside_flops():
  """The order is the CPU time model's (`cpu_time`: CELL_S a run, STEP_S a step, chinchilla
  FLOPs at FLOPS_PER_S): a tiny model's 20,000 steps come before a wide model's 20, which
  has the larger 6ND; a WSD job counts its stable run, each branch's decay and a start each."""
  c = train_config.get_config("tiny")
  T = c.batch_size * c.seq_len
  tiny = Shape(d_model=16, n_layers=1, n_heads=2, d_ff=32, vocab_size=258, seq_len=64)
  wide = Shape(d_model=512, n_layers=4, n_heads=8, d_ff=2048, vocab_size=258, seq_len=64)
  many = Job("tiny-many-steps", c, "/w/many", tiny, 20000 * T, 1.0)
  few = Job("wide-few-steps", c, "/w/few", wide, 20 * T, 1.0)
  assert conventions.params(wide) * 20 > conventions.params(tiny) * 20000  # 6ND: wide first

  def expected(runs, steps, shape):
    return (runs * cpu_time.CELL_S + steps * cpu_time.STEP_S
            + steps * T * conventions.flops_per_token(shape, "chinchilla") / cpu_time.FLOPS_PER_S)

  assert executors.seconds(many) == pytest.approx(expected(1, 20000, tiny), rel=1e-12)
  assert executors.seconds(few) == pytest.approx(expected(1, 20, wide), rel=1e-12)
  assert [j.name for j in executors.longest_first([few, many])] == ["tiny-many-steps",
                                                                     "wide-few-steps"]
  w = c.copy_and_resolve_references()
  w.wsd.branches = (2000.0 * T, 5000.0 * T)  # decays of 400 and 1,000 steps, from 1,600 and 4,000
  branched = Job("tiny-wsd", w, "/w/wsd", tiny, 5000 * T, 1.0)
  assert executors.seconds(branched) == pytest.approx(expected(3, 4000 + 400 + 1000, tiny),
                                                      rel=1e-12)


@pytest.mark.slow
def test_ray_matches_local(tmp_path, local_losses, monkeypatch):
  ray = pytest.importorskip("ray")
  monkeypatch.setenv("PYTHONPATH", ROOT)  # the workers import chinchax.sweeps from this checkout
  ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
  try:
    c = _config(tmp_path / "ray", "--config.executor=ray")
    result = sweep.sweep(c, str(tmp_path / "ray"), quiet=True, stop=stop_lib.StopFlag())
    assert result.status == "done" and "Approach 3 fits 5 parameters" in result.fit_error
  finally:
    ray.shutdown()
  results = sweep_helper.results(str(tmp_path / "ray"))
  assert set(results) == set(local_losses)
  for name, r in results.items():
    assert r["eval_loss"] == pytest.approx(local_losses[name], abs=1e-5)
  lines = (tmp_path / "ray" / "runs.jsonl").read_text().splitlines()
  assert sorted(json.loads(l)["name"] for l in lines) == sorted(local_losses)


@pytest.mark.slow
def test_ray_on_two_nodes_reruns_the_cell_of_a_lost_node_elsewhere(tmp_path, local_losses,
                                                                 monkeypatch, capfd):
  """A Ray cluster of two nodes of one CPU each (the head runs none): the two cells run one on
  each; one node is killed mid-cell, and its cell is rerun on the other, from its checkpoint."""
  ray = pytest.importorskip("ray")
  from ray import cluster_utils  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("PYTHONPATH", ROOT)
  cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
  nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
  wd = tmp_path / "ray"
  killed = []

  def kill_a_node_mid_cell():  # once both cells have a checkpoint and neither has finished
    while not killed:
      cells = [wd / n for n in (os.listdir(wd) if wd.is_dir() else ())]
      started = [c for c in cells if (c / "checkpoints").is_dir()
                 and any(d.isdigit() for d in os.listdir(c / "checkpoints"))]
      if len(started) == 2 and not any((c / "result.json").exists() for c in cells):
        cluster.remove_node(nodes[0], allow_graceful=False)
        killed.append(True)
      time.sleep(0.02)

  try:
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    threading.Thread(target=kill_a_node_mid_cell, daemon=True).start()
    # One step per dispatch and a checkpoint every 2 steps: with chunks of 16, or a first
    # checkpoint at step 4, these tiny cells end too soon after it for the watcher to catch
    # both mid-cell (checkpoints do not change the losses compared below).
    config = _config(wd, "--config.executor=ray", "--config.train.steps_per_dispatch=1",
                     "--config.train.checkpoint.every_steps=2")
    result = sweep.sweep(config, str(wd), quiet=True,
                         stop=stop_lib.StopFlag())
  finally:
    killed.append(False)  # ends the thread
    ray.shutdown()
    cluster.shutdown()
  assert killed[0] is True, "no node was killed mid-cell"
  assert result.status == "done" and result.failed == (), result
  results = sweep_helper.results(str(wd))
  assert set(results) == set(local_losses)
  for name, r in results.items():  # the local executor's losses
    assert r["eval_loss"] == pytest.approx(local_losses[name], abs=1e-5)
  # The lost node's raylet log tail (its state-dump tables) is not printed; why it ended is.
  said = capfd.readouterr()
  assert "objects spillable" not in said.out + said.err
  assert "lines of the Raylet logs" not in said.out + said.err


@pytest.mark.slow
def test_ray_sweep_ends_when_its_stop_flag_turns_true(tmp_path, monkeypatch):
  """SIGTERM/SIGINT set the sweep's stop flag: under Ray the driver stops waiting, cancels
  the tasks and reports the sweep stopped instead of training every cell."""
  ray = pytest.importorskip("ray")
  monkeypatch.setenv("PYTHONPATH", ROOT)
  ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
  try:
    wd = str(tmp_path / "ray")
    spec = spec_lib.resolve(_config(wd, "--config.executor=ray"), wd)
    seen = []
    # The flag turns true at the driver's third look, long before a task can finish.
    assert not executors.run_ray(spec.jobs, lambda job, outcome: seen.append(job.name),
                                 spec.executor, stop=StopAfter(3), quiet=True)
    assert seen == []
  finally:
    ray.shutdown()
  assert sweep_helper.results(wd) == {}  # no cell finished


def _jobs(n, root="/nowhere"):
  c = train_config.get_config("tiny")
  return [Job(name=f"cell{i}", config=c, workdir=f"{root}/cell{i}", shape=SHAPE, D=1e6,
              budget=1e12) for i in range(n)]


def test_packed_spreads_jobs_over_groups_and_reports_in_the_callers_thread(monkeypatch):
  ran, barrier = [], threading.Barrier(2, timeout=10)
  methods = dict(vars(checkpoint.Checkpointer))

  def fake_train(c, workdir, *, stop=None, quiet=False, devices=None, checkpoint_lock=None):
    del c, stop, quiet
    if workdir.endswith(("cell0", "cell1")):
      barrier.wait()  # the first two jobs run at the same time, one per group
    # The runs share one lock for their checkpoints; the class itself is left as it is.
    assert dict(vars(checkpoint.Checkpointer)) == methods
    ran.append((workdir, tuple(devices), checkpoint_lock))
    return {"name": os.path.basename(workdir), "status": "done"}

  monkeypatch.setattr(loop, "train", fake_train)
  seen = []
  main = threading.current_thread()
  assert executors.run_packed(
      _jobs(5), lambda job, r: seen.append((job.name, threading.current_thread() is main)),
      groups=[("d0", "d1"), ("d2", "d3")], stop=None)
  assert sorted(seen) == [(f"cell{i}", True) for i in range(5)]
  assert {d for _, d, _ in ran} == {("d0", "d1"), ("d2", "d3")}
  assert sorted(w for w, _, _ in ran) == [f"/nowhere/cell{i}" for i in range(5)]
  locks = {id(lock) for _, _, lock in ran}
  assert len(locks) == 1 and ran[0][2] is not None and hasattr(ran[0][2], "acquire")


def test_packed_calls_on_idle_once_while_another_group_still_trains(monkeypatch):
  """The first group to find no job left calls `on_idle` (the sweep starts its figures'
  workers there): cell0 trains on until it has been called, and it is called once."""
  called, seen_by_cell0 = [], []
  idle = threading.Event()

  def fake_train(c, workdir, *, stop=None, quiet=False, devices=None, checkpoint_lock=None):
    del c, stop, quiet, devices, checkpoint_lock
    if workdir.endswith("cell0"):
      seen_by_cell0.append(idle.wait(timeout=10))
    return {"name": os.path.basename(workdir), "status": "done"}

  def on_idle():
    called.append(threading.current_thread().name)
    idle.set()

  monkeypatch.setattr(loop, "train", fake_train)
  seen = []
  assert executors.run_packed(_jobs(4), lambda job, r: seen.append(job.name),
                              groups=[("d0",), ("d1",)], stop=None, on_idle=on_idle)
  assert sorted(seen) == [f"cell{i}" for i in range(4)]
  assert seen_by_cell0 == [True]  # called while cell0 was still training
  assert len(called) == 1 and called[0].startswith("chinchax-cell")


def test_a_stopped_cell_ends_the_sweep_and_a_raising_cell_fails(monkeypatch, tmp_path):
  def fake_train(c, workdir, *, stop=None, quiet=False, devices=None, checkpoint_lock=None):
    if workdir.endswith("cell0"):
      raise ValueError("bad shape\ndetails")
    return {"status": "stopped", "reason": "SIGTERM"}

  monkeypatch.setattr(loop, "train", fake_train)
  seen = []
  assert not executors.run_local(_jobs(3, str(tmp_path)), lambda job, r: seen.append(r),
                                 stop=None)
  assert [r.status for r in seen] == ["failed"]
  (record,) = seen[0].records
  assert seen[0].reason == record["reason"] == "ValueError: bad shape"
  assert record["N_total"] > 0
  assert json.loads((tmp_path / "cell0" / "result.json").read_text())["status"] == "failed"


def test_checkpoints_of_packed_runs_take_the_lock(tmp_path):
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  class Lock:
    def __init__(self):
      self.held = 0

    def __enter__(self):
      self.held += 1

    def __exit__(self, *exc):
      self.held += 1

  lock = Lock()
  ckpt = checkpoint.Checkpointer(str(tmp_path / "c"), async_save=False, lock=lock)
  assert lock.held == 2  # the manager was made under the lock
  assert ckpt.maybe_save(1, {"x": jnp.ones(3)}, force=True)
  ckpt.close()
  assert lock.held == 6
  assert checkpoint.Checkpointer(str(tmp_path / "c"), lock=None).all_steps() == [1]


def test_device_groups_refuse_sizes_this_host_cannot_give():
  import jax
  n = len(jax.local_devices())
  assert executors.device_groups(1) == [[d] for d in jax.local_devices()]
  for bad in (0, n + 1, 1.5):
    with pytest.raises(executors.UserError, match="devices_per_cell"):
      executors.device_groups(bad)
