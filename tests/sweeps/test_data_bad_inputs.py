"""Bad data configs are refused with one clear UserError line before anything is computed."""

import dataclasses

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.sweeps.data import pipeline


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  root = tmp_path_factory.mktemp("bad")
  corpus = root / "corpus"
  corpus.mkdir()
  for i in range(30):
    (corpus / f"d{i}.txt").write_text(f"short document number {i}\n" * (1 + i % 3))
  cfg = pipeline.DataConfig(corpus=str(corpus), data_dir=str(root / "tfds"), seq_len=8,
                            batch_size=2, val_fraction=0.3)
  return cfg, pipeline.open_dataset(cfg)


def refused(cfg, match):
  with pytest.raises(UserError, match=match) as e:
    pipeline.open_dataset(cfg)
  assert "\n" not in str(e.value)
  return str(e.value)


def test_unknown_tfds_name(built, tmp_path):
  cfg, _ = built
  # TFDS cannot tell a misspelt name from a catalogue dataset it fails to import (c4 needs
  # TensorFlow): the line names the path looked at, where a typo shows.
  msg = refused(pipeline.DataConfig(name="no_such_dataset_xyz", data_dir=cfg.data_dir),
                "TFDS dataset 'no_such_dataset_xyz' is not prepared: nothing at ")
  assert f"{cfg.data_dir}/no_such_dataset_xyz " in msg


def test_known_name_not_prepared_here(tmp_path):
  msg = refused(pipeline.DataConfig(name="lm1b", data_dir=str(tmp_path)), "not prepared")
  assert f"nothing at {tmp_path}/lm1b/" in msg and "chinchax data tfds lm1b" in msg


def test_unknown_text_key(built):
  cfg, ds = built
  refused(pipeline.DataConfig(name=ds.tfds_name, data_dir=cfg.data_dir, text_key="content"),
          "no feature 'content'; text_key is one of: ")


def test_seq_len_longer_than_corpus(built):
  cfg, ds = built
  L = ds.unique_tokens  # one token short of a single window
  msg = refused(pipeline.DataConfig(corpus=cfg.corpus, data_dir=cfg.data_dir, seq_len=L,
                                    val_fraction=0.3), "longer than the")
  assert f"{ds.unique_tokens}-token train split" in msg
  ok = pipeline.open_dataset(pipeline.DataConfig(corpus=cfg.corpus, data_dir=cfg.data_dir,
                                                 seq_len=L - 1, val_fraction=0.3))
  assert ok.order.W == 1


def test_bad_sizes_and_seed(built):
  cfg, _ = built
  for kw, match in [(dict(seq_len=0), "must be positive"), (dict(batch_size=-1), "positive"),
                    (dict(seed=-1), "seed=-1"), (dict(max_train_tokens=4), "max_train_tokens")]:
    refused(pipeline.DataConfig(corpus=cfg.corpus, data_dir=cfg.data_dir, **kw), match)


def test_eval_larger_than_validation_split(built):
  _, ds = built
  with pytest.raises(UserError, match="validation split"):
    list(pipeline.eval_batches(ds, 10**7))


def test_max_train_tokens_caps_the_stream(built):
  cfg, ds = built
  capped = pipeline.open_dataset(pipeline.DataConfig(**{**cfg.__dict__, "max_train_tokens": 100}))
  assert capped.unique_tokens == 100
  np.testing.assert_array_equal(capped.train, ds.train[:100])
  assert capped.epochs_for(capped.epoch_tokens * 3) == 3


def test_epochs_count_whole_windows_of_the_unique_tokens(built):
  _, ds = built
  assert ds.unique_tokens == ds.train.shape[0]
  assert ds.epoch_tokens == (ds.train.shape[0] - 1) // ds.cfg.seq_len * ds.cfg.seq_len
  assert ds.epochs_for(10 * ds.epoch_tokens) == 10


def test_a_dataset_cut_for_another_batch_is_the_one_opened_for_it(built):
  """What a sweep hands its runs (`pipeline.with_config`) is what each would have opened."""
  cfg, ds = built
  other = dataclasses.replace(cfg, batch_size=3, seq_len=4, seed=7)
  view, fresh = pipeline.with_config(ds, other), pipeline.open_dataset(other)
  assert view.order == fresh.order and view.cfg == fresh.cfg
  for k in (0, 5):
    for a, b in ((pipeline.train_batch(view, k), pipeline.train_batch(fresh, k)),
                 (pipeline.eval_batch(view, k), pipeline.eval_batch(fresh, k))):
      for key in a:
        np.testing.assert_array_equal(a[key], b[key])
  # Other streams (a cap on the unique tokens, another corpus): not a cut of these.
  assert pipeline.with_config(ds, dataclasses.replace(cfg, max_train_tokens=50)) is None
  assert pipeline.with_config(ds, dataclasses.replace(cfg, corpus="/elsewhere")) is None
  with pytest.raises(UserError, match="must be positive"):
    pipeline.with_config(ds, dataclasses.replace(cfg, batch_size=0))
