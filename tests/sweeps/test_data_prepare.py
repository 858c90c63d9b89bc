"""`chinchax data`: raw text (jsonl, parquet, plain text; local or gs://) into array_record
shards the pipeline reads, TFDS_DATA_DIR honoured, TensorFlow never needed."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow_datasets as tfds

from chinchax.errors import UserError
from chinchax import cli
from chinchax.sweeps.data import pipeline, prepare, text_builder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_inputs(root) -> dict[str, str]:
  """A corpus in every input format; returns {document key: text} as prepare should key it."""
  rng = np.random.default_rng(0)
  words = "alpha beta gamma delta epsilon zeta eta theta".split()
  docs = {}
  os.makedirs(os.path.join(root, "json"), exist_ok=True)
  with open(os.path.join(root, "json", "a.jsonl"), "w", encoding="utf-8") as f:
    for i in range(40):
      text = f"jsonl {i}: " + " ".join(rng.choice(words, 30)) + " é"
      f.write(json.dumps({"text": text, "id": i}) + "\n")
      docs[f"json/a.jsonl:{i}"] = text
    f.write("\n")  # a blank line is skipped
  with gzip.open(os.path.join(root, "json", "b.json.gz"), "wt", encoding="utf-8") as f:
    for i in range(30):
      text = f"gzip {i}: " + " ".join(rng.choice(words, 20))
      f.write(json.dumps({"text": text}) + "\n")
      docs[f"json/b.json.gz:{i}"] = text
  texts = [f"parquet {i}: " + " ".join(rng.choice(words, 25)) for i in range(30)]
  pq.write_table(pa.table({"text": texts, "n": list(range(30))}),
                 os.path.join(root, "c.parquet"))
  docs.update({f"c.parquet:{i}": t for i, t in enumerate(texts)})
  with open(os.path.join(root, "d.txt"), "w", encoding="utf-8") as f:
    f.write("one plain-text file is one document\nwith its lines\n")
  docs["d.txt:0"] = "one plain-text file is one document\nwith its lines\n"
  open(os.path.join(root, "empty.txt"), "w").close()  # skipped: empty
  return docs


def read_splits(name, data_dir) -> dict[str, dict[str, str]]:
  src = tfds.data_source(name, data_dir=data_dir)
  return {s: {r["source"].decode(): r["text"].decode() for r in src[s]} for s in src}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
  root = tmp_path_factory.mktemp("prep")
  docs = write_inputs(str(root / "in"))
  name = prepare.prepare([str(root / "in")], str(root / "tfds"), "mixed", val_fraction=0.2)
  return docs, name, str(root / "tfds")


def test_every_document_lands_in_exactly_one_split(prepared):
  docs, name, out = prepared
  assert name == "chinchax_text/mixed"
  got = read_splits(name, out)
  train, val = got["train"], got["validation"]
  assert not set(train) & set(val) and {**train, **val} == docs
  assert 0 < len(val) < len(docs) / 2
  for key, text in val.items():  # the rule: a hash of (key, bytes), not the listing order
    assert text_builder.is_validation(key, text.encode("utf-8"), 0.2)


def test_the_pipeline_reads_the_shards_back(prepared, tmp_path, monkeypatch):
  docs, name, out = prepared
  shards = os.listdir(os.path.join(out, "chinchax_text", "mixed", "1.0.0"))
  assert any(".array_record-" in s and "train" in s for s in shards)
  ds = pipeline.open_dataset(pipeline.DataConfig(name=name, data_dir=out, seq_len=16,
                                                 batch_size=4, cache_dir=str(tmp_path / "c")))
  stream = [r["text"].decode() for r in tfds.data_source(name, data_dir=out)["train"]]
  eod = ds.tokenizer.eod_id
  assert bytes(0 if t == eod else int(t) for t in ds.train) == b"".join(
      t.encode("utf-8") + b"\0" for t in stream)
  assert pipeline.train_batch(ds, 0)["inputs"].shape == (4, 16)
  # TFDS_DATA_DIR stands in for data.data_dir.
  monkeypatch.setenv("TFDS_DATA_DIR", out)
  by_env = pipeline.open_dataset(pipeline.DataConfig(name=name, seq_len=16, batch_size=4,
                                                     cache_dir=str(tmp_path / "c")))
  np.testing.assert_array_equal(by_env.train, ds.train)


def test_gs_inputs_and_outputs(fake_gcs, tmp_path):
  docs = write_inputs(str(fake_gcs.local("gs://bkt/raw")))
  name = prepare.prepare(["gs://bkt/raw/json/*.jsonl", "gs://bkt/raw/c.parquet"],
                         "gs://bkt/tfds", "fromgcs", val_fraction=0.3)
  want = {k.removeprefix("json/"): v for k, v in docs.items()
          if k.startswith("json/a.jsonl") or k.startswith("c.parquet")}
  # Shards uploaded to the bucket, read back shard by shard through a local copy.
  got = {r["source"].decode(): r["text"].decode() for split in ("train", "validation")
         for r in prepare.split_records(name, "gs://bkt/tfds", split, str(tmp_path / "s"))}
  assert got == want
  assert fake_gcs.stray_local_files() == []
  kw = dict(name=name, seq_len=16, batch_size=2)
  from_gcs = pipeline.open_dataset(pipeline.DataConfig(
      data_dir="gs://bkt/tfds", cache_dir=str(tmp_path / "g"), **kw))
  assert os.listdir(tmp_path / "g" / "shards")  # read through local copies of the shards
  local = pipeline.open_dataset(pipeline.DataConfig(
      data_dir=str(fake_gcs.local("gs://bkt/tfds")), cache_dir=str(tmp_path / "c"), **kw))
  np.testing.assert_array_equal(from_gcs.train, local.train)
  np.testing.assert_array_equal(from_gcs.validation, local.validation)


def test_missing_dataset_names_the_path_and_the_commands(tmp_path):
  with pytest.raises(UserError) as e:
    pipeline.open_dataset(pipeline.DataConfig(name="c4/en:3.0.1", data_dir=str(tmp_path)))
  msg = str(e.value)
  assert "\n" not in msg and str(tmp_path / "c4" / "en" / "3.0.1") in msg
  assert "chinchax data prepare" in msg and "chinchax data tfds c4/en:3.0.1" in msg


@pytest.mark.parametrize("make,says", [
    (lambda d: None, "does not exist"),
    (lambda d: (d / "x.jsonl").write_text('{"body": "no text"}\n'), "no 'text' field"),
    (lambda d: (d / "x.jsonl").write_text("{not json\n"), "not a JSON line"),
    (lambda d: pq.write_table(pa.table({"body": ["a"]}), d / "x.parquet"), "no 'text' column"),
    (lambda d: (d / "x.jsonl").write_text('{"text": "only one"}\n'), "too few"),
])
def test_bad_inputs_are_one_line(tmp_path, make, says):
  d = tmp_path / "in"
  if says != "does not exist":
    d.mkdir()
    make(d)
  with pytest.raises(UserError, match=says) as e:
    prepare.prepare([str(d)], str(tmp_path / "out"), "bad")
  assert "\n" not in str(e.value)
  assert not (tmp_path / "out" / "chinchax_text" / "bad" / "1.0.0").exists()


class TinyCorpus(tfds.core.GeneratorBasedBuilder):
  """A catalogue-style TFDS builder with no TensorFlow in it."""
  VERSION = tfds.core.Version("1.0.0")

  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls):
    return None  # no download checksums next to a test's builder (see text_builder)

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(
        {"text": tfds.features.Text()}))

  def _split_generators(self, dl_manager):
    return {s: self._generate_examples(s) for s in ("train", "validation")}

  def _generate_examples(self, split):
    for i in range(20):
      yield f"{split}{i}", {"text": f"{split} document {i} " * 5}


class NeedsTensorflow(TinyCorpus):
  def _generate_examples(self, split):
    import tensorflow  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
    yield from super()._generate_examples(split)


def test_tfds_route_without_tensorflow(tmp_path):
  name = prepare.prepare_tfds("tiny_corpus", str(tmp_path))
  assert name == "tiny_corpus/1.0.0"
  ds = pipeline.open_dataset(pipeline.DataConfig(name="tiny_corpus", data_dir=str(tmp_path),
                                                 seq_len=8, batch_size=2))
  assert ds.unique_tokens == sum(len(f"train document {i} " * 5) + 1 for i in range(20))
  with pytest.raises(UserError, match="needs TensorFlow to prepare") as e:
    prepare.prepare_tfds("needs_tensorflow", str(tmp_path / "tf"))
  assert "chinchax data prepare" in str(e.value)
  with pytest.raises(UserError, match="unknown TFDS dataset 'no_such_thing'"):
    prepare.prepare_tfds("no_such_thing", str(tmp_path))


def test_cli_trains_a_tokenizer_and_prints_the_overrides(tmp_path, capsys):
  write_inputs(str(tmp_path / "in"))
  out = tmp_path / "tfds"
  assert cli.run(["data", "prepare", f"--input={tmp_path / 'in'}", "--name=cli",
                  f"--out={out}", "--vocab=300", "--val_fraction=0.2"]) == 0
  printed = capsys.readouterr().out
  model = out / "chinchax_tokenizers" / "cli" / "spm.model"
  assert model.exists() and json.loads((model.parent / "tokenizer.json").read_text())[
      "vocab_size"] == 300
  flags = printed.splitlines()[-1].split(": ", 1)[1].split()
  assert flags == ["--config.train.data.name=chinchax_text/cli",
                   f"--config.train.data.data_dir={out}", "--config.train.data.tokenizer=spm",
                   f"--config.train.data.spm_model={model}", "--config.vocab_size=300"]
  ds = pipeline.open_dataset(pipeline.DataConfig(
      name="chinchax_text/cli", data_dir=str(out), tokenizer="spm", spm_model=str(model),
      seq_len=8, batch_size=2))
  assert ds.vocab_size == 300 and ds.train.max() < 300


def test_cli_refusals_are_one_line(tmp_path, capsys):
  assert cli.run(["data", "prepare", "--name=x", f"--out={tmp_path}"]) == 2
  assert cli.run(["data", "prepare", "--input=/nope", "--name=Bad Name", f"--out={tmp_path}"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 2 and "--input" in err[0] and "--name='Bad Name'" in err[1]


@pytest.mark.slow
def test_prepare_runs_with_tensorflow_unimportable(tmp_path):
  write_inputs(str(tmp_path / "in"))
  code = (
      "import sys\n"
      "class Hide:  # every finder answers 'no such module' for tensorflow: not installed\n"
      "  def __init__(self, f): self.f = f\n"
      "  def find_spec(self, name, path=None, target=None):\n"
      "    if name.split('.')[0] == 'tensorflow': return None\n"
      "    return self.f.find_spec(name, path, target)\n"
      "sys.meta_path[:] = [Hide(f) for f in sys.meta_path]\n"
      "from chinchax import cli\n"
      f"rc = cli.run(['data', 'prepare', '--input={tmp_path / 'in'}', '--name=notf', "
      f"'--out={tmp_path / 'out'}', '--tokenizer=bytes', '--val_fraction=0.2'])\n"
      "from chinchax.sweeps.data import pipeline\n"
      "ds = pipeline.open_dataset(pipeline.DataConfig(name='chinchax_text/notf', "
      f"data_dir={str(tmp_path / 'out')!r}, seq_len=16, batch_size=2))\n"
      "print(rc, ds.unique_tokens > 0, 'tensorflow' in sys.modules)\n")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.strip().splitlines()[-1] == "0 True False"
