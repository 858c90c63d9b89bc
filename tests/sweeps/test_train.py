"""`chinchax train`: refusals before compute, learning on the default corpus, the metrics and
TensorBoard record, and a diverged run marked failed."""

import contextlib
import io
import json
import math
import os
import re
import signal

import jax
import numpy as np
import pytest

from tests.helpers import train_util as tu
from chinchax import cli
from chinchax.cli import flags
from chinchax.cli import train as cli_train
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import loop

# Every XLA compile in this process, so that a test can show that a refusal came before any.
COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, _secs, **_: COMPILES.append(event)
    if event == "/jax/core/compile/backend_compile_duration" else None)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  """A data dir with the small corpus prepared (the unknown-feature case reads it back)."""
  d = str(tmp_path_factory.mktemp("tfds"))
  c = train_config.get_config("tiny")
  c.data.corpus, c.data.data_dir = tu.SMALL_CORPUS, d
  pipeline.open_dataset(run_config.data_config(c))
  return d


def refused(capfd, tmp_path, data_dir, *overrides, corpus=tu.SMALL_CORPUS):
  """Runs the CLI in-process; returns its one stderr line after checking it compiled nothing."""
  workdir = tmp_path / "run"
  args = [f"--config={tu.TINY}", f"--workdir={workdir}", f"--config.data.data_dir={data_dir}",
          f"--config.data.corpus={corpus}", *overrides]
  capfd.readouterr()
  n = len(COMPILES)
  assert cli.run(["train", *args]) == 2
  out, err = capfd.readouterr()
  assert len(COMPILES) == n, "compiled before refusing"
  assert not workdir.exists()
  assert out == ""
  assert err.endswith("\n") and err.count("\n") == 1, err
  assert err.startswith("chinchax train: error: ")
  return err


@pytest.mark.parametrize("overrides, corpus, says", [
    ((), "/nope", "corpus '/nope' does not exist"),
    ((), "EMPTY", "matches no files"),
    (("--config.data.name=no_such_dataset",), "", "TFDS dataset 'no_such_dataset' is not prepared"),
    (("--config.data.text_key=body",), tu.SMALL_CORPUS, "has no feature 'body'"),
    (("--config.model.vocab_size=300",), tu.SMALL_CORPUS, "vocab_size=300 does not match"),
    (("--config.seq_len=100000000",), tu.SMALL_CORPUS, "is longer than the"),
    (("--config.tokens=-1000",), tu.SMALL_CORPUS, "config.tokens must be positive"),
    (("--config.optimizer.schedule=linear",), tu.SMALL_CORPUS, "unknown schedule 'linear'"),
    (("--config.nokey=1",), tu.SMALL_CORPUS, "--config.nokey: the config has no key 'nokey'"),
    (("--config.model.widht=64",), tu.SMALL_CORPUS, "--config.model.widht: the config has no"),
    (("--config.seq_len=long",), tu.SMALL_CORPUS, "--config.seq_len=long"),
    (("--config.mesh.data=3",), tu.SMALL_CORPUS, "has 3 devices but the job has 1"),
])
def test_bad_input_is_one_line_exit_2_before_compile(
    capfd, tmp_path, data_dir, overrides, corpus, says):
  if corpus == "EMPTY":
    corpus = str(tmp_path / "empty")
    os.mkdir(corpus)
  assert says in refused(capfd, tmp_path, data_dir, *overrides, corpus=corpus)


@pytest.mark.slow
def test_batch_not_divisible_by_data_parallel_devices(tmp_path, data_dir):
  """8 forced CPU devices: a batch of 12 rows cannot split over the 8-way data axis."""
  workdir = tmp_path / "run"
  env = tu.child_env(str(tmp_path / "xla_cache"), devices=8)
  p = tu.run(tu.tiny_args(workdir, data_dir, "--config.batch_size=12"), env)
  assert p.returncode == 2, p.stderr
  assert p.stderr.count("\n") == 1, p.stderr
  assert "batch 12 does not split over 8 data-parallel shards" in p.stderr
  assert p.stdout == "" and not workdir.exists()


def test_dry_run_prints_the_plan_and_opens_nothing(capfd, tmp_path, monkeypatch):
  monkeypatch.setattr(pipeline, "open_dataset", lambda *a, **k: pytest.fail("opened the data"))
  monkeypatch.chdir(tmp_path)
  workdir, data_dir = tmp_path / "run", tmp_path / "tfds"
  n = len(COMPILES)
  assert cli.run(["train", f"--config={tu.TINY}", f"--workdir={workdir}", "--dry-run",
                  f"--config.data.data_dir={data_dir}", "--config.seq_len_start=8",
                  "--config.wsd.branches=(3072.0,6144.0)"]) == 0
  out = capfd.readouterr().out
  assert "24 steps of 8 x 32 tokens" in out and "N = 29,920" in out
  assert "sequence-length warmup: 8 from step 0, 16 from step 1, 32 from step 2" in out
  assert "D=3072 (steps 10-12)" in out  # the WSD branches: decay over 20% of 12 steps
  assert len(COMPILES) == n and list(tmp_path.iterdir()) == []


def test_overrides_come_from_argv_not_sys_argv():
  # Two parses in one process with different overrides: each sees its own (a sweep runner
  # and tests call it in-process, where sys.argv is someone else's command line).
  for seq_len in (16, 48):
    c = flags.parse_config_flags([f"--config={tu.TINY}", f"--config.seq_len={seq_len}"], "t",
                                 cli_train.DEFAULT_CONFIG).config
    assert c.seq_len == seq_len and c.batch_size == 8


def unigram_entropy(tokens: np.ndarray, vocab_size: int) -> float:
  p = np.bincount(tokens, minlength=vocab_size) / tokens.shape[0]
  p = p[p > 0]
  return float(-(p * np.log(p)).sum())


@pytest.fixture(scope="module")
def stdlib_run(tmp_path_factory):
  """120 steps of a 0.09M model on the default corpus (the standard library's source)."""
  root = tmp_path_factory.mktemp("stdlib")
  c = train_config.get_config("tiny")
  c.data.data_dir = str(root / "tfds")
  c.model.update(d_model=64, n_heads=4, d_ff=192)
  c.seq_len, c.batch_size, c.tokens = 64, 16, 16 * 64 * 120
  c.optimizer.update(peak_lr=1e-2, warmup_steps=10)
  c.eval_every, c.eval_tokens, c.log_every = 40, 16384, 40
  c.checkpoint.every_steps = 1000
  ds = pipeline.open_dataset(run_config.data_config(c))
  H = unigram_entropy(np.asarray(ds.train), ds.vocab_size)
  workdir = str(root / "run")
  out = io.StringIO()
  handler = signal.getsignal(signal.SIGINT)
  with contextlib.redirect_stdout(out):
    record = loop.train(c, workdir)
  assert signal.getsignal(signal.SIGINT) is handler  # the run's own handlers are undone
  return c, H, workdir, record, out.getvalue()


@pytest.mark.slow
def test_default_corpus_learns_below_unigram_entropy(stdlib_run):
  c, H, workdir, record, _ = stdlib_run
  assert c.data.name == "stdlib" and not c.data.corpus
  assert record["status"] == "done" and record["steps"] == 120
  # A model that learnt only the byte frequencies would sit at H; context takes it well below.
  assert record["eval_loss"] < H - 0.5, (record["eval_loss"], H)
  assert tu.result(workdir) == json.loads(json.dumps(record))


@pytest.mark.slow
def test_metrics_fields_and_tensorboard(stdlib_run):
  c, _, workdir, record, _ = stdlib_run
  rows = tu.rows(workdir)
  train_rows = [r for r in rows if "train_loss" in r]
  eval_rows = [r for r in rows if "eval_loss" in r]
  assert [r["step"] for r in train_rows] == [40, 80, 120]
  assert [r["step"] for r in eval_rows] == [40, 80, 120]
  for r in train_rows:
    assert set(r) >= {"step", "tokens", "flops", "train_loss", "lr", "grad_norm",
                      "tokens_per_s", "mfu"}
    assert r["tokens"] == r["step"] * c.batch_size * c.seq_len
    assert r["flops"] == pytest.approx(record["flops_6ND"] * r["tokens"] / record["D"])
    assert r["mfu"] is None  # CPU: no fair peak
    assert r["tokens_per_s"] > 0 and r["grad_norm"] > 0 and math.isfinite(r["train_loss"])
  # Cosine schedule: the logged LR is the one the step applied, 10% of the peak at the end.
  assert train_rows[0]["lr"] < c.optimizer.peak_lr
  assert train_rows[-1]["lr"] == pytest.approx(0.1 * c.optimizer.peak_lr, rel=0.01)
  assert eval_rows[-1]["eval_loss"] == record["eval_loss"]
  assert train_rows[-1]["train_loss"] == record["train_loss"]
  assert record["tokens_per_s"] > 0 and record["mfu"] is None
  events = os.listdir(os.path.join(workdir, "tensorboard"))
  assert any(f.startswith("events.out.tfevents") for f in events)


@pytest.mark.slow
def test_progress_line_per_log_step(stdlib_run):
  _, _, workdir, record, out = stdlib_run
  line = re.compile(r"step (\d+)/120 \| loss (\d+\.\d{4}) \| (\d+\.\d)k tok/s \| "
                    r"(\d+:)?\d+:\d\d left")
  progress = [line.fullmatch(l) for l in out.splitlines() if l.startswith("step ")]
  assert all(progress) and len(progress) == 3, out
  logged = {r["step"]: r["train_loss"] for r in tu.rows(workdir) if "train_loss" in r}
  for m in progress:
    assert float(m.group(2)) == pytest.approx(logged[int(m.group(1))], abs=5e-5)
    assert float(m.group(3)) > 0
  assert progress[-1].group(0).endswith(" 0:00 left")
  assert out.splitlines()[-1].startswith(f"done: eval loss {record['eval_loss']:.4f} nats/token")


@pytest.mark.slow
def test_diverged_run_is_failed_with_its_reason_exit_1(tmp_path, data_dir):
  p = tu.run(tu.tiny_args(tmp_path, data_dir, "--config.optimizer.peak_lr=1e6"),
             tu.child_env(str(tmp_path / "xla_cache")))
  assert p.returncode == 1, p.stderr
  record = tu.result(tmp_path)
  assert record["status"] == "failed"
  assert "non-finite" in record["reason"] or "loss spike" in record["reason"]
  assert json.loads(p.stderr.strip().splitlines()[-1]) == {"status": "failed",
                                                           "reason": record["reason"]}
  assert record["eval_loss"] is None and record["steps"] < 24
  assert f"failed: {record['reason']}" in p.stdout
  # The diverged state is not checkpointed: nothing at or after the failing step.
  ck = os.path.join(tmp_path, "checkpoints")
  assert all(int(d) < record["steps"] for d in os.listdir(ck) if d.isdigit())
