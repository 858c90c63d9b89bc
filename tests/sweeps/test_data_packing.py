"""Packing and the (seed, step) sample order, on synthetic streams (no corpus, no TFDS)."""

import grain
import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.models import sharding
from chinchax.sweeps.data import packing
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.data import tokenizers


def _toy_dataset(T=1000, L=8, B=4, seed=0):
  cfg = pipeline.DataConfig(seq_len=L, batch_size=B, seed=seed)
  stream = np.arange(T, dtype=np.int64)  # token value == position: windows are identifiable
  order = packing.SampleOrder(packing.n_windows(T, L), seed)
  return pipeline.Dataset(cfg, "toy", tokenizers.BytesTokenizer(), stream, stream, order)


def test_pack_puts_eod_after_every_document():
  tok = tokenizers.BytesTokenizer()
  docs = ["ab", "", "é\n"]
  stream = packing.pack([tok.encode(d) for d in docs], tok.eod_id)
  want = [97, 98, 256, 256, 0xC3, 0xA9, 10, 256]
  np.testing.assert_array_equal(stream, want)


def test_windows_targets_are_inputs_shifted_by_one():
  stream = np.random.default_rng(0).integers(0, 258, size=101)
  b = packing.windows_to_batch(stream, np.array([3, 0, 11]), seq_len=8)
  for r, w in enumerate([3, 0, 11]):
    np.testing.assert_array_equal(b["inputs"][r], stream[w * 8: w * 8 + 8])
    np.testing.assert_array_equal(b["targets"][r], stream[w * 8 + 1: w * 8 + 9])
  assert b["inputs"].dtype == np.int32 and b["inputs"].shape == (3, 8)


def test_n_windows_covers_every_target_once():
  for T, L in [(17, 4), (16, 4), (5, 4), (4, 4), (1, 4)]:
    W = packing.n_windows(T, L)
    # W windows of L targets, all inside the stream, the next window would not fit.
    assert W * L + 1 <= T and (W + 1) * L + 1 > T


def test_batch_k_is_a_function_of_seed_and_step():
  ds = _toy_dataset()
  read = [pipeline.train_batch(ds, k)["inputs"] for k in range(7)]
  fresh = _toy_dataset()
  np.testing.assert_array_equal(pipeline.train_batch(fresh, 6)["inputs"], read[6])
  other = _toy_dataset(seed=1)
  assert not np.array_equal(pipeline.train_batch(other, 6)["inputs"], read[6])


def test_each_epoch_is_a_permutation_of_windows():
  order = packing.SampleOrder(W=37, seed=3)
  epochs = [order.windows(np.arange(e * 37, (e + 1) * 37)) for e in range(3)]
  for e in epochs:
    np.testing.assert_array_equal(np.sort(e), np.arange(37))
  assert not np.array_equal(epochs[0], epochs[1])  # reshuffled every epoch
  assert not np.array_equal(epochs[0], np.arange(37))  # actually shuffled


def test_windows_are_grains_permutation_across_blocks_and_epochs():
  """Looked up a block at a time (and kept across orders of one (W, seed)), the windows are
  still grain's shuffle of range(W) under the hashed seed, sample by sample: any samples, in
  any order, across block and epoch boundaries."""
  W, seed = 700, 5  # an epoch shorter than a block: samples past 2 BLOCK cross 4+ epochs
  s = int(np.random.SeedSequence(seed).generate_state(1)[0])
  perm = grain.MapDataset.range(W).shuffle(seed=s)
  samples = np.concatenate([np.arange(packing.BLOCK - 5, packing.BLOCK + 5),
                            [3 * packing.BLOCK + 1, 0, 699, 700, 2 * packing.BLOCK]])
  want = [perm[int(i)] for i in samples]
  np.testing.assert_array_equal(packing.SampleOrder(W, seed).windows(samples), want)
  np.testing.assert_array_equal(packing.SampleOrder(W, seed).windows(samples[::-1]), want[::-1])
  np.testing.assert_array_equal(packing.SampleOrder(W, seed).windows(samples[3:5]), want[3:5])
  assert packing.SampleOrder(W, seed).windows([]).shape == (0,)
  with pytest.raises(UserError, match="sample index -1 must be >= 0"):
    packing.SampleOrder(W, seed).windows([4, -1])


def test_adjacent_seeds_do_not_share_epochs():
  # grain keys epoch e with (s + e); the hashed seed keeps seed 1 from replaying seed 0's epoch 1.
  a, b = packing.SampleOrder(W=50, seed=0), packing.SampleOrder(W=50, seed=1)
  assert not np.array_equal(a.windows(np.arange(50, 100)), b.windows(np.arange(50)))


def test_batches_cover_samples_in_order_across_steps():
  ds = _toy_dataset(T=1000, L=8, B=4)
  got = np.concatenate([pipeline.train_batch(ds, k)["inputs"][:, 0] // 8 for k in range(10)])
  np.testing.assert_array_equal(got, ds.order.windows(np.arange(40)))


def test_rows_of_two_processes_assemble_the_global_batch():
  ds = _toy_dataset(B=8)
  parts = [pipeline.train_batch(ds, 3, np.arange(4 * p, 4 * p + 4))["inputs"] for p in (0, 1)]
  np.testing.assert_array_equal(np.concatenate(parts), pipeline.train_batch(ds, 3)["inputs"])


def test_indivisible_batch_is_refused():
  """One function decides whether a batch splits (models/sharding.py); its arithmetic."""
  with pytest.raises(UserError, match="batch 8 does not split over 3 data-parallel shards; use a multiple of 3"):
    sharding.check_batch(8, 3)
  with pytest.raises(UserError, match="in 2 microbatches .* use a multiple of 8"):
    sharding.check_batch(12, 4, grad_accum=2)
  with pytest.raises(UserError, match="batch 9 in 2 microbatches"):  # 9 rows: no 2 equal halves
    sharding.check_batch(9, 4, grad_accum=2)
  sharding.check_batch(16, 4, grad_accum=2)
  sharding.check_batch(12, 3, grad_accum=4)


def test_eval_batches_are_fixed_and_in_order():
  ds = _toy_dataset(T=1000, L=8, B=4)
  a = list(pipeline.eval_batches(ds, 100))
  assert len(a) == 4  # ceil(100 / 32)
  np.testing.assert_array_equal(np.concatenate([b["inputs"][:, 0] for b in a]), np.arange(16) * 8)
  with pytest.raises(UserError, match="validation split"):
    pipeline.n_eval_batches(ds, 1000)
