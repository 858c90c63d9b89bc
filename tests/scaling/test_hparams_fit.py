"""fit-hparams on synthetic grids whose optimal LR and batch are known (hparams_synthetic)."""

import math

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax.scaling.hparams import local as hparams_local
from chinchax.scaling.hparams import runs as hparams_runs
from tests.scaling import hparams_synthetic as S


def _inside(doc, which):
  return {name: doc[which]["ci"][name][0] <= truth <= doc[which]["ci"][name][1]
          for name, truth in S.TRUTH[which].items()}


def test_quadratic_surface_recovers_the_laws_within_their_intervals():
  doc = hparams_fit.fit(S.runs(np.random.default_rng(1)), bootstrap=200)
  assert all(_inside(doc, "lr").values()), doc["lr"]["ci"]
  assert all(_inside(doc, "batch").values()), doc["batch"]["ci"]
  assert doc["lr"]["exponents"]["N"] == pytest.approx(-0.713, abs=0.03)
  assert doc["lr"]["exponents"]["D"] == pytest.approx(0.307, abs=0.03)
  assert doc["batch"]["exponents"]["D"] == pytest.approx(0.571, abs=0.05)
  assert all(p["lr"]["flags"] == [] for p in doc["points"])


def test_local_fit_beats_the_argmin_between_grid_values():
  # Noise-free: the quadratic's vertex is the truth; the argmin is off by up to half a step.
  runs = S.runs(np.random.default_rng(2), sigma=0.0, off=0.3)
  for p, fit in zip(hparams_runs.points(runs), hparams_fit.fit(runs, bootstrap=0)["points"]):
    assert math.log(fit["lr"]["opt"]) == pytest.approx(math.log(S.lr_opt(p.N, p.D)), abs=1e-6)
    assert math.log(fit["batch"]["opt"]) == pytest.approx(math.log(S.batch_opt(p.D)), abs=1e-6)


@pytest.mark.slow
def test_ninety_percent_intervals_cover_the_truth_about_ninety_percent_of_replicates():
  """300 noisy replicates (~25 s): each exponent's 90% interval must hold the truth in at
  least 250 (scipy.stats.binom, per exponent): an interval whose true coverage is 80% passes
  with probability P(Bin(300, 0.8) >= 250) = 0.083, so fails with 0.917; one at exactly 90%
  fails with P(Bin(300, 0.9) < 250) = 1.3e-4 (3.9e-4 for any of the three). These intervals
  cover 0.88-0.89 on this design (263, 267 and 264 of these 300; at 0.877 an exponent fails
  with 0.011)."""
  hits, n = np.zeros(3), 300
  for i in range(n):
    doc = hparams_fit.fit(S.runs(np.random.default_rng(100 + i), sigma=0.004,
                                 sizes=S.SIZES[:2], ratios=S.RATIOS[:2] + (S.RATIOS[2],)),
                          bootstrap=100, seed=i)
    inside = _inside(doc, "lr")
    hits += [inside["N"], inside["D"], _inside(doc, "batch")["D"]]
  assert (hits >= 250).all(), hits


def test_skewed_surface_with_divergence_recovers_exponents():
  # Steeper above the optimum, nan beyond 1.6 ln-units (5x): the exponents are still inside.
  doc = hparams_fit.fit(S.runs(np.random.default_rng(3), skew=1.0, diverge_at=1.6),
                        bootstrap=200)
  inside = _inside(doc, "lr")
  assert inside["N"] and inside["D"], doc["lr"]["ci"]
  assert sum(p["diverged"] for p in doc["points"]) > 0
  assert any("diverged" in w for w in doc["warnings"])


def test_diverged_runs_are_left_out_not_averaged_in():
  rng = np.random.default_rng(4)
  runs = S.runs(rng, sigma=0.0)
  clean = hparams_fit.fit(runs, bootstrap=0)
  # Add, at every point, runs beyond the grid's top LR: nan, and an exploded finite loss.
  extra = []
  for p in hparams_runs.points(runs):
    top = float(p.lr.max())
    for B in np.unique(p.B):
      extra += [hparams_runs.Run(p.N, p.D, top * 2, float(B), math.nan),
                hparams_runs.Run(p.N, p.D, top * 4, float(B), 50.0)]
  doc = hparams_fit.fit(runs + extra, bootstrap=0)
  assert [p["diverged"] for p in doc["points"]] == [2 * 5] * 9
  for a, b in zip(clean["points"], doc["points"]):
    assert b["lr"]["opt"] == pytest.approx(a["lr"]["opt"], rel=1e-9)


def test_an_optimum_past_the_grid_is_flagged_edge_and_left_out():
  rng = np.random.default_rng(5)
  runs = S.runs(rng, off=0.0)
  shifted = S.runs(rng, off=0.0, sizes=(2e7,), ratios=(40,), lr_shift=2.5)  # grid 6x too high
  doc = hparams_fit.fit(runs + shifted, bootstrap=0)
  flagged = [p for p in doc["points"] if "edge" in p["lr"]["flags"]]
  assert [(p["N"], p["D"]) for p in flagged] == [(2e7, pytest.approx(8e8))]
  assert doc["lr"]["points_used"] == 9
  assert any("N=2e7" in w and "edge" in w for w in doc["warnings"])


def test_a_flat_surface_is_flagged():
  runs = S.runs(np.random.default_rng(6), k1=1e-6, sigma=0.0, sizes=(1e7,), ratios=(20,))
  fit = hparams_local.optimum(hparams_runs.points(runs)[0])
  assert "flat" in fit.lr.flags


def test_too_few_located_points_is_one_clear_error():
  runs = S.runs(np.random.default_rng(7), sizes=(1e7,), ratios=(20, 60))
  with pytest.raises(UserError, match="needs 3 or more points that vary N and D"):
    hparams_fit.fit(runs, bootstrap=0)
  doc = hparams_fit.fit(runs, lr_vars=("D",), bootstrap=0)  # the D form needs two
  assert set(doc["lr"]["exponents"]) == {"D"}


def test_a_batch_optimum_past_the_grid_reads_the_lr_at_the_grids_edge():
  # Best LR ∝ B^1/2 and every batch grid 4x above B*: batch flagged `edge`, and the LR is the
  # best one at the grid's smallest batch, not one extrapolated to B* outside the grid.
  runs = S.runs(np.random.default_rng(8), sigma=0.0, batch_shift=math.log(4) + 2 * math.log(2),
                lr_batch_slope=0.5, off=0.0)
  doc = hparams_fit.fit(runs, bootstrap=0, lr_vars=("D",))
  for p, fit in zip(hparams_runs.points(runs), doc["points"]):
    assert "edge" in fit["batch"]["flags"]
    B_edge = float(np.min(p.B))  # the window's smallest batch is the grid's smallest
    want = S.lr_opt(p.N, p.D) * (B_edge / S.batch_opt(p.D))**0.5
    assert fit["lr"]["opt"] == pytest.approx(want, rel=1e-6)


def test_csv_failed_empty_and_infinite_losses_read_as_diverged(tmp_path):
  path = tmp_path / "runs.csv"
  path.write_text("N,D,lr,batch_tokens,loss,status\n1e7,2e8,1e-3,512,2.5,done\n"
                  "1e7,2e8,2e-3,512,,done\n1e7,2e8,4e-3,512,inf,done\n"
                  "1e7,2e8,8e-3,512,2.4,failed\n1e7,2e8,1.6e-2,512,nan,\n")
  runs, _ = hparams_runs.read([str(path)])
  assert [r.loss for r in runs][0] == 2.5
  assert all(math.isnan(r.loss) for r in runs[1:])
  fit = hparams_local.optimum(hparams_runs.points(runs)[0])
  assert fit.diverged == 4 and fit.runs == 5
