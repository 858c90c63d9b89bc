"""The law beneath a checkpoint suite's schedule: L = law(N, D) + g(f), f = D / D_end.

A checkpoint of one long run is not a run trained to its D: before its learning rate has
decayed (a cosine run's until its end) it sits above such a run, by an excess that bends
every model's curve the same way at the same place in its run (`judgement.checks.curve_shape`
sees it), and the law, a function of N and D alone, bends itself to follow: on 8 models x 15
checkpoints of cosine runs to 40 tokens per parameter the law's 90% interval of a held the
truth in 37 of 100 draws (bench/design_coverage.py).

A checkpoint's place in its run is f = D / D_end, D_end its model's last checkpoint (the
run's end), and the schedule's excess at f is, to first order, a function of f alone: the
learning rate at f is the same fraction of its peak in every run of one schedule, however
long. So the law is fitted with a free excess g, piecewise linear in log f through knots,
g = 0 at f = 1 (the run's end is a run trained to its D) and g >= 0 before it (a checkpoint
whose learning rate has not yet decayed is no better than a run trained to its D):

    L(N, D) = E + A/N^alpha + B/D^beta + g(D / D_end)

The law's terms stay identified. Where every model ran to one token multiple k the runs at
one f lie on the ray D = f k N, and the D term's coefficient changes across rays as f^-beta
while g(f) is one constant per ray; g then also absorbs any term of D/N alone, which is why
g's sign is held (a term of D/N that falls along the run, as a constant learning rate's
excess does, is the law's, not the schedule's). Where every model ran to one D (Pythia's
suite) f is D over that D and g would be one more term of D: it is not fitted. Where the
models ran to different multiples
(a suite whose small models saw more tokens per parameter) f and D/N part, and g is told
from a term of D/N by the runs themselves: on cosine suites run to 80 down to 20 tokens per
parameter the law read directly held a in 9 of 40 draws (bench/design_coverage.py).

The fit is the law's objective (Huber, delta 1e-3, of log-residuals) by scipy's least_squares
from the best point of a grid over (alpha, beta) with the rest profiled out (non-negative
linear least squares on relative residuals); its bootstrap resamples whole models, each with
all its checkpoints, at most MAX_RESAMPLES refits from the full fit."""

import dataclasses

import numpy as np
# scipy is imported in the functions that use it: a fit needs none of it (0.5 s of import).

from chinchax.scaling.numerics import fmt
from chinchax.scaling.parametric import fit as fit_lib

ONE_RTOL = 0.05  # the models' D_end / N within 5% of one another: said as one multiple
MAX_KNOTS = 16  # distinct places f (within SAME) up to this many are each a knot; else quantiles
SAME = 0.02  # places within 2% are one knot (as runs/design reads sizes and tokens)
MIN_SIZES = 6  # whole models are resampled: fewer leave too few distinct resamples
MAX_RESAMPLES = 200
REFIT_EVALUATIONS = 300
P_REJECT = 1e-3  # the law without g is rejected when the excess's better fit has this p-value
GRID = np.arange(0.05, 1.21, 0.05)  # alpha and beta of the profiled start
TEXT = "E + A/N^alpha + B/D^beta + g(D/D_end)"
ONE_D = "every model ran to one D"  # how `places` begins when g would be a term of D alone


@dataclasses.dataclass(frozen=True)
class Places:
  """Each run's place in its model's run and the knots of g."""
  f_n: np.ndarray  # D / D_end of each run
  knots: np.ndarray  # log f of g's free knots, increasing, all below 0 (f = 1 is g = 0)
  multiples: tuple[float, float]  # the models' D_end / N, lowest and highest

  @property
  def text(self) -> str:
    """The models' runs, in words: "every model to 40 tokens per parameter" or "the models to
    20-80 tokens per parameter"."""
    lo, hi = self.multiples
    if hi <= lo * (1 + ONE_RTOL):
      return f"every model to {fmt.num(np.sqrt(lo * hi))} tokens per parameter"
    return f"the models to {fmt.num(lo)}-{fmt.num(hi)} tokens per parameter"


def places(N: np.ndarray, D: np.ndarray, sizes_n: np.ndarray) -> Places | str:
  """The places of the runs in their models' runs, or a line saying why the method does not
  apply (too few models, every model to one D, or no checkpoint before a run's end)."""
  k = int(sizes_n.max()) + 1
  if k < MIN_SIZES:
    return f"{k} sizes; it resamples whole models and needs {MIN_SIZES} or more"
  D_end_k = np.zeros(k)
  np.maximum.at(D_end_k, sizes_n, D)
  N_k = np.exp(np.bincount(sizes_n, np.log(N)) / np.bincount(sizes_n))
  multiple_k = D_end_k / N_k
  if D_end_k.max() <= D_end_k.min() * (1 + ONE_RTOL):
    return (f"{ONE_D} ({fmt.num(D_end_k.min())}-{fmt.num(D_end_k.max())} tokens), so a "
            "checkpoint's place in its run is a function of D alone and g cannot be told from "
            "the law's D term")
  f_n = D / D_end_k[sizes_n]
  lf = np.log(f_n[f_n < 1 / (1 + SAME)])
  v = np.sort(lf)
  distinct = v[np.concatenate([[True], np.diff(v) > np.log1p(SAME)])] if len(v) else v
  knots = distinct if len(distinct) <= MAX_KNOTS else np.quantile(
      lf, np.linspace(0, 1, MAX_KNOTS + 1)[:-1])
  if len(knots) < 2:
    return "every checkpoint is at its run's end"
  return Places(f_n, knots, (float(multiple_k.min()), float(multiple_k.max())))


def basis(lf_n: np.ndarray, knots: np.ndarray) -> np.ndarray:
  """(n, K): g(f) = basis @ g, linear in log f between the knots and to 0 at log f = 0,
  constant below the first knot."""
  x = np.concatenate([knots, [0.0]])
  eye = np.eye(len(x))[:, :-1]  # the last knot (f = 1) is held at 0
  # np.interp holds the end values beyond the ends: constant below the first knot.
  return np.stack([np.interp(lf_n, x, eye[:, j]) for j in range(len(knots))], axis=1)


@dataclasses.dataclass(frozen=True)
class ScheduleFit:
  theta: np.ndarray  # log A, log B, log E, alpha, beta (uncentred), then g at the knots
  places: Places
  p_value: float  # F test of the law without g against this fit, on log-residuals
  objective: float

  @property
  def law(self) -> np.ndarray:
    """[E, A, B, alpha, beta] of the law beneath the schedule."""
    lA, lB, lE, alpha, beta = self.theta[:5]
    return np.array([np.exp(lE), np.exp(lA), np.exp(lB), alpha, beta])

  @property
  def g(self) -> np.ndarray:
    return self.theta[5:]

  @property
  def a(self) -> float:
    return float(self.theta[4] / (self.theta[3] + self.theta[4]))

  def predict(self, N, D, f=None) -> np.ndarray:
    """The law's loss at (N, D); with f, the checkpoint's (the law plus g(f))."""
    E, A, B, alpha, beta = self.law
    L = E + A / np.asarray(N, np.float64)**alpha + B / np.asarray(D, np.float64)**beta
    return L if f is None else L + basis(np.log(f), self.places.knots) @ self.g


def _huber(r: np.ndarray, delta: float) -> float:
  a = np.abs(r)
  return float(np.sum(np.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))))


def _model(x, cN, cD, Phi):
  """log of the loss, its parts and the sum, in centred coordinates."""
  T_N, T_D, E = np.exp(x[0] - x[3] * cN), np.exp(x[1] - x[4] * cD), np.exp(x[2])
  P = E + T_N + T_D + Phi @ x[5:]
  return P, T_N, T_D, E


def _jacobian(x, cN, cD, Phi):
  P, T_N, T_D, E = _model(x, cN, cD, Phi)
  return np.concatenate([np.stack([T_N, T_D, np.full_like(P, E), -cN * T_N, -cD * T_D],
                                  axis=1), Phi], axis=1) / P[:, None]


def _profiled(lN, lD, L, Phi, alpha, beta):
  """(E, A, B, g) >= 0 by linear least squares of the relative residuals at (alpha, beta)."""
  from scipy import optimize
  X = np.concatenate([np.ones((len(L), 1)), np.exp(-alpha * lN)[:, None],
                      np.exp(-beta * lD)[:, None], Phi], axis=1) / L[:, None]
  r = optimize.lsq_linear(X, np.ones(len(L)), bounds=(0, np.inf), method="bvls")
  return r.x, float(r.cost)


def _solve(x0, cN, cD, lL, Phi, delta, max_nfev=REFIT_EVALUATIONS):
  from scipy import optimize
  K = Phi.shape[1]
  lo = [-np.inf, -np.inf, -30.0, 0.01, 0.01] + [0.0] * K
  hi = [np.inf, np.inf, float(lL.min()), 5.0, 5.0] + [np.inf] * K
  x0 = np.clip(x0, np.add(lo, 1e-9), np.subtract(hi, 1e-9))
  return optimize.least_squares(lambda x: np.log(_model(x, cN, cD, Phi)[0]) - lL, x0,
                                jac=lambda x: _jacobian(x, cN, cD, Phi), bounds=(lo, hi),
                                loss="huber", f_scale=delta, max_nfev=max_nfev)


def _centre(N, D):
  lN, lD = np.log(N), np.log(D)
  return lN, lD, lN.mean(), lD.mean()


def fit(N, D, loss, law_theta, pl: Places, delta: float) -> ScheduleFit:
  """The law beneath the schedule from the profiled grid's best point and from the law's own
  fit (g = 0), and the F test of the law without g inside it."""
  from scipy import special
  N, D, L = (np.asarray(v, np.float64) for v in (N, D, loss))
  lN, lD, mN, mD = _centre(N, D)
  cN, cD, lL = lN - mN, lD - mD, np.log(L)
  Phi = basis(np.log(pl.f_n), pl.knots)
  best = min(((_profiled(lN, lD, L, Phi, al, be), al, be) for al in GRID for be in GRID),
             key=lambda t: t[0][1])
  (c, _), al, be = best
  with np.errstate(divide="ignore"):
    lc = np.log(np.maximum(c[:3], 1e-300))
  starts = [np.concatenate([[lc[1] - al * mN, lc[2] - be * mD, lc[0], al, be], c[3:]])]
  E, A, B, alpha, beta = law_theta
  starts.append(np.concatenate([[np.log(A) - alpha * mN, np.log(B) - beta * mD,
                                 np.log(max(E, 1e-9)), alpha, beta], np.zeros(len(pl.knots))]))
  r = min((_solve(s, cN, cD, lL, Phi, delta) for s in starts), key=lambda r: r.cost)
  law = np.array([np.log(A) - alpha * mN, np.log(B) - beta * mD, np.log(max(E, 1e-300)),
                  alpha, beta])
  r_law = np.log(_model(np.concatenate([law, np.zeros(len(pl.knots))]), cN, cD, Phi)[0]) - lL
  r_fit = r.fun
  keep = np.abs(r_fit) <= 5 * 1.4826 * np.median(np.abs(r_fit - np.median(r_fit))) + 1e-12
  n, q = int(keep.sum()), 5 + len(pl.knots)
  rss_law, rss_fit = float(np.sum(r_law[keep]**2)), float(np.sum(r_fit[keep]**2))
  p = 1.0
  if n > q + 2 and rss_fit > 0 and rss_law > rss_fit:
    p = float(special.fdtrc(len(pl.knots), n - q,
                            (rss_law - rss_fit) / len(pl.knots) / (rss_fit / (n - q))))
  return ScheduleFit(_uncentre(r.x, mN, mD), pl, p, _huber(r_fit, delta))


def _uncentre(x, mN, mD):
  x = np.array(x, np.float64)
  x[0] += x[3] * mN
  x[1] += x[4] * mD
  return x


def bootstrap(N, D, loss, sf: ScheduleFit, delta: float, *, n_resamples: int, seed: int,
              clusters) -> np.ndarray:
  """[E, A, B, alpha, beta] of the law beneath the schedule refitted on min(n_resamples,
  MAX_RESAMPLES) resamples of whole models, each from the full fit, shape (R', 5)."""
  N, D, L = (np.asarray(v, np.float64) for v in (N, D, loss))
  lN, lD, lL = np.log(N), np.log(D), np.log(L)
  Phi = basis(np.log(sf.places.f_n), sf.places.knots)
  n, R = len(lN), min(int(n_resamples), MAX_RESAMPLES)
  counts_Rxn = fit_lib.resample_counts(n, R, np.random.default_rng([seed, 7]), clusters)
  out = []
  for counts in counts_Rxn.astype(int):
    idx = np.repeat(np.arange(n), counts)
    mN, mD = lN[idx].mean(), lD[idx].mean()
    x0 = sf.theta.copy()
    x0[0] -= x0[3] * mN
    x0[1] -= x0[4] * mD
    r = _solve(x0, lN[idx] - mN, lD[idx] - mD, lL[idx], Phi[idx], delta)
    if r.status >= 0 and np.all(np.isfinite(r.x)):
      out.append(_uncentre(r.x, mN, mD)[:5])
  t = np.reshape(out, (-1, 5))
  return np.stack([np.exp(t[:, 2]), np.exp(t[:, 0]), np.exp(t[:, 1]), t[:, 3], t[:, 4]], axis=1)
