"""The exit statuses of chinchax's commands: the one table, which docs/DESIGN.md quotes and the
launchers read (launch/jobset.py's podFailurePolicy, launch/steps.py's restart loop on TPU VMs
and GPU hosts).

A launcher restarts a job whose process exits with a status that a rerun can get past (a
preemption, a lost or stuck host: the rerun resumes from the last checkpoint), and fails the
job on one that a rerun would repeat (a cell or the fit failed, a user mistake). The JobSet
restarts every status but the no-restart ones, so a process killed by a signal chinchax does
not catch (kill -9, the OOM killer, an abort) too. The restart loop on a VM restarts only the
statuses of a host problem: a stop there is someone's SIGTERM or Ctrl-C, to be obeyed.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Code:
  status: int
  name: str
  kind: str  # "done"; "final": a rerun fails the same way; "host": a host problem; "stop"
  meaning: str

  @property
  def restart(self) -> bool:
    """Whether a launcher reruns the job."""
    return self.kind in ("host", "stop")


DONE = 0
FAILED = 1       # also Python's status for an uncaught exception: a bug, which a rerun repeats
USER = 2         # chinchax.errors.UserError
LOST = 75        # sysexits' EX_TEMPFAIL: another process of the job is gone
COORDINATOR = 76
STUCK = 77
JOIN = 78
SIGINT, SIGPIPE, SIGTERM = 130, 141, 143  # 128 + the signal's number, as a shell says
ABORT = 134  # SIGABRT: jax's own abort, with its stack trace

TABLE = (
    Code(DONE, "done", "done", "every run and the fit finished"),
    Code(FAILED, "failed", "final", "a cell or the fit failed (or a bug's traceback): a rerun "
         "fails the same way"),
    Code(USER, "user mistake", "final", "a refused flag, config or input, processes that "
         "disagree (config, workdir, process count or ID), a coordinator port in use"),
    Code(LOST, "lost process", "host", "another process of the job stopped beating, or ended "
         "with a status a launcher restarts"),
    Code(COORDINATOR, "lost coordinator", "host", "process 0 (the coordinator) is gone: "
         "seen by chinchax's heartbeat, or by jax's client, whose abort chinchax turns into "
         "this status and one line"),
    Code(STUCK, "stuck", "host", "no train step finished within the watchdog's deadline (a "
         "stuck collective, a frozen host)"),
    Code(JOIN, "join timeout", "host", "the job's processes did not all join in time"),
    Code(ABORT, "aborted by jax", "host", "jax's runtime ended the process for another "
         "reason (a collective's rendezvous timed out): one line naming the log that holds "
         "jax's report"),
    Code(SIGINT, "stopped by Ctrl-C", "stop", "checkpointed; a rerun resumes"),
    Code(SIGPIPE, "stdout's reader left", "stop", "checkpointed; a rerun resumes"),
    Code(SIGTERM, "stopped by SIGTERM", "stop", "a preemption: checkpointed; a rerun resumes"),
)

BY_STATUS = {c.status: c for c in TABLE}
# What a launcher must not rerun; every other non-zero status is restarted.
NO_RESTART = tuple(c.status for c in TABLE if c.kind == "final")
# What the restart loop on a VM reruns.
HOST = tuple(c.status for c in TABLE if c.kind == "host")


def restart(status: int) -> bool:
  """Whether a launcher reruns a job whose process ended with `status`."""
  return status != DONE and status not in NO_RESTART


def markdown() -> str:
  """The table as DESIGN quotes it."""
  said = {"done": "-", "final": "no", "host": "yes, also on a VM", "stop": "by the JobSet"}
  rows = [f"| {c.status} | {c.name} | {said[c.kind]} | {c.meaning} |" for c in TABLE]
  return "\n".join(["| status | name | restarted | meaning |", "| --- | --- | --- | --- |",
                    *rows])
