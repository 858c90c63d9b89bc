"""A sweep that measures its hyperparameters (hparams.lr_factors, batch_factors), and a sweep
whose recipe takes them from a fitted law (recipe.lr_rule = 'law:PATH')."""

import json
import math

import numpy as np
import pytest

from chinchax.scaling.hparams import file as hparams_file
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax import cli
from chinchax.sweeps import grid, recipe as recipe_lib
from chinchax.sweeps.configs import hparams_smoke, tiny
from chinchax.sweeps.train import loop
from tests.helpers import sweep_helper
from tests.scaling import hparams_synthetic as S

# The surface the stand-in run trains on: known optimal LR and batch (tokens) per (N, D).
LR = {"coef": 3e-3, "N": -0.5, "D": 0.3}
B = {"coef": 512.0, "D": 0.3}


def lr_opt(N, D):
  return LR["coef"] * (N / 1e5)**LR["N"] * (D / 8e5)**LR["D"]


def batch_opt(D):
  return B["coef"] * (D / 8e5)**B["D"]


def surface_train(c, workdir, **_):
  """`loop.train` replaced by L = 2 + 0.04·(ln η/η*)² + 0.02·(ln B/B*)²: real records."""
  from chinchax.scaling.runs import conventions  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import config as run_config  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.runs import records  # pylint: disable=g-import-not-at-top
  shape = run_config.model_config(c, 258).shape
  N, D = conventions.params(shape), c.tokens
  lr, tokens = c.optimizer.peak_lr, c.batch_size * c.seq_len
  loss = (2 + 0.04 * math.log(lr / lr_opt(N, D))**2
          + 0.02 * math.log(tokens / batch_opt(D))**2)
  record = records.make(name=c.name, shape=shape, D=D, eval_loss=loss, train_loss=loss,
                           steps=1, wall_s=0.0, schedule=c.optimizer.schedule,
                           hparams={"peak_lr": lr, "batch_size": c.batch_size,
                                    "seq_len": c.seq_len, "schedule": c.optimizer.schedule})
  records.write_result(workdir, record)
  return record


def _grid_argv(wd):
  return [f"--config={sweep_helper.CONFIG}", f"--workdir={wd}", "--config.budgets=()",
          "--config.fixed_n.sizes=(31968,100000)",
          "--config.fixed_n.tokens_per_param=(10,20)", "--config.min_steps=5",
          "--config.recipe.lr_ref=3e-3", "--config.recipe.lr_N_ref=1e5",
          "--config.recipe.lr_exponent=0.5", "--config.recipe.lr_max=1",
          "--config.recipe.batch_rule=fixed", "--config.recipe.batch_tokens=512",
          "--config.hparams.lr_factors=(0.25,0.5,1,2,4)",
          "--config.hparams.batch_factors=(0.5,1,2)", "--config.allow_repeats=True",
          "--config.bootstrap=50"]


def test_an_hparams_sweep_trains_the_grid_and_fits_the_known_laws(tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(loop, "train", surface_train)
  wd = tmp_path / "hp"
  assert cli.run(["sweep", *_grid_argv(wd)]) == 0
  out = capsys.readouterr().out
  records = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  assert len(records) == 2 * 2 * 5 * 3
  assert len({(r["hparams"]["peak_lr"], r["hparams"]["batch_size"]) for r in records}) == 30
  doc = hparams_file.load(wd / "hparams.json")
  assert not (wd / "law.json").exists()
  assert all(p["lr"]["flags"] == [] for p in doc["points"])
  # The surface is quadratic with no noise: the laws come back exactly (N is exact, D the
  # realised tokens of each batch, within 5% of each other).
  assert doc["lr"]["exponents"]["N"] == pytest.approx(LR["N"], abs=0.02)
  assert doc["lr"]["exponents"]["D"] == pytest.approx(LR["D"], abs=0.03)
  assert doc["batch"]["exponents"]["D"] == pytest.approx(B["D"], abs=0.05)
  assert doc["conventions"]["seq_len"] == 64 and doc["conventions"]["batch"].startswith("tokens")
  assert "LR law:" in out and "batch law:" in out
  assert (wd / "plots" / "hparams_lr.png").exists()
  assert "LR law:" in (wd / "report.md").read_text()


def test_names_carry_lr_and_batch_and_series_stay_apart():
  c = hparams_smoke.get_config()
  cells, refusals = grid.make_grid(c)
  assert not refusals and len(cells) == 2 * 2 * 5 * 3
  assert len({x.name for x in cells}) == len(cells)
  series = {x.series for x in cells}
  assert len(series) == 2 * 5 * 3  # one WSD run per (size, LR, batch), a branch per D
  rec = recipe_lib.from_config(c.recipe)
  for x in cells:  # every LR a factor of the recipe's LR of its size, every batch of its batch
    ratio = x.peak_lr / rec.lr(x.N, x.budget)
    assert min(abs(math.log(ratio / f)) for f in hparams_smoke.LR_FACTORS) < 1e-9
    assert x.batch_size in (2, 4, 8) and f"-B{x.batch_size}" in x.name


def _law_file(tmp_path) -> str:
  """An hparams.json whose LR law spans tiny's sizes: η* = 1e-2·(N/5e4)^-0.5·(D/1e5)^0.1."""
  from chinchax.scaling.hparams import runs as hparams_runs  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  runs = []
  for N in (3e4, 5e4, 8e4):
    for D in (3e4, 1e5, 3e5):
      x = math.log(1e-2 * (N / 5e4)**-0.5 * (D / 1e5)**0.1)
      y = math.log(256 * (D / 1e5)**0.5)
      for dx in np.log(2) * np.arange(-2, 3):
        for dy in np.log(2) * np.arange(-1, 2):
          loss = 2 + 0.04 * dx**2 + 0.02 * dy**2 + rng.normal(0, 1e-3)
          runs.append(hparams_runs.Run(N, D, math.exp(x + dx + 0.1), math.exp(y + dy), loss))
  path = str(tmp_path / "hparams.json")
  hparams_file.save(path, hparams_fit.fit(runs, bootstrap=20))
  return path


def _power_law(path: str, which: str):
  """(c, {v: e}) of hparams.json's `which` law, read from the file's JSON as written."""
  with open(path) as f:
    law = json.load(f)[which]
  return float(law["coef"]), {v: float(e) for v, e in law["exponents"].items()}


def test_law_rules_give_each_cell_the_laws_values(tmp_path, capsys):
  """Each cell's peak LR is c·N^p·D^q of the file's LR law at its N and realised D, and its
  batch the file's B* = c·D^q tokens at its target D (C/6N, from which the steps are then
  counted) in whole sequences, capped to keep min_steps steps: both computed here from the
  file's numbers."""
  path = _law_file(tmp_path)
  c = tiny.get_config()
  c.recipe.lr_rule = c.recipe.batch_rule = f"law:{path}"
  cells, _ = grid.make_grid(c)
  c_lr, e_lr = _power_law(path, "lr")
  c_b, e_b = _power_law(path, "batch")
  assert sorted(e_lr) == ["D", "N"] and list(e_b) == ["D"]
  k, min_steps = c.recipe.batch_multiple, c.min_steps
  assert len(cells) == 6
  for x in cells:
    assert x.isoflop and x.flops == "6ND"
    want = c_lr * float(x.N)**e_lr["N"] * x.D**e_lr["D"]
    assert x.peak_lr == pytest.approx(want, rel=1e-12)
    D_target = x.budget / (6.0 * x.N)
    seqs = c_b * D_target**e_b["D"] / x.seq_len  # B* in sequences: 10-17 on this grid
    cap = k * math.floor(D_target / (min_steps * x.seq_len) / k)
    assert 5 < seqs < cap  # neither the floor of one multiple nor the cap decides here
    assert x.batch_size == k * round(seqs / k), (x.name, x.batch_size, seqs)
  assert cli.run(["sweep", "--config=tiny", f"--config.recipe.lr_rule=law:{path}",
                  f"--config.recipe.batch_rule=law:{path}", "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert "LR, batch from" in out and "law, law" in out
  assert f"peak LR from {path}" in out and f"batch from {path}" in out
  # tiny's largest cells lie past the law's N range: each such cell is named.
  beyond = [x.name for x in cells if x.N > 8e4 or x.D > 3e5 or x.D < 3e4]
  assert beyond and all(f"warning: {n}: lr extrapolated" in out for n in beyond)


def test_a_missing_law_file_is_refused_in_one_line(tmp_path, capsys):
  assert cli.run(["sweep", "--config=tiny", f"--config.recipe.lr_rule=law:{tmp_path}/no.json",
                  "--dry-run"]) == 2
  err = capsys.readouterr().err
  assert "no.json" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_sweep_with_lr_from_a_law_trains_end_to_end(tmp_path):
  path = _law_file(tmp_path)
  wd = tmp_path / "sweep"
  # Exit status 1: two cells train, then are too few for the IsoFLOP fit (as in
  # test_executors); the point here is the cells' LR.
  assert cli.run(["sweep", *sweep_helper.argv(wd, f"--config.recipe.lr_rule=law:{path}",
                                              "--quiet")]) == 1
  c_lr, e_lr = _power_law(path, "lr")
  results = sweep_helper.results(str(wd))
  assert len(results) == 2
  for r in results.values():
    assert r["status"] == "done" and math.isfinite(r["eval_loss"])
    want = c_lr * r["N_total"]**e_lr["N"] * r["D"]**e_lr["D"]  # the law at the run's N, D
    assert r["hparams"]["peak_lr"] == pytest.approx(want, rel=1e-9)
  assert "The fit failed" in (wd / "report.md").read_text()


def test_isoflop_wsd_runs_of_a_grid_stay_apart():
  # With schedule='wsd' one run per (shape, batch, LR): each LR and batch names its own job.
  from chinchax.sweeps import spec  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.configs import smoke  # pylint: disable=g-import-not-at-top
  c = smoke.get_config()
  c.hparams.lr_factors, c.hparams.batch_factors = (0.5, 1, 2), (0.5, 1)
  jobs = spec.resolve(c, "/nonexistent").jobs
  assert len(jobs) == len({j.name for j in jobs}) == 9 * 3 * 2
  for j in jobs:  # every branch of a job has the job's LR and batch
    assert f"-lr{j.config.optimizer.peak_lr:.3g}".replace("e-0", "e-") in j.name
    assert f"-B{j.config.batch_size}-wsd" in j.name


def test_grid_refusals_are_named():
  c = hparams_smoke.get_config()
  c.hparams.batch_factors = (0.01, 0.02, 1)  # both round to one sequence
  c.min_steps = 2000  # 10.1k x 8 tokens/param at 8 sequences has 158 steps
  cells, refusals = grid.make_grid(c)
  assert any("rounds to 1 sequences, as another factor does" in r for r in refusals)
  assert any("steps < min_steps=2000" in r for r in refusals)
  assert all(x.steps >= 2000 for x in cells)
