"""Joining the multi-host job the environment describes: the one place every entry point
(`chinchax train`, `sweep`, `eval`) calls before it builds a mesh.

The launchers describe a job by environment: JAX_NUM_PROCESSES, JAX_PROCESS_ID and
JAX_COORDINATOR_ADDRESS (launch/gpu.py, GKE JobSet GPU pods, launch/multiproc.py on one
machine), or the TPU VM metadata that `jax.distributed.initialize()` reads itself
(TPU_WORKER_HOSTNAMES, MEGASCALE_COORDINATOR_ADDRESS on a multislice). One process is one job.

Before jax joins, the processes call the roll at the coordinator's address
(sweeps/hosts/rollcall.py): a port in use, duplicate IDs, counts that disagree and processes
missing after CHINCHAX_JOIN_TIMEOUT_S (JOIN_TIMEOUT_S) are one line each, in seconds. On a TPU
slice, whose processes jax finds from the VM metadata, a join that does not complete in that
time is one line too (the IDs jax does not say).

Once joined, every process keeps in touch with the others through the coordinator
(sweeps/hosts/watch.py): a process that stops beating for CHINCHAX_HEARTBEAT_S seconds (default 20) is
lost, and every other one prints one line naming it and exits with a status the launchers
restart (chinchax/exit_codes.py) instead of waiting forever in a collective; a rerun of the job resumes from the last checkpoint. A lost
coordinator (process 0) is seen by jax's own client at once: it aborts the process, and
sweeps/hosts/native.py turns that abort into one line and exit status 76.

`same_on_every_process` checks, through the coordinator's key-value store (no collective on the
devices, so a disagreement cannot hang one), that every process runs the same config on the same
workdir: a job whose processes disagree is one line on every process.
"""

import contextlib
import hashlib
import os
import sys
import threading

import jax

from chinchax import exit_codes
from chinchax.errors import UserError
from chinchax.sweeps.hosts import native
from chinchax.sweeps.hosts import rollcall
from chinchax.sweeps.hosts import watch

HEARTBEAT_S = 20
JOIN_TIMEOUT_S = 120
_WAIT_MS = 10 * 60 * 1000  # for the other processes to publish: a slow start, not a lost host


def enter(config, workdir: str) -> str | None:
  """What every entry point calls first: joins the job, then checks that every process runs
  the same `config` (a ConfigDict) on the same `workdir`."""
  how = join()
  same_on_every_process(config=config.to_json_best_effort(sort_keys=True), workdir=workdir)
  return how


def join(env=None, initialize=None) -> str | None:
  """Joins the multi-host job the environment describes; returns how, or None (one host)."""
  env = os.environ if env is None else env
  initialize = initialize or _initialize
  # jax's own heartbeat aborts a process with a stack trace; chinchax's (sweeps/hosts/watch.py)
  # names the lost process in one line first.
  heartbeat = 3 * int(env.get("CHINCHAX_HEARTBEAT_S") or HEARTBEAT_S)
  if jax.distributed.is_initialized():
    return "already"
  timeout = float(env.get("CHINCHAX_JOIN_TIMEOUT_S") or JOIN_TIMEOUT_S)
  # jax's own timeout aborts with a stack trace: it comes after chinchax's line.
  waits = {"heartbeat_timeout_seconds": heartbeat, "initialization_timeout": int(timeout) + 30}
  if env.get("JAX_NUM_PROCESSES"):
    P, me = int(env["JAX_NUM_PROCESSES"]), int(env.get("JAX_PROCESS_ID", "0"))
    if env.get("JAX_COORDINATOR_ADDRESS"):  # read by jax itself too
      rollcall.call(env["JAX_COORDINATOR_ADDRESS"], me, P, timeout,
                    say=lambda m: print(m, flush=True))
    with _join_timer(timeout, f"process {me} of {P}"):
      initialize(num_processes=P, process_id=me, **waits)
    return "JAX_NUM_PROCESSES"
  hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
  if len(hosts) > 1 or env.get("MEGASCALE_COORDINATOR_ADDRESS"):
    # The TPU runtime's metadata names the coordinator and the processes.
    with _join_timer(timeout, f"TPU worker {env.get('TPU_WORKER_ID', '?')}"):
      initialize(**waits)
    return "TPU"
  return None


@contextlib.contextmanager
def _join_timer(timeout: float, who: str):
  """jax's join, ended with one line when it has not completed in `timeout` seconds."""
  def expire():
    native.exit_if_claimed(exit_codes.JOIN)  # another path may be ending this process already
    print(f"chinchax: error: {who}: the job's processes did not all join within "
          f"{timeout:g} s (CHINCHAX_JOIN_TIMEOUT_S); start every process of the job, with the "
          f"same coordinator (exit status {exit_codes.JOIN}){native.kept()}", file=sys.stderr,
          flush=True)
    os._exit(exit_codes.JOIN)  # the main thread waits inside jax's join
  timer = threading.Timer(timeout, expire)
  timer.daemon = True
  timer.start()
  try:
    yield
  finally:
    timer.cancel()


def _initialize(**kwargs) -> None:
  # jax's preemption notifier would take SIGTERM for itself from here on, and one arriving
  # before the run's stop flag is installed (during setup, a compile) would leave the process
  # deaf to it; chinchax's own stop (sweeps/hosts/watch.py) is agreed without it.
  jax.config.update("jax_enable_preemption_service", False)
  native.aside(kwargs.get("process_id"), kwargs.get("num_processes"))
  jax.distributed.initialize(**kwargs)
  watch.start(client(), jax.process_index(), jax.process_count(), _heartbeat_s())


def _heartbeat_s() -> int:
  return int(os.environ.get("CHINCHAX_HEARTBEAT_S") or HEARTBEAT_S)


def client():
  """The distributed runtime's client (its key-value store), or None on one process."""
  if jax.process_count() == 1:
    return None
  from jax._src import distributed as jd  # pylint: disable=g-import-not-at-top
  return jd.global_state.client


def same_on_every_process(**values: str) -> None:
  """UserError on every process when any process's value of a name differs from process 0's."""
  c = client()
  if c is None:
    return
  me, P = jax.process_index(), jax.process_count()
  for name, value in values.items():
    digest = hashlib.sha256(str(value).encode()).hexdigest()[:16]
    c.key_value_set(f"chinchax/same/{name}/{me}", digest)
    digests = [c.blocking_key_value_get(f"chinchax/same/{name}/{q}", _WAIT_MS) for q in range(P)]
    differ = [q for q in range(P) if digests[q] != digests[0]]
    if differ:
      raise UserError(
          f"the processes of this job disagree on the {name}: process "
          f"{', '.join(map(str, differ))} has another than process 0's; start every process "
          "with the same command line (and config file)")


def shared_outcome(name: str, attempt) -> object:
  """`attempt()` on process 0 only; its UserError, if any, raised on every process of the job
  (process 0 takes the workdir's lock: a second job is refused on each of its processes, not
  on process 0 alone while the others wait for it in a collective)."""
  c = client()
  if c is None:
    return attempt()
  key = f"chinchax/outcome/{name}"
  if jax.process_index() == 0:
    try:
      out = attempt()
    except UserError as e:
      c.key_value_set(key, "error:" + str(e))
      raise
    c.key_value_set(key, "ok")
    return out
  said = c.blocking_key_value_get(key, _WAIT_MS)
  if said.startswith("error:"):
    raise UserError(said[len("error:"):])
  return None


_FIRST = [0]  # calls of process_0_first so far: the same sequence on every process


def process_0_first(make):
  """`make()` on process 0, then on the others (which wait for it to finish)."""
  c = client()
  if c is None:
    return make()
  _FIRST[0] += 1
  key = f"chinchax/first/{_FIRST[0]}"
  if jax.process_index() == 0:
    out = make()
    c.key_value_set(key, "done")
    return out
  c.blocking_key_value_get(key, _WAIT_MS)
  return make()
