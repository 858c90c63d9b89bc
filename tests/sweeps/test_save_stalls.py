"""Saves and evals that don't stall: the "is a save due?" check outside the shared lock, evals
fetched in one transfer with the same loss, a WSD stable run that evaluates only at its end,
and branches that save no final checkpoint yet resume to the bit."""

import os
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chinchax.scaling.runs import records
from chinchax.sweeps import data, wsd
from chinchax.sweeps.configs import train as train_configs
from chinchax.sweeps.train import checkpoint, hooks


def test_a_save_not_due_does_not_wait_for_the_shared_lock(tmp_path):
  lock = threading.Lock()
  ckpt = checkpoint.Checkpointer(str(tmp_path / "ckpt"), every_steps=100, every_minutes=0,
                                 async_save=False, lock=lock)
  state = {"w": jnp.ones(3)}
  answers = []
  with lock:  # another cell of the packed executor is saving
    t = threading.Thread(target=lambda: answers.append(ckpt.maybe_save(7, state)), daemon=True)
    t.start()
    t.join(timeout=20)
    assert answers == [False]  # answered while the lock was held
  assert ckpt.maybe_save(100, state) is True  # a due save still takes the lock and saves
  ckpt.close()


def test_an_eval_is_fetched_in_one_transfer_and_its_loss_is_the_per_batch_sum(monkeypatch):
  rng = np.random.default_rng(3)
  batches = [{"inputs": rng.integers(0, 50, (4, 6)).astype(np.int32)} for _ in range(9)]
  monkeypatch.setattr(data, "global_eval_batch", lambda ds, k, sharding: batches[k])
  eval_step = jax.jit(lambda w, b: {"loss_sum": jnp.sum(jnp.sin(b["inputs"] * w)),
                                    "tokens": jnp.float32(b["inputs"].size + b["inputs"][0, 0])})
  w = jnp.float32(0.37)
  transfers = []
  real_get = jax.device_get
  monkeypatch.setattr(hooks.jax, "device_get", lambda x: transfers.append(1) or real_get(x))
  got = hooks.eval_loss_on(eval_step, w, None, len(batches), None)
  assert len(transfers) == 1
  # The old batching: each batch's sums read back at once and added in float64, in order.
  total = count = 0.0
  for b in batches:
    total += float(np.sum(np.sin(b["inputs"].astype(np.float32) * np.float32(0.37)),
                          dtype=np.float32))
    count += float(b["inputs"].size + b["inputs"][0, 0])
  assert got == pytest.approx(total / count, rel=1e-6)


def _wsd_config(tmp_path):
  c = train_configs.get_config("tiny")
  c.model.update(d_model=16, n_layers=1, n_heads=2, d_ff=40)
  c.name, c.batch_size = "wsd", 8
  tps = c.batch_size * c.seq_len
  c.tokens = float(24 * tps)
  c.optimizer.update(peak_lr=3e-3, warmup_steps=2)
  c.eval_every, c.log_every, c.checkpoint.every_steps = 4, 1000, 1000
  c.wsd.branches, c.wsd.decay_fraction = (16.0 * tps, 24.0 * tps), 0.25
  return c


def test_the_stable_run_evaluates_at_its_end_unless_asked(tmp_path):
  c = _wsd_config(tmp_path)
  branches = wsd.branches_of(c)
  assert wsd.main_config(c, branches).eval_every == max(b.start for b in branches)
  c.wsd.stable_evals = True
  assert wsd.main_config(c, branches).eval_every == c.eval_every


def _eval_steps(workdir):
  return [r["step"] for r in records.read_metrics(os.path.join(workdir, "metrics.jsonl"))
          if r.get("eval_loss") is not None]


@pytest.mark.slow
def test_branches_save_no_final_checkpoint_and_resume_to_the_bit(tmp_path):
  c = _wsd_config(tmp_path)
  wd = str(tmp_path / "wsd")
  out = wsd.train_wsd(c, wd, quiet=True)
  assert out.status == "done" and len(out.branches) == 2
  last = max(b.start for b in wsd.branches_of(c))
  assert _eval_steps(wd) == [last]  # no periodic eval of the stable run, its final one
  for b in wsd.branches_of(c):
    bwd = wsd.branch_workdir(c, wd, b)
    assert [d for d in os.listdir(os.path.join(bwd, "checkpoints")) if d.isdigit()] == []
    assert _eval_steps(bwd)[-1] == b.total_steps
  # The second branch killed after its steps, before its record: it trains again from its
  # branch point and ends at the same state, to the bit.
  b = wsd.branch_workdir(c, wd, wsd.branches_of(c)[1])
  os.remove(os.path.join(b, "result.json"))
  again = wsd.train_wsd(c, wd, quiet=True)
  assert again.status == "done"
  assert again.branches[1]["eval_loss"] == out.branches[1]["eval_loss"]
  assert again.branches[1]["train_loss"] == out.branches[1]["train_loss"]
