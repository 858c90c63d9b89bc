"""The TFDS text builder: array_record splits without TensorFlow, stable hash split, reuse."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow_datasets as tfds

from chinchax.errors import UserError
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.data import text_builder


def write_corpus(root, n=40):
  """n small documents in nested folders, plus files the builder must skip."""
  rng = np.random.default_rng(0)
  for i in range(n):
    d = os.path.join(root, f"part{i % 3}")
    os.makedirs(d, exist_ok=True)
    words = " ".join(f"w{j}" for j in rng.integers(0, 100, size=rng.integers(5, 60)))
    with open(os.path.join(d, f"doc{i}.txt"), "w", encoding="utf-8") as f:
      f.write(f"document {i}: {words} — é\n")
  open(os.path.join(root, "empty.txt"), "w").close()
  with open(os.path.join(root, "binary.bin"), "wb") as f:
    f.write(b"\xff\xfe\x00bad")
  os.makedirs(os.path.join(root, ".git"))
  with open(os.path.join(root, ".git", "HEAD"), "w") as f:
    f.write("hidden\n")
  return root


def split_docs(name, data_dir):
  src = tfds.data_source(name, data_dir=data_dir)
  return {s: {r["path"].decode(): r["text"].decode() for r in src[s]} for s in src}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_corpus(str(tmp_path_factory.mktemp("corpus")))


def test_splits_are_disjoint_and_cover_the_corpus(corpus, tmp_path):
  name = text_builder.build(corpus, str(tmp_path), val_fraction=0.25)
  got = split_docs(name, str(tmp_path))
  train, val = got["train"], got["validation"]
  assert not set(train) & set(val)
  want = {f"part{i % 3}/doc{i}.txt" for i in range(40)}  # skipped: empty, binary, hidden
  assert set(train) | set(val) == want
  assert 0 < len(val) < 20  # ~25% of 40
  for rel, text in {**train, **val}.items():
    with open(os.path.join(corpus, rel), encoding="utf-8") as f:
      assert f.read() == text


def test_split_is_stable_across_builds_and_machines(corpus, tmp_path):
  a = split_docs(text_builder.build(corpus, str(tmp_path / "a"), 0.25), str(tmp_path / "a"))
  moved = shutil.copytree(corpus, str(tmp_path / "elsewhere" / "corpus"))  # another root
  b = split_docs(text_builder.build(moved, str(tmp_path / "b"), 0.25), str(tmp_path / "b"))
  assert set(a["validation"]) == set(b["validation"])
  assert set(a["train"]) == set(b["train"])
  # Independent check of the rule: the hash of (relpath, content) decides the split.
  for rel, text in a["validation"].items():
    assert text_builder.is_validation(rel, text.encode("utf-8"), 0.25)


def test_second_build_reuses_the_prepared_dataset(corpus, tmp_path, monkeypatch):
  name = text_builder.build(corpus, str(tmp_path))

  def fail(*a, **k):
    raise AssertionError("rebuilt a prepared dataset")

  monkeypatch.setattr(text_builder.TextCorpusBuilder, "download_and_prepare", fail)
  assert text_builder.build(corpus, str(tmp_path)) == name


def test_changed_corpus_gets_a_new_dataset(tmp_path):
  root = write_corpus(str(tmp_path / "c"), n=6)
  first = text_builder.build(root, str(tmp_path / "d"))
  with open(os.path.join(root, "part0", "new.txt"), "w") as f:
    f.write("a new document\n")
  assert text_builder.build(root, str(tmp_path / "d")) != first


def test_named_dataset_loads_like_the_corpus(corpus, tmp_path):
  kw = dict(data_dir=str(tmp_path), seq_len=16, batch_size=4, val_fraction=0.25)
  by_path = pipeline.open_dataset(pipeline.DataConfig(corpus=corpus, **kw))
  by_name = pipeline.open_dataset(pipeline.DataConfig(name=by_path.tfds_name, **kw))
  np.testing.assert_array_equal(by_name.train, by_path.train)
  np.testing.assert_array_equal(pipeline.train_batch(by_name, 2)["targets"],
                                pipeline.train_batch(by_path, 2)["targets"])
  # The stream is the documents in stored order, each followed by EOD.
  docs = [r["text"].decode() for r in tfds.data_source(by_path.tfds_name,
                                                       data_dir=str(tmp_path))["train"]]
  want = b"".join(d.encode("utf-8") + b"\0" for d in docs)
  eod = by_path.tokenizer.eod_id
  got = bytes(0 if t == eod else int(t) for t in by_path.train)
  assert got == want


@pytest.mark.slow
def test_build_runs_with_tensorflow_unimportable(corpus, tmp_path):
  code = (
      "import sys\n"
      "class Hide:  # every finder answers 'no such module' for tensorflow: not installed\n"
      "  def __init__(self, f): self.f = f\n"
      "  def find_spec(self, name, path=None, target=None):\n"
      "    if name.split('.')[0] == 'tensorflow': return None\n"
      "    return self.f.find_spec(name, path, target)\n"
      "sys.meta_path[:] = [Hide(f) for f in sys.meta_path]\n"
      "from chinchax.sweeps.data import pipeline\n"
      f"ds = pipeline.open_dataset(pipeline.DataConfig(corpus={corpus!r}, "
      f"data_dir={str(tmp_path)!r}, seq_len=16, batch_size=2))\n"
      "print(pipeline.train_batch(ds, 0)['inputs'].shape, 'tensorflow' in sys.modules)\n")
  env = dict(os.environ, PYTHONPATH=os.getcwd())
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
  assert out.returncode == 0, out.stderr[-2000:]
  assert "(2, 16) False" in out.stdout


def test_missing_and_empty_corpus(tmp_path):
  with pytest.raises(UserError, match="does not exist"):
    text_builder.build(str(tmp_path / "nope"), str(tmp_path / "d"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(UserError, match="matches no files"):
    text_builder.build(str(tmp_path / "empty"), str(tmp_path / "d"))
  with pytest.raises(UserError, match="matches no files"):
    text_builder.build(str(tmp_path / "*.nothing"), str(tmp_path / "d"))
  (tmp_path / "blank").mkdir()
  (tmp_path / "blank" / "a.txt").write_text("")
  with pytest.raises(UserError, match="no non-empty UTF-8"):
    text_builder.build(str(tmp_path / "blank"), str(tmp_path / "d"))


def test_stdlib_corpus_excludes_tests_and_site_packages():
  c = text_builder.find_corpus("stdlib")
  rel = [os.path.relpath(f, c.root).split(os.sep) for f in c.files]
  assert len(rel) > 100 and all(p[-1].endswith(".py") for p in rel)
  assert not any({"site-packages", "test", "tests"} & set(p) for p in rel)
  assert ["os.py"] in rel


def test_stdlib_walk_finds_what_a_glob_of_the_tree_finds(tmp_path):
  """The pruned walk against the plain recursive glob, filtered afterwards, on a tree with
  excluded, hidden and symlinked folders: the same files (so the same dataset name)."""
  for rel in ("a.py", "b.txt", ".hidden.py", "pkg/c.py", "pkg/tests/t.py", "pkg/.cache/d.py",
              "site-packages/jax/e.py", "deep/er/f.py", "__pycache__/g.py"):
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text("x = 1\n")
  os.symlink(tmp_path / "deep", tmp_path / "linked")
  root = str(tmp_path)
  import glob  # pylint: disable=g-import-not-at-top
  want = sorted(f for f in glob.glob(os.path.join(root, "**", "*.py"), recursive=True)
                if not text_builder._STDLIB_EXCLUDE.intersection(  # pylint: disable=protected-access
                    os.path.relpath(f, root).split(os.sep)))
  got = sorted(text_builder._stdlib_files(root))  # pylint: disable=protected-access
  assert got == want and os.path.join(root, "linked", "er", "f.py") in got and len(got) == 4


def test_corpus_too_small_for_two_splits(tmp_path):
  (tmp_path / "one").mkdir()
  (tmp_path / "one" / "a.txt").write_text("just one document\n")
  with pytest.raises(UserError, match="too few to give both splits"):
    text_builder.build(str(tmp_path / "one"), str(tmp_path / "d"))
