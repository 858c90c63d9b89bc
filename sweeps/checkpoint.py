"""Checkpoints of a run through orbax: async saves every k steps and every t minutes, the last n
kept, a save on SIGTERM (preemption), and restore of the newest one that loads.

Restore takes an abstract state (`jax.ShapeDtypeStruct`s carrying shardings), so a state saved
under one mesh restores under another. A checkpoint that fails to load is reported and the one
before it is tried: a preempted save can leave a half-finalised directory on some filesystems.

Runs that share a process (the packed executor's threads) pass one `lock` and
`async_save=False`: orbax CheckpointManagers saving at once from several threads of one
process collide on their temporary directories (FileExistsError / FileNotFoundError, seen with
orbax 0.12 on 6 packed cells), so each of their checkpoint calls then takes the lock in turn.
Saves of small cells take milliseconds, so the lock costs little.
"""

import contextlib
import functools
import logging
import signal
import threading
import time

import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as cm


def _in_turn(method):
  """The method under the checkpointer's lock (none: no lock)."""
  @functools.wraps(method)
  def call(self, *args, **kwargs):
    with self._lock:
      return method(self, *args, **kwargs)
  return call


class Checkpointer:

  def __init__(self, directory: str, *, every_steps: int = 1000, every_minutes: float = 30.0,
               keep: int = 2, async_save: bool = True, lock=None):
    self._lock = lock if lock is not None else contextlib.nullcontext()
    with self._lock:
      self._open(directory, every_steps, every_minutes, keep, async_save)

  def _open(self, directory, every_steps, every_minutes, keep, async_save) -> None:
    # The time floor is kept here rather than with orbax's ContinuousCheckpointingPolicy,
    # which runs a cross-host barrier on every call: too much per-step cost for small models.
    self.every_s = every_minutes * 60 if every_minutes and every_minutes > 0 else None
    self._last_save = time.monotonic()
    self._mgr = ocp.CheckpointManager(
        directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, enable_async_checkpointing=async_save,
            save_decision_policy=cm.AnySavePolicy([
                cm.FixedIntervalPolicy(max(1, every_steps)),
                cm.PreemptionCheckpointingPolicy()])))

  @_in_turn
  def maybe_save(self, step: int, state, force: bool = False) -> bool:
    if self._mgr.latest_step() == step:
      return False  # already saved at this step (an interval save just before a forced one)
    due = self.every_s is not None and time.monotonic() - self._last_save >= self.every_s
    saved = self._mgr.save(step, args=ocp.args.StandardSave(state), force=force or due)
    if saved:
      self._last_save = time.monotonic()
    return saved

  @_in_turn
  def restore_latest(self, abstract_state):
    """Returns (state, step) from the newest loadable checkpoint, or (None, 0)."""
    for step in sorted(self._mgr.all_steps(), reverse=True):
      try:
        state = self._mgr.restore(step, args=ocp.args.StandardRestore(abstract_state))
        return state, step
      except Exception as e:  # noqa: BLE001 - any failure means: try the previous one
        logging.warning("checkpoint at step %d failed to load (%s: %s); trying the previous one",
                        step, type(e).__name__, e)
    return None, 0

  def all_steps(self) -> list[int]:
    return list(self._mgr.all_steps())

  def wait(self) -> None:
    self._mgr.wait_until_finished()

  @_in_turn
  def close(self) -> None:
    self._mgr.wait_until_finished()
    self._mgr.close()


class StopFlag:
  """Set by SIGTERM (preemption) or SIGINT; the train loop saves and exits when it is set."""

  def __init__(self):
    self.event = threading.Event()
    self.reason = None
    self._previous = {}

  def install(self) -> "StopFlag":
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGTERM, signal.SIGINT):
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def uninstall(self) -> None:
    """Puts back the handlers `install` replaced (a finished run must not swallow Ctrl-C)."""
    for sig, handler in self._previous.items():
      signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    self._previous = {}

  def _handle(self, signum, _frame):
    self.reason = signal.Signals(signum).name
    self.event.set()

  def __bool__(self) -> bool:
    return self.event.is_set()
