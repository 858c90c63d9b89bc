"""Intervals of Approach 2: a parametric bootstrap from the fit whose minima were read.

The sizes of a budget are a design, not a sample, so every resample keeps them and draws
new losses: the fitted values of the method the estimate came from (`isoflop_minima.Minima
.used`, after any fallback) plus Gaussian noise of that fit's pooled residual standard
deviation, and refits each resample by that same method. So an interval is its own
estimator's: a parabola's from the parabola, a local estimate's from the local fits.

* "local": the window parabolas at the runs they fitted, and the observed loss elsewhere
  (runs far from a minimum only decide where the window falls); sigma the noise the local
  fits measure (`isoflop_local`), with its degrees of freedom. A run the local fits rejected
  keeps its loss in every resample (it stays an outlier, as in the data).
* "vp", "vp_levels": the profile fit's values; sigma² = RSS / (n − p), n runs in the
  screened budgets, p the profile fit's parameters (K + 4 with a shared level, 2K + 3 with
  free levels). Pooling over budgets is what makes 3-size budgets work: the joint fit of K
  budgets of 3 sizes leaves 2K − 4 degrees of freedom.
* "parabola": each budget's parabola over its sizes, sigma² = RSS / (n − 3K); with 3 sizes
  per budget nothing is left, and the profile fit's values and noise stand in.

These fits passed the lack-of-fit check (a method that failed it was replaced by the local
estimate), so the noise is drawn from a model that fits. With few degrees of freedom sigma
itself is uncertain, so each resample draws its own noise level, sigma_r² =
sigma²·dof/chi²_dof (its scaled inverse-chi² distribution given the residuals): for an
estimate linear in the losses that makes the percentile interval the exact Student-t
interval. On 200 noisy sweeps of 5 budgets of 3 sizes (dof = 6, alpha/beta = 0.7/0.35,
drifting grid) the 90% interval of a held the truth in 176 with drawn noise levels and in
168 with sigma fixed (tests/scaling/test_isoflop_vp.py).

Each resample is read as the data were (`isoflop_minima.combine`): a budget enters the
power-law fit only when the resample's lowest loss is at an interior size, and the local
estimate stands in where the method's minimum falls outside the sizes; so a resample may
keep a budget the data dropped, or drop one the data kept. Extrapolating a resample's minimum out
of its sizes instead gives a budget whose profile is flat at one end a minimum anywhere
beyond it. Over 200 noisy sweeps of the smoke's design with a known law (6 budgets of 5
sizes, 0.4% noise; the estimate of a has sd 0.041), extrapolated minima made 57 of the 90%
intervals of a wider than 0.3 (a tenth wider than 3.4) and 189 held the truth; read as the
data are, 2 were wider than 0.3 (median width 0.141) and 194 held it. On test_isoflop_vp's
drifting 3-size grid, where no minimum comes near an edge, the two agree (176 of 200). A
resample is degenerate, skipped and counted, when fewer than two budgets keep a minimum
inside their sizes.

Where the default ("auto") read a joint fit because the runs of some budget do not place its
minimum (`isoflop_minima.Minima.rests_on_shape`), that minimum comes from the fit's profile
shape, and nothing in the runs says whether the shape is right. Half the resamples are then
the local estimate's (drawn and refitted as "local" above, over the budgets the runs place):
an equal mixture of the two readings by design, kept equal where resamples fail to fit (each
half keeps as many draws as the other has; the rest count as failed, so a local half that
mostly fails leaves no interval, as a mostly failed bootstrap does). On 100 clean sweeps each
of the constant-LR and broken-law truths (tests/helpers/truths.py, 9 sizes a budget) with grid
centres wandering past the sizes' ends (drift 2.2), the joint fit was read in 87 and 99; the
default's 90% interval held the truth in 57 and 65 of the 100 with the joint fit's bootstrap
alone, in 96 and 98 mixed (bench/approach2_coverage.py --drift=2.2 --diverged=0). The price
in the family itself (the law's own profiles, alpha/beta 0.34/0.28, 0.7/0.35, 0.3/0.6, 7 and
9 sizes, drift 2.2: `--truths=law:0.7/0.35 --methods=auto,vp --sizes=7`): the mixed interval
held the truth in 97-99 of 100 where vp's alone held it in 88-93, at 3-8x vp's median width
(the most where alpha is twice beta, 0.03 against 0.004; other grids gave up to 15x).
Nothing is mixed where the local fits cannot be bootstrapped (`Minima.mixes_local`): fewer
than 2 budgets placed, or no budget keeping more than 3 runs near its minimum (5 sizes over
a 36x span, where vp's interval held the truth in 17 and 33 of 50 such sweeps);
`interval_note` says which, and law.json carries it in the notes.
"""

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.isoflop import local as isoflop_local
from chinchax.scaling.isoflop import minima as isoflop_minima
from chinchax.scaling.isoflop import vp as isoflop_vp
from chinchax.scaling.runs.table import Runs

KIND = "parametric"  # the fit's values plus pooled Gaussian noise, sizes kept
KIND_MIXED = "parametric, half local"  # half of them drawn from the local estimate's fits
CHUNK = 500  # resamples per batch: bounds the (resamples, runs, parameters) temporaries


def _noise_model(m) -> tuple[np.ndarray, np.ndarray, float, int]:
  """(mean losses, which runs get noise, sigma, dof) of the fit m's minima came from."""
  bud, y = m.bud, m.y_n
  n = len(y)
  if m.used == "local":
    return isoflop_local.local_noise(m.loc, y)
  if m.used == "parabola" and n > 3 * len(bud.C_K):
    r = y - isoflop_minima.fitted(bud, m.est)
    dof = n - 3 * len(bud.C_K)
    return y - r, np.ones(n, bool), float(np.sqrt(r @ r / dof)), dof
  design = bud.design(m.used if m.used != "parabola" else "vp")
  model = m.est.vp if m.est.vp is not None else isoflop_vp.fit(design, y[None])
  p = design.n_params
  if n <= p:
    raise UserError(
        f"Approach 2's bootstrap needs more runs than the profile fit has parameters: "
        f"{n} runs in {len(bud.C_K)} budgets fit its {p} parameters exactly and leave no "
        "residual to measure the noise by; add a size to a budget, or a budget")
  if not model.ok_R[0]:
    raise UserError("Approach 2's bootstrap needs the profile fit as its noise model, and "
                    "no profile of the law's form fits these budgets")
  return model.fitted_Rxn[0], np.ones(n, bool), float(np.sqrt(model.rss_R[0] / (n - p))), n - p


def bootstrap_isoflop(runs: Runs, n_resamples: int = 1000, seed: int = 0,
                      method: str = "auto") -> dict:
  """Samples of a, b, log_kN, log_kD of Approach 2 by the parametric bootstrap above."""
  if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or (
      n_resamples < 1):
    raise UserError(f"bootstrap: n_resamples must be a positive integer, got {n_resamples!r}")
  m = isoflop_minima.read(runs, method)
  model = _noise_model(m)
  mixed = m.mixes_local and n_resamples >= 2
  n_fit = n_resamples - n_resamples // 2 if mixed else n_resamples
  out, n_failed = isoflop_local.draws(m.bud, model, m.used, n_fit, seed, CHUNK)
  if mixed:
    local = isoflop_minima.read(runs, "local")
    more, _ = isoflop_local.draws(local.bud, _noise_model(local), "local",
                                  n_resamples - n_fit, seed + 1, CHUNK)
    # Equal shares whatever fails to fit: each half keeps as many draws as the other has (the
    # fit's one more where n is odd); the draws left out count as failed.
    k = min(out.shape[1], more.shape[1])
    k_fit = min(out.shape[1], k + 2 * n_fit - n_resamples)
    out = np.concatenate([out[:, :k_fit], more[:, :k]], axis=1)
    n_failed = n_resamples - out.shape[1]
  a, log_kN, b, log_kD = out
  return {"a": a, "b": b, "log_kN": log_kN, "log_kD": log_kD, "n_resamples": n_resamples,
          "n_failed": n_failed, "seed": seed, "kind": KIND_MIXED if mixed else KIND,
          "sigma": model[2], "dof": int(model[3]), "method": m.used,
          "notes": (interval_note(m, mixed),) if m.rests_on_shape else ()}


def interval_note(m, mixed: bool) -> str:
  """What the interval of a is made of where a minimum rests on the fit's profile shape."""
  placed = int(m.loc.convex_RxK[0].sum())
  if mixed:
    return ("the interval of a is half the joint fit's bootstrap and half the local "
            f"estimate's over the {placed} budgets the runs place, so it spans both readings")
  if placed < 2:
    why = "fewer than 2 budgets are placed by their runs"
  elif not m.mixes_local:
    why = ("the local fits cannot measure the noise: no budget keeps more than 3 runs near "
           "its minimum")
  else:
    why = "one resample cannot be split"
  return (f"the interval of a is the joint fit's bootstrap alone ({why}), so it holds only if "
          "the fit's profile shape is right")
