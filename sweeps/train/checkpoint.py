"""Checkpoints of a run through orbax: async saves every k steps and every t minutes, the last n
kept, a save on SIGTERM (preemption), and restore of the newest intact one.

Restore takes an abstract state (`jax.ShapeDtypeStruct`s carrying shardings), so a state saved
under one mesh restores under another.

Intact means three things, checked newest first:

1. Committed, with orbax's own metadata: the step folder holds a `_CHECKPOINT_METADATA` that
   parses and each item's `_METADATA` (and, on an object store, where a save commits by a
   marker rather than a rename, `commit_success.txt`). An empty or half-written folder, what
   a save cut off by preemption leaves on some filesystems, fails here.
2. It loads.
3. Its values are the ones saved: `sweeps.train.fingerprint` of the restored state equals the one
   recorded in the step's metadata at save time (written before the save commits, so a
   committed step always has it; steps saved before chinchax recorded one are taken on 1-2).

A step that fails is moved out of orbax's sight, to `<dir>.damaged/` (orbax would otherwise
count it as the latest and refuse to save that step again); an object store's uncommitted save
is deleted, as orbax's own cleanup would. The run says in one line which steps it skipped and
why. A step whose saved tree is another model's (the config changed) is not damage: that is a
UserError, and nothing is moved.

Runs that share a process (the packed executor's threads) pass one `lock` and
`async_save=False`: orbax CheckpointManagers saving at once from several threads of one
process collide on their temporary directories (FileExistsError / FileNotFoundError, seen with
orbax 0.12 on 6 packed cells), so each of their checkpoint calls then takes the lock in turn.
Saves of small cells take milliseconds, so the lock costs little; the every-step question "is a
save due?" is answered outside it.
"""

import contextlib
import functools
import json
import logging
import os
import time

import fsspec
import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from orbax.checkpoint import checkpoint_managers as cm

from chinchax import atomic, killpoints
from chinchax.errors import UserError
from chinchax.sweeps.train import fingerprint

METADATA = "_CHECKPOINT_METADATA"
COMMIT_MARKER = "commit_success.txt"
KEY = "chinchax"  # our entry in orbax's custom step metadata
UNCOMMITTED = "not committed: a save cut off"


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
    # Several processes save by steps only: a save due by one's clock and not another's would
    # leave it alone in the save's collectives. A stop is agreed by sweeps/hosts/watch.py instead.
    timed = every_minutes and every_minutes > 0 and jax.process_count() == 1
    self.every_s = every_minutes * 60 if timed else None
    self._every_steps = max(1, every_steps)
    self.directory = os.fspath(directory)
    self._last_save = time.monotonic()
    self._options = ocp.CheckpointManagerOptions(
        max_to_keep=keep, enable_async_checkpointing=async_save,
        cleanup_tmp_directories=True,  # a save cut off before its rename (local) or marker
        async_options=ocp.AsyncOptions(
            post_finalization_callback=lambda: killpoints.hit("checkpoint-commit"))
        if async_save else None,
        save_decision_policy=cm.AnySavePolicy([
            cm.FixedIntervalPolicy(max(1, every_steps)),
            cm.PreemptionCheckpointingPolicy()]))
    self.skipped: list[tuple[int, str]] = []  # (step, why), in the order found
    self._saved_fingerprints: dict[int, dict | None] = {}
    self._screen()
    self._mgr = self._manager()

  def _manager(self) -> ocp.CheckpointManager:
    return ocp.CheckpointManager(self.directory, options=self._options)

  # ------------------------------------------------------------------------- validation

  def _step_dirs(self) -> list[int]:
    return sorted((int(d) for d in atomic.listdir(self.directory) if d.isdigit()), reverse=True)

  def _screen(self) -> None:
    """Moves aside every step folder that is not committed with orbax's metadata."""
    for step in self._step_dirs():
      why = self._metadata_problem(step)
      if why is not None:
        self._set_aside(step, why, keep=why != UNCOMMITTED)

  def _metadata_problem(self, step: int) -> str | None:
    folder = os.path.join(self.directory, str(step))
    if atomic.is_remote(folder) and not atomic.exists(os.path.join(folder, COMMIT_MARKER)):
      return UNCOMMITTED
    text = atomic.read_text(os.path.join(folder, METADATA))
    if text is None:
      return "no orbax metadata: an empty or half-written folder, a save cut off"
    try:
      meta = json.loads(text)
      items = list(meta.get("item_handlers") or {})
    except (json.JSONDecodeError, AttributeError):
      return "orbax metadata unreadable: damaged"
    for item in items:
      if not atomic.exists(os.path.join(folder, item, "_METADATA")):
        return f"item {item!r} has no metadata: half-written"
    custom = meta.get("custom_metadata") or {}
    self._saved_fingerprints[step] = (custom.get(KEY) or {}).get("fingerprint")
    return None

  def _set_aside(self, step: int, why: str, keep: bool = True) -> None:
    """Out of orbax's sight: moved to `<dir>.damaged/` (`keep`) or deleted.

    Only a save that never committed on an object store is deleted (orbax's own cleanup of
    temporary folders would delete it too); anything committed is kept for a human to look at,
    as a step that failed to load may have met a passing fault rather than damage.
    """
    self.skipped.append((step, why))
    folder = os.path.join(self.directory, str(step))
    if jax.process_index() == 0:
      aside = os.path.join(self.directory.rstrip("/") + ".damaged",
                           f"{step}-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}")
      if not atomic.is_remote(folder):
        os.makedirs(os.path.dirname(aside), exist_ok=True)
        os.rename(folder, aside)
      else:
        if keep:  # no rename on an object store: a server-side copy, then the delete
          fs, src = fsspec.core.url_to_fs(folder)
          dst = fsspec.core.url_to_fs(aside)[1]
          atomic.retried("copy", folder, lambda: fs.copy(src, dst, recursive=True))
        atomic.retried("delete", folder, lambda: epath.Path(folder).rmtree(missing_ok=True))
    _barrier("chinchax-checkpoint-set-aside")

  def _tree_problem(self, step: int, abstract_state) -> str | None:
    """Why the step's saved tree cannot be read; UserError when it is another model's."""
    item = os.path.join(self.directory, str(step), "default")
    try:
      saved = _shapes(ocp.StandardCheckpointHandler().metadata(epath.Path(item)))
    except Exception as e:  # noqa: BLE001
      return f"its tree metadata does not load: {atomic.one_line(e)}"
    wanted = _shapes(abstract_state)
    if saved != wanted:
      key = next(k for k in sorted(set(saved) | set(wanted)) if saved.get(k) != wanted.get(k))
      raise UserError(
          f"{self.directory}/{step} holds another model's state than this config's ({key}: saved "
          f"{saved.get(key, 'nothing')}, the config makes {wanted.get(key, 'nothing')}); "
          "rerun with the config it was trained with, or use a new --workdir")
    return None

  def _report(self, restored: int | None) -> None:
    if not self.skipped:
      return
    steps = ", ".join(f"step {s} ({why})" for s, why in self.skipped)
    kept = any(why != UNCOMMITTED for _, why in self.skipped)
    where = f"; set aside in {self.directory.rstrip('/')}.damaged/" if kept else ""
    then = f"restoring step {restored}" if restored else "no intact checkpoint: starting fresh"
    logging.warning("%s: skipped %s%s; %s", self.directory, steps, where, then)

  # ------------------------------------------------------------------------- save, restore

  @property
  def every_steps(self) -> int:
    return self._every_steps

  def maybe_save(self, step: int, state, force: bool = False, steps: int = 1) -> bool:
    """Saves `state` at `step` when due (or `force`); `steps`: trained since the last call (a
    dispatch of several), each a hit of the kill point "step"."""
    killpoints.hit("step", times=steps)
    # "Not due" is read from this run's own step and clock, outside the shared lock: a packed
    # cell asked it every step under the lock and stalled while another cell saved. (orbax's
    # policies would cost ~1 ms a step to say so.)
    if not force and step % self._every_steps and not (
        self.every_s is not None and time.monotonic() - self._last_save >= self.every_s):
      return False
    return self._save(step, state, force)

  @_in_turn
  def _save(self, step: int, state, force: bool) -> bool:
    if self._mgr.latest_step() == step:
      return False  # already saved at this step (an interval save just before a forced one)
    due = self.every_s is not None and time.monotonic() - self._last_save >= self.every_s
    if not (force or due or self._mgr.should_save(step)):
      return False
    meta = {KEY: {"fingerprint": fingerprint.of(state)}}
    saved = self._mgr.save(step, args=ocp.args.StandardSave(state), force=True,
                           custom_metadata=meta)
    if saved:
      self._last_save = time.monotonic()
      killpoints.hit("checkpoint")
    return saved

  @_in_turn
  def restore_latest(self, abstract_state):
    """Returns (state, step) from the newest intact checkpoint, or (None, 0)."""
    found, state, step = len(self.skipped), None, 0
    for s in sorted(self._mgr.all_steps(), reverse=True):
      why, restored = self._tree_problem(s, abstract_state), None
      try:
        if why is None:
          restored = self._mgr.restore(s, args=ocp.args.StandardRestore(abstract_state))
      except Exception as e:  # noqa: BLE001 - any failure means: try the previous one
        why = f"does not load: {atomic.one_line(e)}"
      saved = self._saved_fingerprints.get(s)
      if why is None and saved:
        why = fingerprint.mismatch(saved, fingerprint.of(restored))
        why = why and f"checksum mismatch: {why}"
      if _all_agree(why is None):
        state, step = restored, s
        break
      self._set_aside(s, why or "does not load on another host")
    if len(self.skipped) > found:  # orbax caches the steps it has seen: start it afresh
      self._mgr.close()
      self._mgr = self._manager()
    self._report(step)
    return state, step

  def all_steps(self) -> list[int]:
    return list(self._mgr.all_steps())

  def wait(self) -> None:
    self._mgr.wait_until_finished()

  @_in_turn
  def close(self) -> None:
    self._mgr.wait_until_finished()
    self._mgr.close()


def _shapes(tree) -> dict[str, tuple]:
  """{'opt_state/1/0/mu/...': (shape, dtype)} of the array leaves, whatever the node types."""
  def name(k):
    for attr in ("key", "idx", "name"):
      if hasattr(k, attr):
        return str(getattr(k, attr))
    return str(k)
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {"/".join(name(k) for k in path): (tuple(x.shape), str(np.dtype(x.dtype)))
          for path, x in leaves if hasattr(x, "shape") and hasattr(x, "dtype")}


def _barrier(name: str) -> None:
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    multihost_utils.sync_global_devices(name)


def _all_agree(ok: bool) -> bool:
  """`ok` on every host (a restore that fails on one host fails the step for all)."""
  if jax.process_count() == 1:
    return ok
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  return bool(np.all(multihost_utils.process_allgather(np.asarray(ok))))
