"""A fit's figures drawn in worker processes, one figure each, beside the command's fit.

    workers.warm()      # at the start of `chinchax fit --plots`: the workers start and
    ...                 # import matplotlib while the fit runs
    paths = workers.draw([Job("chinchax.scaling.plots.law:plot_law", kwargs=...), ...])

`CHINCHAX_PLOT_WORKERS` sets how many (default: one a CPU, at most 4, none on a busy host;
0: none).

Matplotlib is not thread-safe, and its figures are CPU-bound Python: processes, not threads.
The workers come from a forkserver that has imported the drawing modules once (a spawned
worker imports them itself, 0.8 s each on this 2-core machine; a forked one would inherit the
parent's threads), so the command's process never imports matplotlib, and each figure costs
its drawing alone. A job names its function as "module:name" and carries its arguments,
picklable data: the figure is the bytes drawn in this process (`draw(jobs, in_process=True)`:
what a library call without `warm` does, and the fallback when no worker can start). Each job
writes its own files (`canvas.save`: both formats rendered before either is written).
"""

import concurrent.futures
import dataclasses
import importlib
import multiprocessing
import os
import select
import threading
import time
from typing import Any

from chinchax import pids
from chinchax.errors import UserError
from chinchax.scaling.numerics import forks

# What a worker imports before its first job: the forkserver imports these once.
PRELOAD = ("chinchax.scaling.plots.law", "chinchax.scaling.plots.residuals",
           "matplotlib.backends.backend_agg", "matplotlib.backends.backend_svg")
MAX_WORKERS = 4  # a fit draws four figures at most

_pool: concurrent.futures.ProcessPoolExecutor | None = None
_starting: threading.Thread | None = None
_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Job:
  function: str                     # "module:name"; returns the paths it wrote
  args: tuple = ()
  kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


def run(job: Job) -> list[str]:
  module, name = job.function.split(":")
  return getattr(importlib.import_module(module), name)(*job.args, **job.kwargs)


def _ready() -> None:
  """A worker's first task: the modules imported (by the forkserver, where it runs) and
  matplotlib's font list and math-text parser built, before any figure needs them."""
  for module in PRELOAD:
    importlib.import_module(module)
  from chinchax.scaling.plots import canvas  # pylint: disable=g-import-not-at-top
  canvas.prime()


def _die_with(pid: int) -> None:
  """A worker's start: it ends when the process that started the pool does, however that one
  ends (kill -9 included). Otherwise a killed command's workers wait on their task queue
  forever; each holds the forkserver's "alive" pipe, so the forkserver stays too, and all of
  them hold the command's stdout and stderr, which a caller reading to their end waits on."""
  try:
    fd = os.pidfd_open(pid)
  except ProcessLookupError:  # gone already
    os._exit(0)
  except (AttributeError, OSError):  # no pidfd (not Linux >= 5.3): ask every second
    fd = None

  def watch() -> None:
    if fd is not None:
      select.select([fd], [], [])  # readable once the process has ended
    else:
      while pids.alive(pid):
        time.sleep(1.0)
    os._exit(0)

  threading.Thread(target=watch, daemon=True, name="chinchax-plot-parent").start()


def processes(own_load: bool = False) -> int:
  """Workers to start: `CHINCHAX_PLOT_WORKERS` (0: draw in this process), else one a CPU this
  process may use, at most one a figure, and none where no CPU is idle (the load average at
  least the CPUs): there the workers' own imports (0.8 s of CPU) would only add to the
  figures, which the command's process draws as well. `own_load`: the load is this
  process's own work, which is ending (a sweep's last cells), and does not count."""
  given = os.environ.get("CHINCHAX_PLOT_WORKERS", "").strip()
  if given:
    if not given.isdigit():
      raise UserError(f"CHINCHAX_PLOT_WORKERS must be a whole number of processes (0: draw "
                      f"the figures in this process), got {given!r}")
    return int(given)
  cpus = forks.cores()
  try:
    busy = os.getloadavg()[0] >= cpus and not own_load
  except OSError:  # no load average here
    busy = False
  return 0 if busy else min(MAX_WORKERS, cpus)


def _start(n: int) -> None:
  global _pool
  context = multiprocessing.get_context("forkserver")
  context.set_forkserver_preload(list(PRELOAD))
  pool = concurrent.futures.ProcessPoolExecutor(n, mp_context=context, initializer=_die_with,
                                                initargs=(os.getpid(),))
  try:
    # Workers start on demand, one a submitted task while none is idle: n tasks, n workers.
    for f in [pool.submit(_ready) for _ in range(n)]:
      f.result()
  except (OSError, RuntimeError, concurrent.futures.process.BrokenProcessPool):
    pool.shutdown(wait=False, cancel_futures=True)
    return  # no workers here: `draw` draws in this process
  with _lock:
    _pool = pool


def warm(n: int | None = None) -> None:
  """Starts the workers in the background (a thread: a forkserver's start waits for its
  imports), so that they are ready when `draw` is called. Only a program whose main module
  is safe to import again starts them (the `chinchax` command): each worker imports it."""
  global _starting
  n = processes() if n is None else n
  with _lock:
    if _pool is not None or _starting is not None or n == 0:
      return
    _starting = threading.Thread(target=_start, args=(n,), daemon=True,
                                 name="chinchax-plot-workers")
    _starting.start()


def draw(jobs: list[Job], in_process: bool = False) -> list[str]:
  """Runs the jobs on the workers `warm` started, or here, one after the other, when it was
  not called (a library call), drew nothing, or `in_process`; the paths written, in job
  order."""
  if not in_process and _starting is not None:
    _starting.join()
  if in_process or _pool is None or not jobs:
    return [p for job in jobs for p in run(job)]
  futures = [_pool.submit(run, job) for job in jobs]
  try:
    return [p for f in futures for p in f.result()]
  except concurrent.futures.process.BrokenProcessPool:  # a worker died (killed, out of memory)
    return draw(jobs, in_process=True)


def close() -> None:
  """Stops the workers (a later `warm` starts new ones)."""
  global _pool, _starting
  if _starting is not None:
    _starting.join()
  with _lock:
    pool, _pool, _starting = _pool, None, None
  if pool is not None:
    pool.shutdown()
