"""Curricula: weights against their closed forms, realised source proportions within binomial
error, batches that are a function of (seed, step), and per-source token counts replayed from
(seed, step) that match the rows actually served."""

import math

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.sweeps.data import mixture, packing, pipeline, tokenizers

B, L = 64, 8


def source(lo: int, T: int = 4000, seed: int = 0) -> pipeline.Dataset:
  """A toy source whose tokens lie in [lo, lo + 100): a row tells which source it came from."""
  cfg = pipeline.DataConfig(seq_len=L, batch_size=B, seed=seed)
  stream = lo + np.random.default_rng(lo).integers(0, 100, T)
  return pipeline.Dataset(cfg, f"toy{lo}", tokenizers.BytesTokenizer(), stream, stream,
                          packing.SampleOrder(packing.n_windows(T, L), seed))


def toy_mixture(curriculum, total_steps=400, seed=7):
  cfg = pipeline.DataConfig(seq_len=L, batch_size=B, seed=seed)
  srcs = tuple(source(100 * s, seed=mixture._seed(seed, s)) for s in range(curriculum.n_sources))
  return mixture.Mixture(cfg, tuple(f"s{s}" for s in range(len(srcs))), srcs, curriculum,
                         total_steps)


def test_weights_follow_the_schedule():
  st = mixture.Curriculum(((1, 0, 0), (1, 1, 2)), "stages", (0.0, 0.6))
  np.testing.assert_allclose(st.weights_at(0.3), [1, 0, 0])
  np.testing.assert_allclose(st.weights_at(0.6), [0.25, 0.25, 0.5])
  lin = mixture.Curriculum(((1, 0), (0, 1)), "linear")
  cos = mixture.Curriculum(((1, 0), (0, 1)), "cosine")
  for t in (0.0, 0.25, 0.5, 0.9, 1.0):
    np.testing.assert_allclose(lin.weights_at(t), [1 - t, t], atol=1e-12)
    a = 0.5 - 0.5 * math.cos(math.pi * t)
    np.testing.assert_allclose(cos.weights_at(t), [1 - a, a], atol=1e-12)
  with pytest.raises(UserError, match="boundaries"):
    mixture.Curriculum(((1, 0), (0, 1)), "stages", (0.0,))
  with pytest.raises(UserError, match="two weight tuples"):
    mixture.Curriculum(((1, 0),), "linear")


def served_sources(mix, step) -> np.ndarray:
  """Source of each row of batch `step`, read off the tokens themselves."""
  return mixture.train_batch(mix, step)["inputs"][:, 0] // 100


def test_realised_proportions_match_the_weights():
  mix = toy_mixture(mixture.Curriculum(((0.2, 0.8), (0.7, 0.3)), "stages", (0.0, 0.5)))
  for steps, p in ((range(0, 100), 0.2), (range(200, 300), 0.7)):  # P(source 0) per stage
    hits = np.concatenate([served_sources(mix, k) == 0 for k in steps])
    n = hits.size
    assert abs(hits.mean() - p) < 4 * math.sqrt(p * (1 - p) / n)  # binomial: 4 sigma
  # A soft mix: the fraction at each step tracks w(t); pooled error over 400 steps.
  soft = toy_mixture(mixture.Curriculum(((1, 0), (0, 1)), "linear"))
  got = np.array([(served_sources(soft, k) == 1).mean() for k in range(400)])
  want = np.arange(400) / 400
  var = np.sum(want * (1 - want) / B)
  assert abs(np.sum(got - want)) < 4 * math.sqrt(var)


def test_batches_are_a_function_of_seed_and_step():
  cur = mixture.Curriculum(((0.5, 0.5), (0.1, 0.9)), "cosine")
  a, b = toy_mixture(cur), toy_mixture(cur)  # a "restarted" process rebuilds everything
  for k in (0, 13, 250, 399):
    for key in ("inputs", "targets"):
      np.testing.assert_array_equal(mixture.train_batch(a, k)[key], mixture.train_batch(b, k)[key])
  # Rows fetched on their own (one process's share) are the same rows.
  rows = np.arange(10, 20)
  np.testing.assert_array_equal(mixture.train_batch(a, 42, rows)["inputs"],
                                mixture.train_batch(a, 42)["inputs"][rows])
  other = toy_mixture(cur, seed=8)
  assert not np.array_equal(mixture.train_batch(a, 5)["inputs"],
                            mixture.train_batch(other, 5)["inputs"])


def test_token_counts_replay_what_was_served():
  mix = toy_mixture(mixture.Curriculum(((0.3, 0.7), (0.9, 0.1)), "linear"), total_steps=60)
  served = np.zeros(2, np.int64)
  for k in range(60):
    served += np.bincount(served_sources(mix, k), minlength=2) * L
    if k in (0, 17, 59):
      np.testing.assert_array_equal(mixture.tokens_until(mix, k + 1), served)
