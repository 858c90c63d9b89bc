"""The shape recipe lands on its target, keeps its stated proportions and varies smoothly with
the target; `chinchax models`."""

import math

import numpy as np
import pytest

from chinchax.cli import models as cli
from chinchax.errors import UserError
from chinchax.models import config
from chinchax.scaling.runs import conventions

GRID = np.logspace(5, 11, 4 * 6 + 1)  # 1e5 ... 1e11, four points per decade


RHO = 8 / 3  # SwiGLU's d_ff / d_model


def _check_rule(s, band=config.FF_BAND):
  s.validate()
  # head_dim: the largest power of two <= d_model / 8, within [8, 128] (an independent form)
  assert s.head_dim == min(128, max(8, 2 ** math.floor(math.log2(s.d_model / 8))))
  assert s.d_model % s.head_dim == 0 and s.d_ff % s.head_dim == 0
  assert s.n_layers >= 2 and s.d_model <= 2 * 64 * s.n_layers
  if s.n_layers > 2:  # depth is the one whose aspect ratio is nearest 64
    assert 64 / 1.5 <= s.d_model / s.n_layers <= 64 * 1.5, s
  assert RHO / band - 1e-9 <= s.d_ff / s.d_model <= RHO * band + 1e-9, s


@pytest.mark.parametrize("vocab, convention, tied", [
    (256, "total", False),
    (256, "total", True),
    (256, "non_embedding", False),
    (32000, "non_embedding", False),
])
def test_recipe_lands_within_10_percent_on_a_log_grid(vocab, convention, tied):
  for N in GRID:
    s = config.shape_for_params(N, vocab_size=vocab, seq_len=1024, tied=tied,
                                convention=convention)
    _check_rule(s, band=2.0)
    assert s.vocab_size == vocab and s.tied == tied and s.seq_len == 1024
    assert abs(conventions.params(s, convention) / N - 1) <= 0.1, (N, s)
    if s.d_model >= 48:  # widths fine enough for d_ff to bridge: on target, in the band
      _check_rule(s)
      assert abs(conventions.params(s, convention) / N - 1) <= config.LANDING, (N, s)


def test_vocab_32000_total_lands_wherever_the_embedding_allows_and_refuses_below():
  smallest = 2 * 32000 * 16  # untied embedding + head at the narrowest width
  reached = 0
  for N in GRID:
    if N * 1.1 < smallest:  # even 10% over the target cannot hold the embedding
      with pytest.raises(UserError, match="no decoder with vocab_size=32000"):
        config.shape_for_params(N, vocab_size=32000, seq_len=2048)
      continue
    if N < 2 * smallest:  # between: reachable only with a near-empty body
      continue
    s = config.shape_for_params(N, vocab_size=32000, seq_len=2048)
    _check_rule(s, band=2.0)
    assert abs(conventions.params(s, "total") / N - 1) <= 0.1, (N, s)
    reached += 1
  assert reached >= 16  # 1e7 ... 1e11


def test_large_models_keep_conventional_proportions():
  s = config.shape_for_params(7e9, vocab_size=32000, seq_len=2048)
  assert 40 <= s.d_model / s.n_layers <= 100  # LLaMA-7B: 4096 / 32 = 128, Chinchilla: 85-128
  assert 2.0 <= s.d_ff / s.d_model <= 3.5  # SwiGLU's 8/3
  assert s.head_dim == 128 and s.d_model % 128 == 0 and s.d_ff % 128 == 0  # MXU tiles


def _ladder(lo, hi, per_decade, **kwargs):
  n = round(math.log10(hi / lo) * per_decade) + 1
  targets = lo * 10.0 ** (np.arange(n) / per_decade)
  return targets, [config.shape_for_params(N, **kwargs) for N in targets]


# The smoke sweep's sizes (byte-level, tied, context 64) and a model zoo's (32000 tokens),
# each from where widths are fine enough for d_ff to land N within its band (below, the
# embedding is most of N and one width step moves it more than the band can take back).
LADDERS = [
    dict(lo=6e4, hi=1e6, vocab_size=258, seq_len=64, tied=True),
    dict(lo=1e7, hi=1e11, vocab_size=32000, seq_len=2048, tied=False),
]


@pytest.mark.parametrize("ladder", [
    dict(lo=1e4, hi=1e6, vocab_size=258, seq_len=64, tied=True),
    dict(lo=2e6, hi=1e11, vocab_size=32000, seq_len=2048, tied=False)],
    ids=["bytes-1e4-1e6", "32k-2e6-1e11"])
def test_N_is_monotone_in_the_target(ladder):
  ladder = dict(ladder)
  targets, shape_list = _ladder(ladder.pop("lo"), ladder.pop("hi"), 16, **ladder)
  Ns = [conventions.params(s) for s in shape_list]
  assert all(b >= a for a, b in zip(Ns, Ns[1:])), list(zip(targets, Ns))
  depths = [s.n_layers for s in shape_list]
  assert depths == sorted(depths)  # depth never goes back


@pytest.mark.parametrize("ladder", LADDERS, ids=["bytes-6e4-1e6", "32k-1e7-1e11"])
def test_aspect_ratios_move_smoothly_between_neighbouring_targets(ladder):
  """16 targets a decade: d_ff / d_model stays in its band, d_model / n_layers moves by at
  most 1.25 at fixed depth (d_model >= 64) and by (L_b / L_a)^1.5 x 1.25 where layers are
  added, head_dim only doubles, always upwards."""
  ladder = dict(ladder)
  _, shape_list = _ladder(ladder.pop("lo"), ladder.pop("hi"), 16, **ladder)
  for a, b in zip(shape_list, shape_list[1:]):
    _check_rule(b)
    step = (b.d_model / b.n_layers) / (a.d_model / a.n_layers)
    if b.n_layers == a.n_layers:
      if a.d_model >= 64:
        assert 1 / 1.25 <= step <= 1.25, (a, b)
      assert b.d_model >= a.d_model, (a, b)  # at fixed depth, width never shrinks
    else:  # deeper: narrower for its N, by (L_b / L_a)^1.5 at most
      assert b.n_layers > a.n_layers, (a, b)
      bound = (b.n_layers / a.n_layers) ** 1.5 * 1.25
      assert 1 / bound <= step <= 1.25, (a, b)
    assert b.head_dim in (a.head_dim, 2 * a.head_dim), (a, b)


@pytest.mark.parametrize("kwargs, match", [
    ({"N_target": -1.0}, "positive"),
    ({"N_target": math.inf}, "positive"),
    ({"N_target": 1e6, "vocab_size": 0}, "vocab_size"),
    ({"N_target": 1e6, "convention": "kaplan"}, "convention"),
])
def test_bad_input_is_refused(kwargs, match):
  args = {"vocab_size": 256, "seq_len": 128, **kwargs}
  with pytest.raises(UserError, match=match):
    config.shape_for_params(args.pop("N_target"), **args)


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
    assert int(r[9]) == s.head_dim
    assert float(r[10]) == pytest.approx(s.d_model / s.n_layers, abs=0.05)
    assert float(r[11]) == pytest.approx(s.d_ff / s.d_model, abs=0.005)


def test_cli_marks_unreachable_targets_and_refuses_an_empty_grid(capsys):
  cli.main(["--vocab", "32000", "--min", "1e5", "--max", "1e7", "--per-decade", "1"])
  out = capsys.readouterr().out
  assert out.count("unreachable") == 1  # 1e5 is below the embedding alone (1.02e6)
  with pytest.raises(UserError, match="--min"):
    cli.main(["--min", "1e8", "--max", "1e6"])
