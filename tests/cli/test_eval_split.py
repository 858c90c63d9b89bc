"""`chinchax eval --split=validation|train|all` as processes: a tiny run trained on a corpus of
40 files (one held out), then its checkpoint scored on each split of its own data and on small
corpus folders; the sizes printed are counted here by hand from the files (the bytes tokenizer:
a token per byte, one per file's end), and a corpus too small for a validation split is
refused in one line for --split=validation and scored with --split=all."""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.helpers.corpus_files import docs, held_out, tokens, write

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "sweeps", "configs", "train.py") + ":tiny"
B, L = 8, 32  # train:tiny's batch, in sequences of L tokens; it evaluates 2048 tokens


def cli(*argv):
  env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}
  return subprocess.run([sys.executable, "-m", "chinchax.cli", *argv], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=300)


def whole(n_tokens: int) -> int:
  """The tokens --eval_tokens=all scores: every whole batch of the split's windows."""
  return (n_tokens - 1) // L // B * B * L


def train(tmp):
  """(workdir, its corpus' texts): train:tiny on 40 files, one held out."""
  texts = docs(40, val=1, size=2400)  # the held-out file holds the 2048 eval tokens
  corpus, wd = write(tmp / "corpus", texts), tmp / "run"
  p = cli("train", f"--config={TINY}", f"--workdir={wd}", f"--config.data.corpus={corpus}",
          f"--config.data.data_dir={tmp / 'tfds'}", "--quiet")
  assert p.returncode == 0, p.stderr[-3000:]
  return str(wd), texts


def probes(wd) -> list[dict]:
  path = os.path.join(wd, "eval_probe.jsonl")
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f]


@pytest.mark.slow
def test_eval_splits_as_processes(tmp_path):
  wd, own = train(tmp_path)

  # A folder of 3 files, none held out: --split=validation is one line naming --split=all.
  small = docs(3, val=0, size=1200)
  folder = write(tmp_path / "small", small)
  p = cli("eval", f"--workdir={wd}", f"--data.corpus={folder}")
  assert p.returncode == 2 and p.stdout == "", p.stderr[-2000:]
  (line,) = p.stderr.splitlines()
  assert line == (f"chinchax eval: error: {folder}: 3 files, too few to give both splits one "
                  "(a file goes to validation with probability 0.05, by a hash of its path and "
                  "bytes); score every file with --split=all")
  assert probes(wd) == []

  # --split=all scores it, and the run's data, after printing their sizes.
  p = cli("eval", f"--workdir={wd}", f"--data.corpus={folder}", "--split=all")
  assert p.returncode == 0, p.stderr[-2000:]
  n_own, n_small = tokens(own.values()), tokens(small.values())
  assert p.stdout.splitlines()[:2] == [
      f"all: the run's data, all split: 40 files, {n_own:,} tokens; scoring 2,048 of them",
      f"{folder}: all split: 3 files, {n_small:,} tokens; scoring 2,048 of them"]
  rows = {r["set"]: r for r in probes(wd) if r["split"] == "all"}
  assert set(rows) == {"all", folder}
  for r in rows.values():
    assert r["eval_tokens"] == 2048 and 0 < r["eval_loss"] < math.log(258)
    assert f"| {r['set']}: {r['eval_loss']:.4f} nats/token" in p.stdout

  # Each split of the run's data: validation + train = all, in files and tokens; a folder
  # holding just the held-out file, scored whole, gives the run's validation score (the same
  # stream).
  val = {r: t for r, t in own.items() if held_out(r, t.encode())}
  assert len(val) == 1
  same = write(tmp_path / "held_out", val)
  out = {}
  for split, more in (("validation", []), ("train", []), ("all", [f"--data.corpus={same}"])):
    p = cli("eval", f"--workdir={wd}", f"--split={split}", "--eval_tokens=all", *more)
    assert p.returncode == 0, p.stderr[-2000:]
    out[split] = p.stdout.splitlines()
  train_files = {r: t for r, t in own.items() if r not in val}
  for split, files in (("validation", val), ("train", train_files), ("all", own)):
    n, count = tokens(files.values()), len(files)
    assert out[split][0] == (f"{split}: the run's data, {split} split: {count} "
                             f"file{'s' if count > 1 else ''}, {n:,} tokens; scoring "
                             f"{whole(n):,} of them")
  n = tokens(val.values())
  assert out["all"][1] == f"{same}: all split: 1 file, {n:,} tokens; scoring {whole(n):,} of them"
  rows = {(r["set"], r["split"]): r for r in probes(wd) if r["eval_tokens"] == whole(n)}
  assert rows[same, "all"]["eval_loss"] == pytest.approx(
      rows["validation", "validation"]["eval_loss"], rel=1e-6)
  # A probe of another split adds its rows beside the others: none replaced another.
  assert {(r["set"], r["split"], r["eval_tokens"]) for r in probes(wd)} == {
      ("all", "all", 2048), (folder, "all", 2048), ("validation", "validation", whole(n)),
      ("train", "train", whole(tokens(train_files.values()))), ("all", "all", whole(n_own)),
      (same, "all", whole(n))}


@pytest.mark.slow
@pytest.mark.parametrize("argv, expect", [
    (["--split=test"], "argument --split: invalid choice: 'test'"),
    (["--eval_tokens=lots"], "argument --eval_tokens: 'lots' is not a whole number of tokens"),
])
def test_bad_split_flags_are_one_line(tmp_path, argv, expect):
  p = cli("eval", f"--workdir={tmp_path}", *argv)
  assert p.returncode == 2 and p.stdout == "", p.stderr
  (line,) = p.stderr.splitlines()
  assert line.startswith("chinchax eval: error: ") and expect in line
