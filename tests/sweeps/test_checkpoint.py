"""Checkpointer: interval saves, keep-n, exact restore, fallback past a broken checkpoint."""

import os
import shutil
import signal

import jax
import jax.numpy as jnp
import numpy as np

from chinchax.sweeps import checkpoint


def _state(v):
  return {"params": {"w": jnp.full((3, 2), v, jnp.float32)}, "step": jnp.asarray(int(v))}


def _abstract(state):
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
                      state)


def test_interval_keep_and_restore(tmp_path):
  ck = checkpoint.Checkpointer(str(tmp_path / "ck"), every_steps=2, every_minutes=0, keep=2)
  saved = [s for s in range(1, 8) if ck.maybe_save(s, _state(s))]
  ck.wait()
  assert saved == [2, 4, 6]
  assert ck.all_steps() == [4, 6]
  state, step = ck.restore_latest(_abstract(_state(0)))
  assert step == 6
  np.testing.assert_array_equal(state["params"]["w"], np.full((3, 2), 6.0))
  ck.close()


def test_broken_latest_falls_back_to_previous(tmp_path, caplog):
  d = tmp_path / "ck"
  ck = checkpoint.Checkpointer(str(d), every_steps=1, every_minutes=0, keep=3)
  for s in (1, 2):
    ck.maybe_save(s, _state(s))
  ck.close()
  # Wipe the newest checkpoint's array data: its directory exists but cannot be read.
  for root, _, files in os.walk(d / "2"):
    for f in files:
      if not f.startswith("_CHECKPOINT_METADATA"):
        os.remove(os.path.join(root, f))
  ck = checkpoint.Checkpointer(str(d), every_steps=1, every_minutes=0, keep=3)
  state, step = ck.restore_latest(_abstract(_state(0)))
  assert step == 1
  np.testing.assert_array_equal(state["params"]["w"], np.full((3, 2), 1.0))
  assert "skipped step 2 (item 'default' has no metadata" in caplog.text
  ck.close()


def test_no_checkpoint_gives_none(tmp_path):
  ck = checkpoint.Checkpointer(str(tmp_path / "empty"), every_steps=5, every_minutes=0)
  assert ck.restore_latest(_abstract(_state(0))) == (None, 0)
  ck.close()


def test_stop_flag_catches_sigterm():
  flag = checkpoint.StopFlag().install()
  old = signal.getsignal(signal.SIGTERM)
  try:
    assert not flag
    os.kill(os.getpid(), signal.SIGTERM)
    assert flag and flag.reason == "SIGTERM"
  finally:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
  del old
