"""Where a sweep's jobs run: `executor = 'local' | 'packed' | 'ray'` (`spec.Executor`).

* `local` (default): jobs one after another in this process, each on all the job's devices
  (every host of a multi-host job runs the same jobs in the same order, in lockstep).
* `packed`: several small jobs at once on disjoint groups of this host's devices. The
  `jax.local_devices()` are cut into groups of `devices_per_cell`; one thread per group
  trains one job at a time on its own sub-mesh, so an 8-chip host runs 8 one-chip cells
  together. On a CPU host `cpu_devices = n` splits the CPU into n jax devices first
  (`split_cpu`, which `chinchax sweep` calls before jax starts; a library caller of
  `chinchax.sweep` calls it first, or the cells run one at a time): the smoke sweep's cells
  are too small to keep two cores busy one at a time.
  Jobs start longest first (by their time in the CPU model, `seconds`), so that the workers
  finish together; on CPU devices a WSD job's branches, which start from its stable run's
  saved states, are pieces of their own that any worker takes once that run is done, on that
  run's devices (`_Work`). Threads are enough: JAX dispatch and XLA execution release the
  GIL, and the contexts a run enters are per thread in jax 0.10 (`use_abstract_mesh` swaps a
  thread-local config value, flax's logical-axis rules are a `threading.local`), while every
  array carries an explicit sharding on its own mesh. The runs share one checkpoint lock
  (sweeps/train/checkpoint.py): their saves take turns, synchronously. The devices share
  XLA's thread pool, so a cell's kernels run on either core; a process per group, pinned to
  its own core, trained the smoke's cells 4% faster on 2026-11-28 and 10% (1.06-1.25) on
  2026-12-01 (bench/pair_bench.py), less its own start. It would need a second stop, kill and
  progress path; pinning each thread and running its programs on it (no async dispatch, one
  Eigen thread per op) left it at 1.07 (0.90-1.23), no fix.
* `ray`: each job a Ray task holding its accelerators (`ray_num_gpus` GPUs or `ray_tpus` TPU
  chips per cell, `ray_num_cpus` CPUs; CPU only by default) on the cluster at `ray_address`
  (empty: start a local one). Tasks write their cell folders into the shared workdir; the
  driver receives each outcome and hands it to `on_result` (which upserts runs.jsonl).

Every executor calls `on_result(job, outcome)` as each job ends, in the driver's thread, so
the caller can write shared files without locks. A job that raises is a `failed` outcome
with the exception's one-line reason; the sweep goes on. A stop (SIGTERM/SIGINT: the `stop`
flag) ends the sweep under every executor: no new job starts; local and packed runs save a
checkpoint where they are and stop, Ray tasks are cancelled (they resume from their last
checkpoint). `run_jobs` then returns False.
"""

import concurrent.futures
import heapq
import logging
import math
import os
import queue
import threading
from collections.abc import Callable, Sequence

import jax

from chinchax.scaling.runs import conventions
from chinchax.errors import UserError
from chinchax.sweeps.train import stop as stop_lib
from chinchax.sweeps.chips import cpu_time
from chinchax.sweeps import job as job_lib
from chinchax.sweeps import wsd
from chinchax.sweeps.job import Job, Outcome
from chinchax.sweeps.spec import Executor

OnResult = Callable[[Job, Outcome], None]
POLL_S = 0.2  # how often a waiting driver looks at its stop flag
RAY_RETRIES = 2  # reruns of a task whose node or worker died


def check(e: Executor) -> None:
  """Refuses an executor this process cannot run, before anything runs."""
  if e.kind != "local" and jax.process_count() > 1:
    raise UserError(f"executor={e.kind!r} runs on one host; a multi-host job "
                    f"({jax.process_count()} processes) needs executor='local'")
  if e.kind == "packed":
    device_groups(e.devices_per_cell)
  if e.kind == "ray":
    try:
      import ray  # pylint: disable=g-import-not-at-top,unused-import
    except ImportError:
      raise UserError("executor='ray' needs Ray: pip install 'chinchax[ray]'") from None


def split_cpu(n: int) -> bool:
  """Asks jax for `n` CPU devices (0: its default of one), which only works before its
  backends start; True when the CPU has them. Left alone when XLA_FLAGS already forces a
  device count (the multi-device tests do), and with a warning when jax has started: the
  packed cells then run one at a time on the one device."""
  if not n or "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
    return False
  if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
    raise UserError(f"cpu_devices={n!r} must be a whole number >= 1 (0: jax's default)")
  if jax.config.jax_num_cpu_devices == n:
    return True
  try:
    jax.config.update("jax_num_cpu_devices", n)
  except RuntimeError:
    logging.warning("cpu_devices=%d has no effect: jax started before the sweep; set it "
                    "before any jax operation (or run `chinchax sweep`)", n)
    return False
  return True


def longest_first(jobs: Sequence[Job]) -> list[Job]:
  """The jobs by their estimated seconds (`seconds`), most first (LPT scheduling: the last to
  start is a short one)."""
  return sorted(jobs, key=lambda j: -seconds(j))


def seconds(job: Job) -> float:
  """The job's time in the CPU model (`cpu_time`, the dry run's): a start per run, a cost per
  step and its chinchilla FLOPs at a rate; a WSD job trains its stable run and each branch's
  decay. By FLOPs alone, small models' many cheap steps count for nothing: the smoke's
  five largest sizes tied, and its packing on 2 devices ended with one idle for 10-13 s. In
  this order its jobs' own times, replayed, end 2.4 s sooner (154.7 s against 157.1), and the
  next sweep's last run ended 4.8 s after the other device's last."""
  c = job.config
  tokens = c.batch_size * c.seq_len
  if wsd.is_wsd(c):
    branches = wsd.branches_of(c)
    runs = 1 + len(branches)
    steps = wsd.trained_steps(branches)
  else:
    runs, steps = 1, math.ceil(float(job.D or 0.0) / tokens)
  return _cpu_seconds(job, runs, steps)


def _cpu_seconds(job: Job, runs: int, steps: int) -> float:
  """`runs` starts and `steps` steps of the job's shape and batch in the CPU model."""
  tokens = job.config.batch_size * job.config.seq_len
  flops = steps * tokens * conventions.flops_per_token(job.shape, "chinchilla")
  return cpu_time.seconds(runs, steps, flops)


def device_groups(devices_per_cell: int) -> list[list]:
  """This host's devices cut into disjoint groups of `devices_per_cell` (the rest idle)."""
  local = jax.local_devices()
  k = devices_per_cell
  if not (isinstance(k, int) and 1 <= k <= len(local)):
    raise UserError(f"devices_per_cell={k!r} must be an integer from 1 to the "
                    f"{len(local)} devices of this host")
  return [local[i:i + k] for i in range(0, len(local) - k + 1, k)]


def cell_devices(e: Executor) -> list[list] | None:
  """The device groups of this process's jobs' meshes (None under Ray: only a worker knows)."""
  if e.kind == "local":
    return [jax.devices()]
  if e.kind == "packed":
    return device_groups(e.devices_per_cell)
  return None


def run_jobs(jobs: Sequence[Job], on_result: OnResult, e: Executor, *, stop,
             quiet: bool = True, progress=None, opened=None,
             on_idle: Callable[[], None] | None = None) -> bool:
  """Runs every job with executor `e`; False when `stop` cut the sweep short. `progress`: a
  `sweeps.console.SweepProgress` the local and packed runs report their steps to; `opened`:
  the data and meshes the sweep opened once (`setup.Opened`), for the runs in this process;
  `on_idle`: called once when the packed runs' first device group finds no job left while
  others still train (the sweep starts its figures' workers on that idle CPU there)."""
  check(e)
  if e.kind == "local":
    return run_local(jobs, on_result, stop=stop, quiet=quiet, progress=progress, opened=opened)
  if e.kind == "packed":
    return run_packed(jobs, on_result, device_groups(e.devices_per_cell), stop=stop,
                      quiet=quiet, progress=progress, opened=opened, on_idle=on_idle)
  return run_ray(jobs, on_result, e, stop=stop, quiet=quiet)


def _reporter(progress, job: Job):
  return progress.start(job.name) if progress is not None else None


def run_local(jobs: Sequence[Job], on_result: OnResult, *, stop, quiet: bool = True,
              progress=None, opened=None) -> bool:
  for job in jobs:
    outcome = job_lib.run(job, stop=stop, quiet=quiet, progress=_reporter(progress, job),
                          opened=opened)
    if outcome.status == "stopped":
      return False
    on_result(job, outcome)
  return True


def run_packed(jobs: Sequence[Job], on_result: OnResult, groups: Sequence[Sequence], *,
               stop, quiet: bool = True, progress=None, opened=None,
               on_idle: Callable[[], None] | None = None, split: bool | None = None) -> bool:
  """One worker thread per device group takes the next piece of work until none is left; the
  first to find none calls `on_idle`. With several groups of CPU devices (`split`: by
  default, when every device is a CPU) a WSD job is split: its stable run is a piece, and
  once that run is done each branch is a piece of its own (`_Work`) that whichever worker
  takes it trains on the stable run's group. The CPU devices share one thread pool, so that
  group is as fast as any, and its programs are compiled (on another group a branch would
  compile its own: 1.5-7 s each on the smoke's CPU). On accelerators a job stays whole."""
  split = len(groups) > 1 and (split if split is not None else all(
      getattr(d, "platform", None) == "cpu" for g in groups for d in g))
  work = _Work(longest_first(jobs) if len(groups) > 1 else jobs, split=split)
  done: queue.SimpleQueue = queue.SimpleQueue()
  halted, lock = threading.Event(), threading.Lock()
  idle, idle_lock = threading.Event(), threading.Lock()  # not the checkpoints' lock
  reporters = {}

  def finish(job: Job, outcome: Outcome) -> None:
    if outcome.status == "stopped":
      halted.set()
    done.put((job, outcome))

  def worker(group):
    try:
      pieces(group)
    except BaseException:
      halted.set()  # a bug here: the other groups stop waiting for this one's branches
      raise

  def pieces(group):
    while True:
      piece = work.take(halted)
      if piece is None:
        with idle_lock:
          first = not idle.is_set()
          idle.set()
        if first and on_idle is not None:
          on_idle()
        return
      job, branch = piece
      kw = dict(devices=group, stop=stop, quiet=quiet, checkpoint_lock=lock, opened=opened)
      if branch is None and not work.split_job(job):
        finish(job, job_lib.run(job, progress=_reporter(progress, job), **kw))
      elif branch is None:  # a WSD job's stable run
        reporters[job.name] = _reporter(progress, job)
        outcome = job_lib.run_main(job, progress=reporters[job.name], **kw)
        work.main_ended(job, group, ok=outcome is None)
        if outcome is not None:
          finish(job, outcome)
      else:
        kw["devices"] = work.home[job.name]
        record = job_lib.run_branch(job, branch, progress=reporters[job.name], **kw)
        if record.get("status") == "stopped":
          halted.set()  # no piece starts after a stop; rerun to resume
        records = work.branch_ended(job, branch, record)
        if records is not None:  # the job's last branch
          finish(job, job_lib.branches_outcome(records))

  with concurrent.futures.ThreadPoolExecutor(len(groups), "chinchax-cell") as pool:
    futures = [pool.submit(worker, g) for g in groups]
    # Outcomes are handed over here, in the caller's thread, as they arrive.
    while not all(f.done() for f in futures) or not done.empty():
      try:
        job, outcome = done.get(timeout=POLL_S)
      except queue.Empty:
        continue
      if outcome.status != "stopped":
        on_result(job, outcome)
    for f in futures:
      f.result()  # a bug in the worker itself surfaces here
  return not halted.is_set()


class _Work:
  """What the packed executor's workers take: a branch of a WSD job whose stable run is done
  (longest first), else the next job in their order, else, while stable runs still train,
  it waits for their branches. A branch is a run of its own from the stable run's saved
  state, so any worker can train it; were a WSD job one piece, the last job would end alone,
  a whole job after the other workers' last (the smoke: one core idle for its last 10-17 s).
  Branches before jobs, so that jobs end (and their lines print) as the sweep goes; jobs
  before branches would balance the end a little better and end every job at once (the
  smoke's jobs replayed with their own times, bench/smoke_bench.py's runs: 1.9-4.7 s
  sooner against 2.1-8.4 s, of 171-222 s)."""

  def __init__(self, jobs: Sequence[Job], split: bool):
    self.jobs = list(jobs)
    self.split = split
    self.branches: list[tuple[float, int, Job, wsd.Branch]] = []  # a heap: longest first
    self.mains = 0  # stable runs training, whose branches are still to come
    self.ended: dict[str, dict[float, dict]] = {}  # a job's branch records, by D
    self.home: dict[str, Sequence] = {}  # the device group of a job's stable run
    self.cond = threading.Condition()

  def split_job(self, job: Job) -> bool:
    return self.split and wsd.is_wsd(job.config)

  def take(self, halted: threading.Event) -> tuple[Job, wsd.Branch | None] | None:
    """The next piece, a (job, None) or a (job, branch); None when nothing is left or the
    run halted."""
    with self.cond:
      while not halted.is_set():
        if self.branches:
          _, _, job, branch = heapq.heappop(self.branches)
          return job, branch
        if self.jobs:
          job = self.jobs.pop(0)
          self.mains += self.split_job(job)
          return job, None
        if not self.mains:
          return None
        self.cond.wait(POLL_S)
      return None

  def main_ended(self, job: Job, group: Sequence, ok: bool) -> None:
    with self.cond:
      self.mains -= 1
      if ok:
        self.ended[job.name], self.home[job.name] = {}, group
        for b in wsd.branches_of(job.config):
          heapq.heappush(self.branches, (-_cpu_seconds(job, 1, b.decay_steps), id(b), job, b))
      self.cond.notify_all()

  def branch_ended(self, job: Job, b: wsd.Branch, record: dict) -> list[dict] | None:
    """Records `b`'s record; the job's branch records in D order once all have ended."""
    with self.cond:
      ended = self.ended[job.name]
      ended[b.D] = record
      if len(ended) < len(job.config.wsd.branches):
        return None
      return [ended[D] for D in sorted(ended)]


def _ray_task(job: Job, quiet: bool) -> Outcome:
  # A flag with no signal handlers: SIGTERM stays Ray's way of ending the worker.
  return job_lib.run(job, stop=stop_lib.StopFlag(), quiet=quiet)


def _without_state_dumps() -> None:
  """A node that dies unexpectedly has its agent send the driver the last 20 lines of its
  raylet's log, which Ray's error listener (a thread of this process, on whatever
  log_to_driver says) prints on the sweep's stdout: lines of the raylet's periodic
  `[state-dump]` tables ("- objects spillable: 0"). The sentence saying that the raylet
  terminated, and why, stays; the lines go (they stay in raylet.out on that node)."""
  from ray._private import worker  # pylint: disable=g-import-not-at-top
  shown = worker.print_to_stdstream
  if getattr(shown, "chinchax", False):
    return

  def without(data, ignore_prefix):
    if data.get("pid") == "raylet":
      data = {**data, "lines": [_head(m) for m in data["lines"]]}
    return shown(data, ignore_prefix)
  without.chinchax = True
  worker.print_to_stdstream = without  # looked up by name at each error the listener prints


def _head(message: str) -> str:
  first, _, rest = message.partition("\n")
  if not first.endswith("lines of the Raylet logs:"):
    return message
  return first[:first.rindex(" Last ")] + " Its log: raylet.out in that node's Ray log folder."


def run_ray(jobs: Sequence[Job], on_result: OnResult, e: Executor, *, stop,
            quiet: bool = True) -> bool:
  """One Ray task per job; joins the cluster at `e.ray_address`, or starts a local one."""
  import ray  # pylint: disable=g-import-not-at-top

  if not ray.is_initialized():
    ray.init(address=e.ray_address or None, include_dashboard=False, log_to_driver=not quiet)
  _without_state_dumps()
  # A task whose node or worker dies is rerun elsewhere (it resumes from its cell's last
  # checkpoint in the shared workdir); one that raises is not (retry_exceptions stays off).
  options = {"num_cpus": e.ray_num_cpus, "num_gpus": e.ray_num_gpus,
             "max_retries": RAY_RETRIES}
  if e.ray_tpus:
    options["resources"] = {"TPU": e.ray_tpus}
  task = ray.remote(_ray_task).options(**options)
  pending = {task.remote(job, quiet): job for job in jobs}
  stopped = False
  while pending:
    if stop:
      for ref in pending:
        ray.cancel(ref)  # queued tasks never start; running ones are interrupted
      return False
    ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
    if not ready:
      continue
    job = pending.pop(ready[0])
    try:
      outcome = ray.get(ready[0])
    except Exception as err:  # pylint: disable=broad-except
      # The worker died RAY_RETRIES + 1 times (out of memory, lost nodes): the job failed.
      outcome = job_lib.failed(job, job_lib.reason(err))
    if outcome.status == "stopped":
      stopped = True
      continue
    on_result(job, outcome)
  return not stopped
