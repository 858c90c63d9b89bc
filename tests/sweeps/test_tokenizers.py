"""Tokenizers: lossless round trips, specials, byte accounting, vocabulary checks."""

import json

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.cli import tokenizer as cli_tokenizer
from chinchax.sweeps.data import tokenizers

TEXTS = ["", "hello world\n", "naïve café — 東京 🚀\n\tindent", "def f(x):\n    return x  # 42\n"]


def test_bytes_round_trip_including_non_ascii():
  tok = tokenizers.BytesTokenizer()
  for t in TEXTS:
    ids = tok.encode(t)
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, list(t.encode("utf-8")))
    assert tok.decode(ids) == t


def test_bytes_specials_are_outside_the_byte_range():
  tok = tokenizers.BytesTokenizer()
  assert (tok.eod_id, tok.pad_id, tok.vocab_size) == (256, 257, 258)
  ids = np.concatenate([tok.encode("ab"), [tok.eod_id], tok.encode("ç"), [tok.pad_id]])
  assert tok.decode(ids) == "abç"  # specials decode to nothing
  assert tok.bytes_per_id[ids].sum() == len("abç".encode("utf-8"))


def test_check_vocab():
  tok = tokenizers.BytesTokenizer()
  tokenizers.check_vocab(tok, 258)
  tokenizers.check_vocab(tok, 384, multiple_of=128)
  with pytest.raises(UserError, match="does not match"):
    tokenizers.check_vocab(tok, 256)
  with pytest.raises(UserError, match="expected 384"):
    tokenizers.check_vocab(tok, 512, multiple_of=128)


def test_unknown_tokenizer():
  with pytest.raises(UserError, match="unknown tokenizer"):
    tokenizers.make_tokenizer("wordpiece")
  with pytest.raises(UserError, match="spm_model"):
    tokenizers.make_tokenizer("spm")


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("tok")
  corpus = root / "corpus"
  corpus.mkdir()
  rng = np.random.default_rng(0)
  for i in range(60):
    words = " ".join(f"w{j}" for j in rng.integers(0, 100, size=40))
    (corpus / f"doc{i}.txt").write_text(f"document {i}: {words}\n" + TEXTS[i % 4], "utf-8")
  rc = cli_tokenizer.main([f"--corpus={corpus}", "--vocab=300", f"--out={root / 'out'}",
                           f"--data_dir={root / 'tfds'}", "--val_fraction=0.3"])
  assert rc == 0
  return root


def test_sentencepiece_round_trip_and_byte_accounting(spm_dir):
  tok = tokenizers.make_tokenizer("spm", str(spm_dir / "out" / "spm.model"))
  assert tok.vocab_size == 300 and (tok.pad_id, tok.eod_id) == (0, 1)
  unseen = "Ünïcode never seen in training: 𝔘 ∮ ж\r\n  x\ty"
  for t in TEXTS + [unseen]:
    ids = tok.encode(t)
    assert ids.dtype == np.int32 and (ids < tok.vocab_size).all()
    assert tok.decode(ids) == t
    assert tok.bytes_per_id[ids].sum() == len(t.encode("utf-8"))
  # Learned merges: common text takes fewer tokens than bytes.
  assert len(tok.encode("document 12: w1 w2 w3")) < len("document 12: w1 w2 w3")


def test_tokenizer_cli_writes_metadata(spm_dir):
  meta = json.loads((spm_dir / "out" / "tokenizer.json").read_text())
  assert meta["vocab_size"] == 300 and meta["eod_id"] == 1
  assert 1.0 < meta["validation_bytes_per_token"] < 8.0


def test_sentencepiece_bad_inputs(spm_dir, tmp_path):
  with pytest.raises(UserError, match="does not exist"):
    tokenizers.SentencePieceTokenizer(str(tmp_path / "missing.model"))
  (tmp_path / "junk.model").write_bytes(b"not a model")
  with pytest.raises(UserError, match="not a SentencePiece model"):
    tokenizers.SentencePieceTokenizer(str(tmp_path / "junk.model"))
  tok = tokenizers.SentencePieceTokenizer(str(spm_dir / "out" / "spm.model"))
  with pytest.raises(UserError, match="set the model's vocab_size to 300"):
    tokenizers.check_vocab(tok, 258)


def test_pipeline_with_sentencepiece_packs_whole_documents(spm_dir):
  import tensorflow_datasets as tfds
  from chinchax.sweeps.data import pipeline
  cfg = pipeline.DataConfig(corpus=str(spm_dir / "corpus"), data_dir=str(spm_dir / "tfds"),
                            tokenizer="spm", spm_model=str(spm_dir / "out" / "spm.model"),
                            seq_len=16, batch_size=2, val_fraction=0.3)
  ds = pipeline.open_dataset(cfg)
  docs = [r["text"].decode() for r in tfds.data_source(ds.tfds_name,
                                                       data_dir=cfg.data_dir)["train"]]
  stream = np.asarray(ds.train)
  cuts = np.flatnonzero(stream == ds.tokenizer.eod_id)
  assert len(cuts) == len(docs)
  pieces = np.split(stream, cuts + 1)[:-1]
  assert [ds.tokenizer.decode(p[:-1]) for p in pieces] == docs


def test_tokenizer_cli_refuses_bad_vocab(spm_dir, tmp_path):
  with pytest.raises(UserError, match="too small"):
    cli_tokenizer.main([f"--corpus={spm_dir / 'corpus'}", "--vocab=100", f"--out={tmp_path}"])
  with pytest.raises(UserError, match="SentencePiece training failed"):
    cli_tokenizer.main([f"--corpus={spm_dir / 'corpus'}", "--vocab=50000", f"--out={tmp_path}",
                        f"--data_dir={spm_dir / 'tfds'}", "--val_fraction=0.3"])
  assert not (tmp_path / "spm.model").exists()
