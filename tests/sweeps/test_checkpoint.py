"""Checkpointer: interval saves, keep-n, exact restore, and the newest intact checkpoint
restored past damage (an empty or half-written step, flipped bytes, values that load but are
not the ones saved), each skip said in one line; on a local disk and on gs://."""

import json
import os
import shutil
import signal

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.sweeps.train import checkpoint
from chinchax.sweeps.train import stop as stop_lib


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
  flag = stop_lib.StopFlag().install()
  old = signal.getsignal(signal.SIGTERM)
  try:
    assert not flag
    os.kill(os.getpid(), signal.SIGTERM)
    assert flag and flag.reason == "SIGTERM"
  finally:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
  del old


# --------------------------------------------------------------------------- damage


def _saved(tmp_path, steps=(1, 2), root=None):
  """A checkpoint folder with a save at each step, of a state whose values are the step."""
  d = root or str(tmp_path / "ck")
  ck = checkpoint.Checkpointer(d, every_steps=1, every_minutes=0, keep=5)
  for s in steps:
    ck.maybe_save(s, _state(s))
  ck.close()
  return d


def _reopen_and_restore(d, caplog):
  caplog.clear()
  ck = checkpoint.Checkpointer(d, every_steps=1, every_minutes=0, keep=5)
  state, step = ck.restore_latest(_abstract(_state(0)))
  lines = [r.getMessage() for r in caplog.records if "skipped step" in r.getMessage()]
  return ck, state, step, lines


def test_empty_latest_step_folder_is_skipped_set_aside_and_saved_again(tmp_path, caplog):
  d = _saved(tmp_path)
  for p in (tmp_path / "ck" / "2").iterdir():  # what a save cut off by preemption leaves
    shutil.rmtree(p) if p.is_dir() else p.unlink()
  ck, state, step, lines = _reopen_and_restore(d, caplog)
  assert step == 1
  np.testing.assert_array_equal(state["params"]["w"], np.full((3, 2), 1.0))
  assert len(lines) == 1 and "skipped step 2 (no orbax metadata" in lines[0], lines
  assert "restoring step 1" in lines[0] and "ck.damaged/" in lines[0]
  (aside,) = os.listdir(tmp_path / "ck.damaged")
  assert aside.startswith("2-")
  # orbax no longer sees step 2: the resumed run saves it again, and that save restores.
  assert ck.all_steps() == [1]
  assert ck.maybe_save(2, _state(7), force=True)
  ck.close()
  ck, state, step, lines = _reopen_and_restore(d, caplog)
  assert step == 2 and lines == []
  np.testing.assert_array_equal(state["params"]["w"], np.full((3, 2), 7.0))
  ck.close()


def test_values_that_load_but_differ_fail_the_checksum(tmp_path, caplog):
  d = _saved(tmp_path, steps=(1, 2, 3))
  # Step 3's array data replaced by step 2's: every orbax file is intact and loads.
  shutil.rmtree(tmp_path / "ck" / "3" / "default")
  shutil.copytree(tmp_path / "ck" / "2" / "default", tmp_path / "ck" / "3" / "default")
  ck, state, step, lines = _reopen_and_restore(d, caplog)
  assert step == 2
  np.testing.assert_array_equal(state["params"]["w"], np.full((3, 2), 2.0))
  assert len(lines) == 1, lines
  assert ("skipped step 3 (checksum mismatch: the values of ['params']['w'] differ from those "
          "saved)") in lines[0]
  ck.close()


def test_flipped_bytes_in_the_latest_steps_array_data_fail_the_checksum(tmp_path, caplog):
  def state(v):  # a leaf big enough that its bytes are the largest file of the step
    w = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32) + v
    return {"params": {"w": jnp.asarray(w)}, "step": jnp.asarray(v)}

  d = str(tmp_path / "ck")
  ck = checkpoint.Checkpointer(d, every_steps=1, every_minutes=0, keep=5)
  for s in (1, 2):
    ck.maybe_save(s, state(s))
  ck.close()
  files = [p for p in (tmp_path / "ck" / "2" / "default").rglob("*") if p.is_file()]
  biggest = max(files, key=lambda p: p.stat().st_size)
  data = bytearray(biggest.read_bytes())
  for i in range(len(data) // 3, len(data) // 3 + 16):
    data[i] ^= 0xFF
  biggest.write_bytes(bytes(data))
  caplog.clear()
  ck = checkpoint.Checkpointer(d, every_steps=1, every_minutes=0, keep=5)
  restored, step = ck.restore_latest(_abstract(state(0)))
  lines = [r.getMessage() for r in caplog.records if "skipped step" in r.getMessage()]
  # The flipped bytes load without an error: only the checksum tells them from the saved ones.
  assert step == 1 and len(lines) == 1, lines
  assert "skipped step 2 (checksum mismatch: the values of ['params']['w'] differ" in lines[0]
  np.testing.assert_array_equal(restored["params"]["w"], state(1)["params"]["w"])
  ck.close()


def test_unreadable_orbax_metadata_is_skipped(tmp_path, caplog):
  d = _saved(tmp_path)
  (tmp_path / "ck" / "2" / checkpoint.METADATA).write_text('{"item_handlers": {"def')
  ck, _, step, lines = _reopen_and_restore(d, caplog)
  assert step == 1 and "skipped step 2 (orbax metadata unreadable" in lines[0]
  ck.close()


def test_every_step_damaged_starts_fresh(tmp_path, caplog):
  d = _saved(tmp_path)
  for s in ("1", "2"):
    (tmp_path / "ck" / s / checkpoint.METADATA).unlink()
  ck, state, step, lines = _reopen_and_restore(d, caplog)
  assert (state, step) == (None, 0)
  assert "skipped step 2 (" in lines[0] and "step 1 (" in lines[0]
  assert lines[0].endswith("no intact checkpoint: starting fresh")
  ck.close()


def test_another_models_state_is_a_user_error_and_nothing_moves(tmp_path):
  d = _saved(tmp_path)
  ck = checkpoint.Checkpointer(d, every_steps=1, every_minutes=0, keep=5)
  other = {"params": {"w": jax.ShapeDtypeStruct((4, 2), jnp.float32)},
           "step": jax.ShapeDtypeStruct((), jnp.int32)}
  with pytest.raises(UserError, match=r"ck/2 holds another model's state than this config's "
                     r"\(params/w: saved \(\(3, 2\), 'float32'\), the config makes \(\(4, 2\)"):
    ck.restore_latest(other)
  ck.close()
  assert sorted(os.listdir(tmp_path / "ck")) == ["1", "2"]
  assert not (tmp_path / "ck.damaged").exists()


def test_the_checksum_is_recorded_in_orbax_step_metadata(tmp_path):
  d = _saved(tmp_path, steps=(1,))
  meta = json.loads((tmp_path / "ck" / "1" / checkpoint.METADATA).read_text())
  recorded = meta["custom_metadata"][checkpoint.KEY]["fingerprint"]
  # An independent computation: numpy over the words of each leaf, modulo 2^32.
  u = np.full((3, 2), 1.0, np.float32).view(np.uint32).astype(np.uint64).ravel()
  w = (2654435761 * np.arange(6, dtype=np.uint64) + 1) % 2**32
  assert recorded["['params']['w']"] == f"{int(u.sum() % 2**32):08x}-{int((u * w).sum() % 2**32):08x}"
  assert recorded["['step']"] == "00000001-00000001"


def test_gs_uncommitted_step_is_deleted_and_a_damaged_one_copied_aside(fake_gcs, caplog):  # noqa: F811
  url = "gs://bkt/run/checkpoints"
  _saved(None, steps=(1, 2, 3), root=url)
  ck_dir = fake_gcs.local(url)
  (ck_dir / "3" / checkpoint.COMMIT_MARKER).unlink()  # a save cut off before its marker
  (ck_dir / "2" / checkpoint.METADATA).unlink()
  ck, state, step, lines = _reopen_and_restore(url, caplog)
  assert step == 1
  np.testing.assert_array_equal(state["params"]["w"], np.full((3, 2), 1.0))
  assert len(lines) == 1, lines
  assert "step 3 (not committed: a save cut off)" in lines[0]
  assert "step 2 (no orbax metadata" in lines[0]
  assert sorted(os.listdir(ck_dir)) == ["1"]
  (aside,) = os.listdir(fake_gcs.local(url + ".damaged"))
  assert aside.startswith("2-")  # kept (copied, then deleted): only the uncommitted one is gone
  assert (fake_gcs.local(url + ".damaged") / aside / "default").is_dir()
  ck.close()
  assert fake_gcs.stray_local_files() == []
