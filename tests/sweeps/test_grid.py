"""The sweep grid: budgets spent, sizes around the prior, refusals, names, table, configs."""

import functools
import importlib
import math
import re

import ml_collections
import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.scaling.runs import conventions
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps import grid, table
from chinchax.sweeps import recipe as recipe_lib
from chinchax.sweeps import wsd
from chinchax.sweeps.configs import sweep as sweep_config
from tests.helpers.written_numbers import written

V, S = 258, 128


@functools.lru_cache(maxsize=None)
def _stand_in_family(vocab_size, seq_len, tied):
  shapes = [Shape(d, L, d // 32, 3 * d, vocab_size, seq_len, tied=tied)
            for d in range(32, 2049, 32) for L in range(1, d // 8 + 1)]
  return shapes, np.log([conventions.params(s) for s in shapes])


def stand_in_shape(N_target, *, vocab_size, seq_len, tied=False):
  """A small deterministic recipe: d_model = 32k, n_heads = d/32, d_ff = 3d, 1 <= L <= d/8.

  Picks the (d, L) whose exact N is nearest the target in log (the narrower on ties); refuses
  targets less than half the smallest model.
  """
  shapes, log_N = _stand_in_family(vocab_size, seq_len, tied)
  if math.log(N_target) < log_N[0] - math.log(2):
    raise UserError(f"no shape near {N_target:.3g}")
  return shapes[int(np.argmin(np.abs(log_N - math.log(N_target))))]


def train_cfg():
  """The keys of the single-run config that a cell fills in."""
  return ml_collections.ConfigDict(dict(
      name="train", budget=0.0, seq_len=S, batch_size=32, tokens=1.6e6,
      model=dict(N=0, d_model=128, n_layers=2, n_heads=4, d_ff=384, tied=False),
      optimizer=dict(peak_lr=3e-3, warmup_steps=40)))


def sweep_cfg(**kw):
  c = sweep_config.base_config(train_cfg())
  c.budgets = (1e14, 1e15)
  c.prior = "tokens_per_param:20"
  c.n_per_budget = 5
  c.span = 0.5
  c.min_steps = 20
  c.vocab_size = V
  for k, v in kw.items():
    c[k] = v
  return c


def make(cfg, **kw):
  return grid.make_grid(cfg, shape_fn=stand_in_shape, **kw)


# --------------------------------------------------------------------------- budgets


@pytest.mark.parametrize("flops", ["6ND", "chinchilla"])
def test_every_cell_spends_its_budget(flops):
  cells, refusals = make(sweep_cfg(flops=flops))
  assert len(cells) == 10 and not refusals
  for c in cells:
    tokens_per_batch = c.batch_size * c.seq_len
    assert c.D == c.steps * tokens_per_batch
    per_token = conventions.flops_per_token(c.shape, flops)
    realised = per_token * c.D
    if flops == "6ND":  # independently of the conventions module: 6·N·D
      assert realised == pytest.approx(6.0 * c.N * c.D, rel=1e-12)
    assert (c.flops_6ND if flops == "6ND" else c.flops_chinchilla) == pytest.approx(
        realised, rel=1e-12)
    assert abs(realised - c.budget) <= per_token * tokens_per_batch / 2 * (1 + 1e-9)
    assert c.steps >= 20
    assert c.tokens_per_param == pytest.approx(c.D / c.N)


def test_sizes_log_spaced_around_prior_optimum():
  for n in (5, 4):
    cells, _ = make(sweep_cfg(n_per_budget=n, span=0.5))
    for C in (1e14, 1e15):
      at = [c for c in cells if c.budget == C]
      N_star = math.sqrt(C / 120.0)  # D = 20 N and C = 6 N D
      logs = np.log10([c.N_target for c in at])
      np.testing.assert_allclose(np.diff(logs), 1.0 / (n - 1), rtol=1e-9)
      np.testing.assert_allclose([logs[0], logs[-1]], np.log10(N_star) + [-0.5, 0.5], rtol=1e-9)
      assert min(c.N for c in at) < N_star < max(c.N for c in at)
      if n % 2:
        assert at[n // 2].N_target == pytest.approx(N_star, rel=1e-12)


def _closed_form_N_star(C, A, B, alpha, beta, E=None):
  G = (alpha * A / (beta * B))**(1 / (alpha + beta))
  return G * (C / 6) ** (beta / (alpha + beta))


def test_grid_aimed_from_law_json_centres_on_its_optimum(tmp_path):
  p = dict(E=1.5, A=300.0, B=900.0, alpha=0.3, beta=0.35)
  path = tmp_path / "law.json"
  law_lib.save_law(path, law_lib.build_law(**p))
  cells, _ = make(sweep_cfg(prior=str(path), n_per_budget=3, budgets=(1e15, 1e16)))
  for C in (1e15, 1e16):
    middle = [c for c in cells if c.budget == C][1]
    assert middle.N_target == pytest.approx(_closed_form_N_star(C, **p), rel=1e-9)
  # A different prior aims elsewhere (the law is what moved the grid).
  other, _ = make(sweep_cfg(n_per_budget=3, budgets=(1e15, 1e16)))
  assert other[1].N_target != pytest.approx(cells[1].N_target, rel=0.05)


def test_preset_prior_is_the_published_law():
  cells, _ = make(sweep_cfg(prior="preset:hoffmann2022", n_per_budget=1, span=0.0,
                            budgets=(1e18,)))
  expected = _closed_form_N_star(1e18, A=406.4, B=410.7, alpha=0.34, beta=0.28)
  assert cells[0].N_target == pytest.approx(expected, rel=1e-9)


def test_explicit_sizes_flat_and_per_budget():
  cells, _ = make(sweep_cfg(sizes=(2e5, 5e5)))
  assert [c.N_target for c in cells] == [2e5, 5e5, 2e5, 5e5]
  cells, _ = make(sweep_cfg(sizes=((2e5,), (5e5, 1e6))))
  assert [(c.budget, c.N_target) for c in cells] == [(1e14, 2e5), (1e15, 5e5), (1e15, 1e6)]


def test_fixed_n_series():
  cfg = sweep_cfg(budgets=())
  cfg.fixed_n.update(sizes=(1e5, 3e5), tokens_per_param=(10.0, 40.0))
  cells, refusals = make(cfg)
  assert len(cells) == 4 and not refusals
  for c in cells:
    assert not c.isoflop and re.fullmatch(r"N[0-9.e]+-T(10|40)", c.name)
    R = 10.0 if c.name.endswith("T10") else 40.0
    assert abs(c.D - R * c.N) <= c.batch_size * c.seq_len / 2
    assert c.train_config(cfg).budget == 0.0  # not part of an IsoFLOP group
    assert c.series == f"N{grid._num(c.N)}" and c.name.startswith(c.series + "-T")
  # The series of sizes whose names collide are told apart by their shapes, as the cells are.
  s1, s2 = Shape(64, 1, 2, 214, V, S), Shape(64, 2, 2, 64, V, S)
  cfg.fixed_n.update(sizes=(1e5, 2e5), tokens_per_param=(20.0,))
  cells, _ = grid.make_grid(cfg, shape_fn=lambda N, **_: s1 if N < 1.5e5 else s2)
  assert len({c.series for c in cells}) == 2
  assert all(c.name == c.series.replace("-d", "-T20-d", 1) for c in cells)


# --------------------------------------------------------------------------- refusals


def test_refuses_too_few_steps():
  cells, refusals = make(sweep_cfg(min_steps=10**7))
  assert not cells and len(refusals) == 10
  assert all("min_steps=10000000" in r for r in refusals)


def test_refuses_data_beyond_unique_tokens_unless_repeats_allowed():
  cells, _ = make(sweep_cfg())
  U = float(np.median([c.D for c in cells]))
  kept, refusals = grid.beyond_data(cells, U, allow_repeats=False)
  assert {c.name for c in kept} == {c.name for c in cells if c.D <= U}
  assert len(refusals) == sum(c.D > U for c in cells) > 0
  assert all("unique tokens" in r for r in refusals)
  kept, refusals = grid.beyond_data(cells, U, allow_repeats=True)
  assert len(kept) == len(cells) and not refusals


def test_refuses_shapes_below_the_floor_and_missing_shapes():
  cfg = sweep_cfg(sizes=(1e3, 4e4, 1e6))  # 1e3: no shape; 4e4: d_model 32
  cfg.recipe.min_d_model = 64
  cells, refusals = make(cfg)
  assert all(c.shape.d_model >= 64 for c in cells) and len(cells) == 2
  assert sum("no shape for N" in r for r in refusals) == 2
  assert sum("below the recipe's floor: d_model=32 < recipe.min_d_model=64" in r
             for r in refusals) == 2


def test_refuses_duplicate_shapes_at_one_budget():
  cells, refusals = make(sweep_cfg(sizes=(2e5, 2.01e5, 8e5)))
  assert len(cells) == 4 and len(refusals) == 2
  assert all("duplicate shape" in r and "2.01e5" in r for r in refusals)


# --------------------------------------------------------------------------- names, table


def test_names_deterministic_unique_and_readable():
  a, _ = make(sweep_cfg())
  b, _ = make(sweep_cfg())
  assert [c.name for c in a] == [c.name for c in b]
  assert len({c.name for c in a}) == len(a)
  assert all(re.fullmatch(r"C1e1[45]-N[0-9.]+e\d+", c.name) for c in a)
  assert a[0].name == f"C1e14-N{grid._num(a[0].N)}"


def test_names_of_distinct_shapes_with_equal_N_are_disambiguated():
  # (d=64, L=1, d_ff=214) and (d=64, L=2, d_ff=64) have exactly the same N.
  s1 = Shape(64, 1, 2, 214, V, S)
  s2 = Shape(64, 2, 2, 64, V, S)
  assert conventions.params(s1) == conventions.params(s2)
  shape_fn = lambda N, **_: s1 if N < 1.5e5 else s2
  cells, refusals = grid.make_grid(sweep_cfg(sizes=(1e5, 2e5)), shape_fn=shape_fn)
  assert not refusals and len({c.name for c in cells}) == 4
  assert {c.name.split("-", 2)[2] for c in cells} == {"d64L1H2F214", "d64L2H2F64"}


def test_table_has_one_row_per_cell():
  cells, _ = make(sweep_cfg())
  _, refusals = make(sweep_cfg(sizes=(2e5, 2.01e5)))
  text = table.format_table(cells, refusals, seconds=lambda c: c.flops_6ND * 1e-10)
  lines = text.splitlines()
  for c in cells:
    rows = [l for l in lines if l.startswith(c.name + " ")]
    assert len(rows) == 1
    assert written(c.flops_6ND) in rows[0] and written(c.flops_chinchilla) in rows[0]
    assert "e+" not in rows[0]
    assert f"{c.steps}" in rows[0] and f"{c.batch_size} x {c.seq_len}" in rows[0]
  assert lines[0].split()[:3] == ["cell", "C", "N"] and lines[0].endswith("time")
  assert len(lines) == 2 + len(cells) + 2 + len(refusals)
  total = sum(c.flops_6ND for c in cells)
  assert f"total {written(total)} FLOPs" in text
  assert f"about {table.duration(total * 1e-10)} of training" in text
  assert all(r in text for r in refusals)
  assert "time" not in table.format_table(cells).splitlines()[0]


def test_duration_units():
  assert [table.duration(s) for s in (5, 59.96, 3599, 7200, 3 * 86400)] == [
      "5s", "1.0m", "1.0h", "2.0h", "3.0d"]


# --------------------------------------------------------------------------- train config


def test_train_config_is_the_cell():
  cfg = sweep_cfg()
  cells, _ = make(cfg)
  c = cells[3]
  t = c.train_config(cfg)
  assert t.name == c.name and t.budget == c.budget and t.model.N == 0
  assert (t.model.d_model, t.model.n_layers, t.model.n_heads, t.model.d_ff) == (
      c.shape.d_model, c.shape.n_layers, c.shape.n_heads, c.shape.d_ff)
  assert t.optimizer.peak_lr == c.peak_lr and t.optimizer.warmup_steps == c.warmup_steps
  # The trainer runs ceil(tokens / tokens per batch) steps: exactly the cell's.
  assert math.ceil(t.tokens / (t.batch_size * t.seq_len)) == c.steps
  assert cfg.train.name == "train" and cfg.train.model.d_model == 128  # untouched


# --------------------------------------------------------------------------- recipe


def test_recipe_closed_forms():
  r = recipe_lib.from_config({})
  assert r.lr(1.25e8, 1e20) == pytest.approx(6e-4)
  assert r.lr(1e6, 1.0) / r.lr(8e6, 1.0) == pytest.approx(2.0)  # N^(-1/3)
  assert r.lr(10.0, 1.0) == r.lr_max
  d = recipe_lib.from_config({"lr_rule": "deepseek"})
  assert d.lr(1.0, 1e18) == pytest.approx(0.3118 * 1e18**-0.125)
  assert r.ideal_batch_tokens(1e18) == pytest.approx(0.2920 * 1e18**0.3271)
  big = recipe_lib.from_config({"batch_multiple": 8})
  B = big.batch_size(1e18, 1e12, 2048, min_steps=10)
  assert B % 8 == 0 and abs(B * 2048 - 0.2920 * 1e18**0.3271) <= 4 * 2048
  # Shrunk to keep min_steps when D is small, never below one multiple.
  B = big.batch_size(1e18, 100 * 2048 * 20, 2048, min_steps=100)
  assert B == 16 and 100 * 2048 * 20 / (B * 2048) >= 100
  assert big.batch_size(1e18, 10.0, 2048, min_steps=100) == 8
  assert r.warmup_steps(1000) == 50 and r.warmup_steps(3) == 1


def test_recipe_is_overridable_from_the_config():
  cfg = sweep_cfg()
  cfg.recipe.update(lr_rule="fixed", peak_lr=1e-3, batch_rule="fixed", batch_tokens=64 * S)
  cells, _ = make(cfg)
  assert all(c.peak_lr == 1e-3 and c.batch_size == 64 for c in cells)


# --------------------------------------------------------------------------- bad configs


@pytest.mark.parametrize("key,value,words", [
    ("budgets", (), "budgets is empty"),
    ("budgets", (1e12, -1e13), "positive finite"),
    ("budgets", (1e12, float("inf")), "positive finite"),
    ("budgets", (1e12, 1e12), "repeats"),
    ("prior", "chinchilla", "unknown prior"),
    ("prior", "preset:nobody2030", "unknown preset"),
    ("prior", "tokens_per_param:-3", "tokens_per_param must be a positive"),
    ("prior", "/nonexistent/law.json", "cannot read law file"),
    ("flops", "7ND", "flops='7ND'"),
    ("n_per_budget", 0, "n_per_budget"),
    ("span", -0.1, "span"),
    ("min_steps", 0, "min_steps"),
    ("sizes", ((1e5,),), "one list per budget"),
])
def test_bad_sweep_configs_are_user_errors(key, value, words):
  with pytest.raises(UserError, match=re.escape(words)):
    make(sweep_cfg(**{key: value}))


def test_bad_recipe_is_a_user_error():
  cfg = sweep_cfg()
  cfg.recipe.lr_rule = "magic"
  with pytest.raises(UserError, match="recipe.lr_rule"):
    make(cfg)
  cfg = sweep_cfg()
  cfg.recipe.batch_rule = "fixed"  # without batch_tokens
  with pytest.raises(UserError, match="batch_tokens"):
    make(cfg)


def test_law_counting_non_embedding_parameters_is_refused(tmp_path):
  path = tmp_path / "law.json"
  law_lib.save_law(path, law_lib.build_law(E=1.5, A=300.0, B=900.0, alpha=0.3, beta=0.35,
                                           params_convention="non_embedding"))
  with pytest.raises(UserError, match="non_embedding"):
    make(sweep_cfg(prior=str(path)))


# --------------------------------------------------------------------------- shipped configs

SHIPPED = ["smoke", "tiny", "gpu_node", "tpu_v5p"]
SMOKE_MAX_FLOPS = 1.5e13  # 6ND of the tokens trained: what two CPU cores train in minutes


def _real_shape_fn():
  try:
    return importlib.import_module("chinchax.models.config").shape_for_params
  except ImportError:
    return None


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("which", ["stand_in", "real"])
def test_shipped_configs_make_grids(name, which):
  shape_fn = stand_in_shape if which == "stand_in" else _real_shape_fn()
  if shape_fn is None:
    pytest.skip("models.config is not importable")
  if name == "smoke" and which == "stand_in":
    pytest.skip("smoke's smallest sizes (10.1k) sit below the stand-in recipe's smallest model")
  cfg = importlib.import_module(f"chinchax.sweeps.configs.{name}").get_config(None)
  cells, refusals = grid.make_grid(cfg, shape_fn=shape_fn)
  budgets = sorted({c.budget for c in cells})
  assert len(budgets) == len(cfg.budgets), refusals
  total = sum(c.flops_6ND for c in cells)
  print(f"{name} ({which} shapes): {len(cells)} cells, {len(refusals)} refused, "
        f"total {total:.3g} FLOPs (6ND)")
  prior_N = grid.prior_optimum(cfg.prior)
  for C in budgets:
    Ns = [c.N for c in cells if c.budget == C]
    assert len(Ns) >= 2
    if name != "tiny":  # tiny is a pipeline check sitting at the smallest shapes
      assert min(Ns) < prior_N(C) < max(Ns)
  if name == "smoke":  # the design of its docstring (issue 12), minutes on two CPU cores
    assert len(budgets) >= 4 and budgets[-1] / budgets[0] >= 30
    for C in budgets:
      assert len({c.N for c in cells if c.budget == C}) >= 5
    assert not refusals
    # What is trained: one WSD run per shape, its stable part to the last branch point and a
    # cooldown per cell (sweeps/wsd.py), not a cosine run per cell.
    trained = 0.0
    for shape in {c.shape for c in cells}:
      mine = [c for c in cells if c.shape == shape]
      tokens_per_step = mine[0].batch_size * cfg.train.seq_len
      branches = wsd.plan([c.D for c in mine], cfg.train.wsd.decay_fraction, tokens_per_step)
      steps = max(b.start for b in branches) + sum(b.decay_steps for b in branches)
      trained += 6 * mine[0].N * steps * tokens_per_step
    assert cfg.schedule == "wsd" and 0.5 * total < trained < min(total, SMOKE_MAX_FLOPS)
  if name == "tiny":
    assert total < 3e12
