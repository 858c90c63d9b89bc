"""Where a sweep's cells run: `c.executor = 'local' | 'packed' | 'ray'`.

* `local` (default): cells one after another in this process, each on all the job's devices
  (every host of a multi-host job runs the same cells in the same order, in lockstep).
* `packed`: several small cells at once on disjoint groups of this host's devices. The
  `jax.local_devices()` are cut into groups of `c.devices_per_cell`; one thread per group
  trains one cell at a time on its own sub-mesh, so an 8-chip host runs 8 one-chip cells
  together. Threads are enough: JAX dispatch and XLA execution release the GIL, and the
  contexts train() enters are per thread in jax 0.10 (`use_abstract_mesh` swaps a
  thread-local config value, flax's logical-axis rules are a `threading.local`), while every
  array carries an explicit sharding on its own mesh.
* `ray`: each cell a Ray task holding its accelerators (`c.ray_num_gpus` GPUs or
  `c.ray_tpus` TPU chips per cell, `c.ray_num_cpus` CPUs; CPU only by default) on the
  cluster at `c.ray_address` (empty: start a local one). Tasks write their cell folders into the shared workdir; the
  driver receives each record and hands it to `on_result` (which upserts runs.jsonl).

Every executor calls `on_result(job, record)` as each cell ends, in the driver's thread, so
the caller can write shared files without locks. A cell that raises is a `failed` record
with the exception's one-line reason; the sweep goes on. A cell that returns `stopped`
(SIGTERM/SIGINT) ends the sweep: no new cells start, running ones save and stop.
"""

import concurrent.futures
import contextlib
import dataclasses
import queue
import threading
from collections.abc import Callable, Sequence

import jax
import ml_collections

from chinchax.scaling import atomic
from chinchax.scaling.conventions import Shape
from chinchax.scaling.errors import UserError

EXECUTORS = ("local", "packed", "ray")


@dataclasses.dataclass(frozen=True)
class Job:
  """One cell to train: its train config, its folder and what a failed record needs."""

  name: str
  config: ml_collections.ConfigDict
  workdir: str
  shape: Shape
  D: float
  budget: float | None


OnResult = Callable[[Job, dict], None]


def reason(e: BaseException) -> str:
  """An exception as one line: 'TypeName: first line of the message'."""
  text = str(e).strip().splitlines()
  return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def is_wsd(config) -> bool:
  """A WSD job: one stable run whose cooldown branches are the records."""
  return bool(config is not None and config.get("wsd") and config.wsd.get("branches"))


def train_job(job: Job, *, devices=None, stop=None, quiet: bool = True) -> dict:
  """train() on the job; an exception becomes a `failed` record (also its result.json)."""
  from chinchax.sweeps import run_record  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import train as train_lib  # pylint: disable=g-import-not-at-top
  try:
    if is_wsd(job.config):
      # One stable run and its cooldown branches: the branches are the sweep's records.
      from chinchax.sweeps import wsd  # pylint: disable=g-import-not-at-top
      out = wsd.train_wsd(job.config, job.workdir, stop=stop, quiet=quiet, devices=devices)
      return {**out["main"], "status": out["status"], "branches": out["branches"]}
    return train_lib.train(job.config, job.workdir, stop=stop, quiet=quiet, devices=devices)
  except Exception as e:  # pylint: disable=broad-except
    record = run_record.make(name=job.name, shape=job.shape, D=job.D, status="failed",
                             reason=reason(e), budget=job.budget)
    if jax.process_index() == 0:
      atomic.makedirs(job.workdir)
      run_record.write_result(job.workdir, record)
    return record


def check(c: ml_collections.ConfigDict) -> None:
  """Refuses an executor setting that cannot work, before anything runs."""
  executor = c.get("executor", "local")
  if executor not in EXECUTORS:
    raise UserError(f"executor={executor!r} is not one of {', '.join(EXECUTORS)}")
  if executor != "local" and jax.process_count() > 1:
    raise UserError(f"executor={executor!r} runs on one host; a multi-host job "
                    f"({jax.process_count()} processes) needs executor='local'")
  if executor == "packed":
    device_groups(c.get("devices_per_cell", 1))
  if executor == "ray":
    try:
      import ray  # pylint: disable=g-import-not-at-top,unused-import
    except ImportError:
      raise UserError("executor='ray' needs Ray: pip install 'chinchax[ray]'") from None


def device_groups(devices_per_cell: int) -> list[list]:
  """This host's devices cut into disjoint groups of `devices_per_cell` (the rest idle)."""
  local = jax.local_devices()
  k = devices_per_cell
  if not (isinstance(k, int) and 1 <= k <= len(local)):
    raise UserError(f"devices_per_cell={k!r} must be an integer from 1 to the "
                    f"{len(local)} devices of this host")
  return [local[i:i + k] for i in range(0, len(local) - k + 1, k)]


def run_jobs(jobs: Sequence[Job], on_result: OnResult, c: ml_collections.ConfigDict, *,
             stop=None, quiet: bool = True) -> bool:
  """Runs every job with the executor `c` names; False when a stop cut the sweep short."""
  check(c)
  executor = c.get("executor", "local")
  if executor == "local":
    return run_local(jobs, on_result, stop=stop, quiet=quiet)
  if executor == "packed":
    return run_packed(jobs, on_result, device_groups(c.get("devices_per_cell", 1)),
                      stop=stop, quiet=quiet)
  return run_ray(jobs, on_result, address=c.get("ray_address", ""),
                 num_cpus=c.get("ray_num_cpus", 1), num_gpus=c.get("ray_num_gpus", 0),
                 tpus=c.get("ray_tpus", 0), quiet=quiet)


def run_local(jobs: Sequence[Job], on_result: OnResult, *, stop=None,
              quiet: bool = True) -> bool:
  for job in jobs:
    record = train_job(job, stop=stop, quiet=quiet)
    if record.get("status") == "stopped":
      return False
    on_result(job, record)
  return True


def run_packed(jobs: Sequence[Job], on_result: OnResult, groups: Sequence[Sequence], *,
               stop=None, quiet: bool = True) -> bool:
  """One worker thread per device group takes the next job until none is left."""
  todo: queue.SimpleQueue = queue.SimpleQueue()
  for job in jobs:
    todo.put(job)
  done: queue.SimpleQueue = queue.SimpleQueue()
  halted = threading.Event()

  def worker(group):
    while not halted.is_set():
      try:
        job = todo.get_nowait()
      except queue.Empty:
        return
      record = train_job(job, devices=group, stop=stop, quiet=quiet)
      if record.get("status") == "stopped":
        halted.set()
      done.put((job, record))

  with _checkpoints_in_turn(), concurrent.futures.ThreadPoolExecutor(
      len(groups), "chinchax-cell") as pool:
    futures = [pool.submit(worker, g) for g in groups]
    # Results are handed over here, in the caller's thread, as they arrive.
    while not all(f.done() for f in futures) or not done.empty():
      try:
        job, record = done.get(timeout=0.2)
      except queue.Empty:
        continue
      if record.get("status") != "stopped":
        on_result(job, record)
    for f in futures:
      f.result()  # a bug in the worker itself surfaces here
  return not halted.is_set()


@contextlib.contextmanager
def _checkpoints_in_turn():
  """While cells share this process, their checkpoints are saved synchronously, one at a time.

  orbax CheckpointManagers that save at once from several threads of one process collide
  (FileExistsError / FileNotFoundError on their temporary directories; seen with orbax 0.12
  on 6 packed cells), so `sweeps.checkpoint.Checkpointer` is wrapped for the packed run
  only. Saves of small cells take milliseconds, so the lock costs little.
  """
  from chinchax.sweeps import checkpoint  # pylint: disable=g-import-not-at-top
  cls, lock = checkpoint.Checkpointer, threading.Lock()
  saved = {name: getattr(cls, name) for name in ("__init__", "maybe_save", "restore_latest",
                                                 "close")}

  def in_turn(method):
    def call(*args, **kwargs):
      with lock:
        return method(*args, **kwargs)
    return call

  def init(self, directory, **kwargs):
    saved["__init__"](self, directory, **{**kwargs, "async_save": False})

  try:
    cls.__init__ = in_turn(init)
    for name in ("maybe_save", "restore_latest", "close"):
      setattr(cls, name, in_turn(saved[name]))
    yield
  finally:
    for name, method in saved.items():
      setattr(cls, name, method)


def _ray_task(job: Job, quiet: bool) -> dict:
  from chinchax.sweeps import checkpoint  # pylint: disable=g-import-not-at-top
  # A flag with no signal handlers: SIGTERM stays Ray's way of ending the worker.
  return train_job(job, stop=checkpoint.StopFlag(), quiet=quiet)


def run_ray(jobs: Sequence[Job], on_result: OnResult, *, address: str = "",
            num_gpus: float = 0, tpus: int = 0, num_cpus: float = 1,
            quiet: bool = True) -> bool:
  """One Ray task per job; joins the cluster at `address`, or starts a local one."""
  import ray  # pylint: disable=g-import-not-at-top

  if not ray.is_initialized():
    ray.init(address=address or None, include_dashboard=False, log_to_driver=not quiet)
  options = {"num_cpus": num_cpus, "num_gpus": num_gpus, "max_retries": 0}
  if tpus:
    options["resources"] = {"TPU": tpus}
  task = ray.remote(_ray_task).options(**options)
  pending = {task.remote(job, quiet): job for job in jobs}
  stopped = False
  while pending:
    ready, _ = ray.wait(list(pending), num_returns=1)
    job = pending.pop(ready[0])
    try:
      record = ray.get(ready[0])
    except Exception as e:  # pylint: disable=broad-except
      # The worker died (out of memory, lost node): the cell failed, the sweep goes on.
      from chinchax.sweeps import run_record  # pylint: disable=g-import-not-at-top
      record = run_record.make(name=job.name, shape=job.shape, D=job.D, status="failed",
                               reason=reason(e), budget=job.budget)
    if record.get("status") == "stopped":
      stopped = True
      continue
    on_result(job, record)
  return not stopped
