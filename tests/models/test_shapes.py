"""The shape recipe lands on its target and keeps its stated proportions; `chinchax models`."""

import math

import numpy as np
import pytest

from chinchax.models import shapes
from chinchax.sweeps.cli import models as cli
from chinchax.scaling import conventions
from chinchax.scaling.errors import UserError

GRID = np.logspace(5, 11, 4 * 6 + 1)  # 1e5 ... 1e11, four points per decade


def _check_rule(s):
  s.validate()
  assert s.head_dim == (16 if s.d_model < 32 else 32 if s.d_model < 256 else 64 if s.d_model < 2048 else 128)
  assert s.d_model % s.head_dim == 0 and s.d_ff % (16 if s.d_model < 256 else s.head_dim) == 0
  assert 16 * s.n_layers <= s.d_model <= 128 * s.n_layers


@pytest.mark.parametrize("vocab, convention, tied", [
    (256, "total", False),
    (256, "total", True),
    (256, "non_embedding", False),
    (32000, "non_embedding", False),
])
def test_recipe_lands_within_10_percent_on_a_log_grid(vocab, convention, tied):
  for N in GRID:
    s = shapes.shape_for_params(N, vocab_size=vocab, seq_len=1024, tied=tied,
                                convention=convention)
    _check_rule(s)
    assert s.vocab_size == vocab and s.tied == tied and s.seq_len == 1024
    assert abs(conventions.params(s, convention) / N - 1) <= 0.1, (N, s)


def test_vocab_32000_total_lands_wherever_the_embedding_allows_and_refuses_below():
  smallest = 2 * 32000 * 16  # untied embedding + head at the narrowest width
  reached = 0
  for N in GRID:
    if N * 1.1 < smallest:  # even 10% over the target cannot hold the embedding
      with pytest.raises(UserError, match="no decoder with vocab_size=32000"):
        shapes.shape_for_params(N, vocab_size=32000, seq_len=2048)
      continue
    if N < 2 * smallest:  # between: reachable only with a near-empty body
      continue
    s = shapes.shape_for_params(N, vocab_size=32000, seq_len=2048)
    _check_rule(s)
    assert abs(conventions.params(s, "total") / N - 1) <= 0.1, (N, s)
    reached += 1
  assert reached >= 16  # 1e7 ... 1e11


def test_large_models_keep_conventional_proportions():
  s = shapes.shape_for_params(7e9, vocab_size=32000, seq_len=2048)
  assert 40 <= s.d_model / s.n_layers <= 100  # LLaMA-7B: 4096 / 32 = 128, Chinchilla: 85-128
  assert 2.0 <= s.d_ff / s.d_model <= 3.5  # SwiGLU's 8/3


@pytest.mark.parametrize("kwargs, match", [
    ({"N_target": -1.0}, "positive"),
    ({"N_target": math.inf}, "positive"),
    ({"N_target": 1e6, "vocab_size": 0}, "vocab_size"),
    ({"N_target": 1e6, "convention": "kaplan"}, "convention"),
])
def test_bad_input_is_refused(kwargs, match):
  args = {"vocab_size": 256, "seq_len": 128, **kwargs}
  with pytest.raises(UserError, match=match):
    shapes.shape_for_params(args.pop("N_target"), **args)


def test_cli_table_rows_agree_with_conventions(capsys):
  assert cli.main(["--vocab", "256", "--seq-len", "512", "--min", "1e6", "--max", "1e8",
                   "--per-decade", "2"]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  rows = [l.split() for l in lines[2:]]
  assert [float(r[0]) for r in rows] == pytest.approx([1e6, 10**6.5, 1e7, 10**7.5, 1e8], rel=1e-2)
  for r in rows:
    s = conventions.Shape(int(r[1]), int(r[2]), int(r[3]), int(r[4]), 256, 512)
    assert int(r[5].replace(",", "")) == conventions.params(s, "total")
    assert int(r[6].replace(",", "")) == conventions.params(s, "non_embedding")
    assert float(r[7]) == pytest.approx(conventions.flops_per_token(s, "6ND"), rel=1e-3)
    assert float(r[8]) == pytest.approx(conventions.flops_per_token(s, "chinchilla"), rel=1e-3)


def test_cli_marks_unreachable_targets_and_refuses_an_empty_grid(capsys):
  cli.main(["--vocab", "32000", "--min", "1e5", "--max", "1e7", "--per-decade", "1"])
  out = capsys.readouterr().out
  assert out.count("unreachable") == 1  # 1e5 is below the embedding alone (1.02e6)
  with pytest.raises(UserError, match="--min"):
    cli.main(["--min", "1e8", "--max", "1e6"])
