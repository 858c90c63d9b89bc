"""`data.open_split`: the split `chinchax eval --split` scores, and its size in files and
tokens, counted by hand from the files and the documented hash rule (tests/helpers/
corpus_files.py), not through the builder."""

import os

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.sweeps.data import pipeline, text_builder
from tests.helpers.corpus_files import docs, held_out, stream, tokens, write

def cfg(tmp_path, corpus, **kw):
  return pipeline.DataConfig(corpus=corpus, data_dir=str(tmp_path / "tfds"), seq_len=16,
                             batch_size=2, **kw)


def test_the_splits_sizes_are_the_files_and_tokens_of_each_split(tmp_path):
  texts = docs(30, val=3)
  c = cfg(tmp_path, write(tmp_path / "corpus", texts))
  val = {r: t for r, t in texts.items() if held_out(r, t.encode(), 0.05)}
  train = {r: t for r, t in texts.items() if r not in val}
  assert len(val) == 3
  want = {"validation": val, "train": train, "all": texts}
  for split, files in want.items():
    ds, size = pipeline.open_split(c, split)
    n = tokens(files.values())
    assert (size.split, size.documents, size.tokens, size.unit) == (split, len(files), n, "files")
    assert ds.validation.shape == (n,)  # the stream evaluation reads is that split's
  # `all` of a text corpus: every file in path order, straight from the files.
  ds, _ = pipeline.open_split(c, "all")
  np.testing.assert_array_equal(ds.validation, stream(texts[r] for r in sorted(texts)))
  # The validation split is the one a run evaluates on, the train split the one it trains on.
  opened = pipeline.open_dataset(c)
  np.testing.assert_array_equal(pipeline.open_split(c, "validation")[0].validation,
                                opened.validation)
  np.testing.assert_array_equal(pipeline.open_split(c, "train")[0].validation, opened.train)
  np.testing.assert_array_equal(pipeline.open_split(c, "train")[0].train, opened.train)


def test_a_prepared_tfds_datasets_all_is_its_train_then_validation_split(tmp_path):
  texts = docs(20, val=2)
  c = cfg(tmp_path, write(tmp_path / "corpus", texts))
  name = text_builder.build(c.corpus, c.data_dir)
  by_name = pipeline.DataConfig(name=name, data_dir=c.data_dir, seq_len=16, batch_size=2)
  opened = pipeline.open_dataset(by_name)
  ds, size = pipeline.open_split(by_name, "all")
  n = tokens(texts.values())
  assert (size.documents, size.tokens, size.unit) == (20, n, "documents")
  np.testing.assert_array_equal(ds.validation,
                                np.concatenate([opened.train, opened.validation]))
  # A prefix of what an eval reads; the size stays the split's.
  ds, cut = pipeline.open_split(by_name, "all", max_tokens=opened.train.shape[0] + 5)
  assert cut == size
  np.testing.assert_array_equal(ds.validation, np.concatenate(
      [opened.train, opened.validation[:5]]))
  ds, cut = pipeline.open_split(by_name, "validation", max_tokens=7)
  np.testing.assert_array_equal(ds.validation, opened.validation[:7])
  assert cut.tokens == opened.validation.shape[0] and cut.documents == 2


def test_the_train_split_is_uncapped_but_training_keeps_its_cap(tmp_path):
  texts = docs(20, val=2)
  c = cfg(tmp_path, write(tmp_path / "corpus", texts), max_train_tokens=100)
  assert pipeline.open_dataset(c).train.shape == (100,)
  _, size = pipeline.open_split(c, "train")
  assert size.tokens == tokens(t for r, t in texts.items() if not held_out(r, t.encode()))


def test_a_corpus_too_small_to_split_is_scored_whole(tmp_path):
  texts = docs(3, val=0)
  c = cfg(tmp_path, write(tmp_path / "small", texts))
  for split in ("validation", "train"):
    with pytest.raises(text_builder.TooFewDocuments, match="3 documents, too few") as e:
      pipeline.open_split(c, split)
    assert (e.value.n, e.value.val_fraction) == (3, 0.05)
  ds, size = pipeline.open_split(c, "all")
  assert (size.documents, size.tokens) == (3, tokens(texts.values()))
  np.testing.assert_array_equal(ds.validation, stream(texts[r] for r in sorted(texts)))
  assert not os.path.exists(tmp_path / "tfds" / "chinchax_text")  # nothing was built


@pytest.mark.parametrize("split, texts, expect", [
    ("test", {"a.txt": "x" * 100}, "split 'test' is not one of validation, train, all"),
    ("all", {"a.txt": "tiny"}, "holds 5 tokens, less than one window of seq_len=16"),
    ("all", {"a.bin": "\udcff"}, "has no non-empty UTF-8 text files"),
])
def test_bad_splits_are_one_line(tmp_path, split, texts, expect):
  root = tmp_path / "c"
  for rel, text in texts.items():
    os.makedirs(root, exist_ok=True)
    (root / rel).write_bytes(text.encode("utf-8", "surrogateescape"))
  with pytest.raises(UserError, match=expect):
    pipeline.open_split(cfg(tmp_path, str(root)), split)
