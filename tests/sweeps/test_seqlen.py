"""Sequence-length warmup: the doubling schedule, batches that keep tokens per step and the
data order, FLOPs at the length used, and a tiny run that trains through the stages."""

import os

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from chinchax.scaling.runs import records
from chinchax.scaling.runs import conventions
from chinchax.errors import UserError
from chinchax.sweeps.train import metrics
from chinchax.sweeps.train import loop
from chinchax.sweeps.data import packing, pipeline, seqlen, tokenizers


def toy(B=4, L=16, T=5000):
  cfg = pipeline.DataConfig(seq_len=L, batch_size=B, seed=3)
  stream = np.random.default_rng(0).integers(0, 258, T)
  order = packing.SampleOrder(packing.n_windows(T, L), 3)
  return pipeline.Dataset(cfg, "toy", tokenizers.BytesTokenizer(), stream, stream, order)


def test_doubling_stages():
  s = seqlen.make(128, 32, 0.5, 100)  # two doublings over the first 50 steps
  assert s.stages == ((0, 32), (25, 64), (50, 128))
  assert [s.length_at(k) for k in (0, 24, 25, 49, 50, 99)] == [32, 32, 64, 64, 128, 128]
  assert seqlen.make(128, 0, 0.5, 100).stages == ((0, 128),)
  with pytest.raises(UserError, match="power"):
    seqlen.make(128, 48, 0.5, 100)


def test_short_batches_keep_tokens_and_order():
  ds = toy()
  B, L = ds.cfg.batch_size, ds.cfg.seq_len
  sharding = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("data",)), P("data"))
  for step, Lk in ((0, 4), (7, 8), (3, 16)):
    full = pipeline.train_batch(ds, step)
    short = {k: np.asarray(v) for k, v in seqlen.global_batch(ds, step, sharding, Lk).items()}
    assert short["inputs"].shape == (B * L // Lk, Lk)
    assert short["inputs"].size == B * L  # tokens per batch are constant
    for k in ("inputs", "targets"):  # the same tokens in the same order
      np.testing.assert_array_equal(short[k].ravel(), full[k].ravel())
    # Each target is still the stream's next token after its input.
    assert np.array_equal(short["inputs"][:, 1:], short["targets"][:, :-1])


def test_a_process_loads_only_its_rows():
  ds, L = toy(), 4
  r = ds.cfg.seq_len // L
  whole = seqlen.short_rows_batch(ds, 5, np.arange(ds.cfg.batch_size * r), L)
  mine = np.arange(6, 11)  # rows spanning parts of two full rows
  part = seqlen.short_rows_batch(ds, 5, mine, L)
  np.testing.assert_array_equal(part["inputs"], whole["inputs"][mine])


def test_flops_by_the_length_used():
  shape = conventions.Shape(d_model=64, n_layers=2, n_heads=2, d_ff=192, vocab_size=258,
                            seq_len=256)
  s = seqlen.make(256, 32, 0.3, 200)
  tps = 4096
  for k in (0, 17, 60, 61, 200):
    brute = sum(tps * conventions.flops_per_token(
        conventions.Shape(**{**shape.__dict__, "seq_len": s.length_at(i)}), "chinchilla")
        for i in range(k))
    assert seqlen.flops_until(s, shape, k, tps) == pytest.approx(brute, rel=1e-12)
  full = 200 * tps * conventions.flops_per_token(shape, "chinchilla")
  assert seqlen.flops_until(s, shape, 200, tps) < full  # shorter contexts cost less attention
  assert seqlen.flops_until(s, shape, 200, tps, "6ND") == pytest.approx(
      200 * tps * conventions.flops_per_token(shape, "6ND"))


@pytest.mark.slow
def test_tiny_run_trains_through_the_stages(tmp_path, tiny_config):
  c = tiny_config
  c.tokens, c.seq_len_start, c.seq_len_warmup_fraction = 12 * 256, 8, 0.5
  c.log_every, c.eval_every = 1, 100
  rec = loop.train(c, str(tmp_path), quiet=True)
  assert rec["status"] == "done"
  rows = [r for r in records.read_metrics(os.path.join(str(tmp_path), "metrics.jsonl")) if "lr" in r]
  s = seqlen.make(32, 8, 0.5, 12)
  assert [r["seq_len"] for r in rows] == [s.length_at(r["step"] - 1) for r in rows]
  assert {r["seq_len"] for r in rows} == {8, 16, 32}
  shape = conventions.Shape(**rec["shape"])
  assert rec["flops_chinchilla"] == pytest.approx(seqlen.flops_until(s, shape, 12, 256))
  assert rec["flops_chinchilla"] < conventions.training_flops(shape, rec["D"], "chinchilla")
