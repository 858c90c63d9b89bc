"""The law's form as a source of uncertainty in a, on designs that do not read the minima.

On an IsoFLOP grid each budget's minimum is seen, and a is read from where the losses are
lowest. A ladder (sizes x token multipliers) or a checkpoint suite sees no minimum: a comes
from how the fitted form bends between the runs' tokens per parameter and the optimum's,
which may lie outside them. Two forms that fit the runs equally well can then give different
a. On a 5-size ladder at 20-200 tokens per parameter of a Kaplan-form truth (a = 0.556, its
optimum at 4-11 tokens per parameter), E + A/N^alpha + B/D^beta gives a = 0.70-0.83 and its
bootstrap interval misses the truth in a quarter of draws, while the two forms' residuals
are the same to the noise (an F test rejects neither).

So Approach 3 also fits the nesting form

    L(N, D) = E + (A/N^alpha + B/D^beta)^gamma,   GAMMA in [GAMMA_MIN, 1]

(gamma = 1 is the law; E = 0, beta = 1, gamma = alpha_D is Kaplan et al.'s form). Its a is
beta/(alpha + beta) as the law's is: gamma and E change the loss, not where along C = 6ND
the inner sum is least. The interval of a the fit reports is the hull of the two forms'
intervals, and the entry says when the forms disagree (disjoint intervals) or when the runs
reject the law's form (`P_REJECT`). The form is fitted by the same objective as the law
(Huber, delta 1e-3, of log-residuals: scipy's `least_squares` with loss="huber" and
f_scale = delta is that objective), its bootstrap draws the same resamples' kind (pairs or
whole models) with at most MAX_RESAMPLES refits, each started from the full fit and
stopped after REFIT_EVALUATIONS evaluations."""

import dataclasses

import numpy as np
# scipy is imported in the functions that use it: a fit needs none of it (0.5 s of import).

from chinchax.scaling.parametric import fit as fit_lib

GAMMA_MIN = 0.05  # below this the outer power flattens every term: not a language model's loss
EXPONENT_BOUNDS = (0.01, 5.0)  # inner exponents; the loss's own are alpha*gamma, beta*gamma
MAX_RESAMPLES = 200  # refits of the form: one scipy solve each (~10 ms), not a batched Newton
# A refit starts at the full fit and stops after this many evaluations. Fewer are cheaper and
# wrong: the refits' slow direction is the ridge of gamma against the exponents, and stopping
# early keeps them near the start; on one Kaplan-form ladder 100 evaluations cut the upper end
# of a's interval from 0.823 to 0.746, 40 to 0.694 (a true 0.556, 200 resamples).
REFIT_EVALUATIONS = 300
P_REJECT = 1e-3  # the law's form is rejected when the form's better fit has this p-value
TEXT = "E + (A/N^alpha + B/D^beta)^gamma"


@dataclasses.dataclass(frozen=True)
class FormFit:
  theta: np.ndarray  # log A, log B, log E, alpha, beta, gamma
  p_value: float  # F test of the law's form (gamma = 1) against this one, on log-residuals
  objective: float  # the summed Huber loss of the log-residuals, as the law's fit reports it

  @property
  def a(self) -> float:
    return float(self.theta[4] / (self.theta[3] + self.theta[4]))

  @property
  def gamma(self) -> float:
    return float(self.theta[5])

  @property
  def values(self) -> np.ndarray:
    """[E, A, B, alpha, beta, gamma]: law.json's order (scaling.numerics.optimum)."""
    return natural(self.theta)

  E = property(lambda self: float(self.values[0]))
  A = property(lambda self: float(self.values[1]))
  B = property(lambda self: float(self.values[2]))
  alpha = property(lambda self: float(self.theta[3]))
  beta = property(lambda self: float(self.theta[4]))

  def predict(self, N, D) -> np.ndarray:
    return np.exp(log_loss(self.theta, np.log(N), np.log(D)))


def natural(theta_Sx6: np.ndarray) -> np.ndarray:
  """[E, A, B, alpha, beta, gamma] from the solver's [log A, log B, log E, alpha, beta, gamma]."""
  t = np.asarray(theta_Sx6, np.float64)
  return np.stack([np.exp(t[..., 2]), np.exp(t[..., 0]), np.exp(t[..., 1]), t[..., 3],
                   t[..., 4], t[..., 5]], axis=-1)


def _huber(r: np.ndarray, delta: float) -> float:
  a = np.abs(r)
  return float(np.sum(np.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))))


def log_loss(theta, lN, lD):
  lA, lB, lE, alpha, beta, gamma = theta
  return np.logaddexp(lE, gamma * np.logaddexp(lA - alpha * lN, lB - beta * lD))


def _jacobian(theta, lN, lD):
  """d log L / d theta, in closed form: scipy's finite differences cost 7 evaluations a step
  and made the bootstrap 5x slower."""
  lA, lB, lE, alpha, beta, gamma = theta
  u, v = lA - alpha * lN, lB - beta * lD
  S = np.logaddexp(u, v)
  to_T = -np.expm1(-np.logaddexp(0.0, gamma * S - lE))  # 1 - sigmoid(lE - gamma*S)
  p_u = np.exp(u - S)
  g = to_T * gamma
  return np.stack([g * p_u, g * (1 - p_u), 1 - to_T, -g * p_u * lN, -g * (1 - p_u) * lD,
                   to_T * S], axis=1)


def _solve(theta0, lN, lD, lL, delta, max_nfev=300):
  """The form's fit from theta0, in coordinates centred on the runs (log N and log D less
  their means: the coefficient and its exponent then move apart), returned uncentred."""
  from scipy import optimize
  mN, mD = lN.mean(), lD.mean()
  shift = lambda th, sign: th + sign * np.array([th[3] * mN, th[4] * mD, 0, 0, 0, 0])
  cN, cD = lN - mN, lD - mD
  lo = [-np.inf, -np.inf, -30.0, EXPONENT_BOUNDS[0], EXPONENT_BOUNDS[0], GAMMA_MIN]
  hi = [np.inf, np.inf, float(lL.min()), EXPONENT_BOUNDS[1], EXPONENT_BOUNDS[1], 1.0]
  x0 = np.clip(shift(np.asarray(theta0, np.float64), -1), np.add(lo, 1e-6),
               np.subtract(hi, 1e-6))
  r = optimize.least_squares(lambda th: log_loss(th, cN, cD) - lL, x0,
                             jac=lambda th: _jacobian(th, cN, cD), bounds=(lo, hi),
                             loss="huber", f_scale=delta, max_nfev=max_nfev)
  r.x = shift(r.x, +1)
  return r


def _starts(law_theta, lN, lD, lL) -> list[np.ndarray]:
  """From the law itself (gamma = 1), and from Kaplan-like shapes (small gamma, each inner
  term 1 at the runs' centre, E a fraction of the lowest loss)."""
  E, A, B, alpha, beta = law_theta
  out = [np.array([np.log(A), np.log(B), np.log(max(E, 1e-9)), alpha, beta, 1.0])]
  for gamma in (0.1, 0.3):
    ex = np.clip(np.array([alpha, beta]) / gamma, *EXPONENT_BOUNDS)
    for e_frac in (0.01, 0.5):
      out.append(np.array([ex[0] * lN.mean(), ex[1] * lD.mean(),
                           np.log(e_frac) + lL.min(), ex[0], ex[1], gamma]))
  return out


def fit_form(N, D, loss, law_theta, delta: float) -> FormFit:
  """The nesting form's best fit from a few starts, and the F test of the law inside it."""
  from scipy import special
  lN, lD, lL = np.log(N), np.log(D), np.log(loss)
  best = min((_solve(s, lN, lD, lL, delta) for s in _starts(law_theta, lN, lD, lL)),
             key=lambda r: r.cost)
  E, A, B, alpha, beta = law_theta
  law = np.array([np.log(A), np.log(B), np.log(max(E, 1e-300)), alpha, beta, 1.0])
  r_law, r_form = log_loss(law, lN, lD) - lL, best.fun
  # Outliers (diverged runs) would decide an F test on squares: judge on the bulk.
  keep = np.abs(r_form) <= 5 * 1.4826 * np.median(np.abs(r_form - np.median(r_form))) + 1e-12
  n = int(keep.sum())
  rss_law, rss_form = float(np.sum(r_law[keep]**2)), float(np.sum(r_form[keep]**2))
  p = 1.0
  if n > 7 and rss_form > 0 and rss_law > rss_form:
    p = float(special.fdtrc(1, n - 6, (rss_law - rss_form) / (rss_form / (n - 6))))
  return FormFit(best.x, p, _huber(best.fun, delta))


def bootstrap(N, D, loss, form: FormFit, delta: float, *, n_resamples: int, seed: int,
              clusters=None) -> np.ndarray:
  """[E, A, B, alpha, beta, gamma] of the form refitted on min(n_resamples, MAX_RESAMPLES)
  resamples of the runs (or of whole clusters), each from the full fit, shape (R', 6);
  refits that fail are dropped."""
  lN, lD, lL = np.log(N), np.log(D), np.log(loss)
  n, R = len(lN), min(int(n_resamples), MAX_RESAMPLES)
  counts_Rxn = fit_lib.resample_counts(n, R, np.random.default_rng([seed, 6]), clusters)
  out = []
  for counts in counts_Rxn.astype(int):
    idx = np.repeat(np.arange(n), counts)
    r = _solve(form.theta, lN[idx], lD[idx], lL[idx], delta, REFIT_EVALUATIONS)
    if r.status >= 0 and np.all(np.isfinite(r.x)):
      out.append(r.x)
  return natural(np.reshape(out, (-1, 6)))


PROFILE_STEP = 0.004  # the profile's first step in a from the estimate; each next is 1.3x


def _solve_at_a(a: float, theta0, lN, lD, lL, delta):
  """The form's fit with a = beta/(alpha + beta) held (beta = alpha a/(1 - a)), from theta0;
  returns (residuals, the fit's theta uncentred)."""
  from scipy import optimize
  mN, mD = lN.mean(), lD.mean()
  cN, cD = lN - mN, lD - mD
  k = a / (1 - a)
  full = lambda p: np.array([p[0], p[1], p[2], p[3], k * p[3], p[4]])
  def jac(p):
    J = _jacobian(full(p), cN, cD)
    return np.stack([J[:, 0], J[:, 1], J[:, 2], J[:, 3] + k * J[:, 4], J[:, 5]], axis=1)
  e_lo, e_hi = EXPONENT_BOUNDS
  lo = [-np.inf, -np.inf, -30.0, max(e_lo, e_lo / k), GAMMA_MIN]
  hi = [np.inf, np.inf, float(lL.min()), min(e_hi, e_hi / k), 1.0]
  th = np.asarray(theta0, np.float64)
  x0 = np.clip([th[0] - th[3] * mN, th[1] - k * th[3] * mD, th[2], th[3], th[5]],
               np.add(lo, 1e-9), np.subtract(hi, 1e-9))
  r = optimize.least_squares(lambda p: log_loss(full(p), cN, cD) - lL, x0, jac=jac,
                             bounds=(lo, hi), loss="huber", f_scale=delta,
                             max_nfev=REFIT_EVALUATIONS)
  x = r.x
  return r.fun, np.array([x[0] + x[3] * mN, x[1] + k * x[3] * mD, x[2], x[3], k * x[3], x[4]])


def profile_a(N, D, loss, form: FormFit, delta: float, level: float) -> list[float]:
  """a's interval from the form's fit profiled over a: the a whose best fit with a held is
  not rejected against the free fit by the F test (on the bulk of the runs, as `fit_form`
  judges the law) at `level`. It reads the ridge of gamma against the exponents and the
  bound E >= 0 from the objective itself, which the bootstrap's refits, each started at the
  full fit, explore only as far as the resamples push them."""
  from scipy import optimize, special
  lN, lD, lL = np.log(N), np.log(D), np.log(loss)
  r0 = log_loss(form.theta, lN, lD) - lL
  keep = np.abs(r0) <= 5 * 1.4826 * np.median(np.abs(r0 - np.median(r0))) + 1e-12
  n = int(keep.sum())
  rss0 = float(np.sum(r0[keep]**2))
  crit = float(special.fdtri(1, max(n - 6, 1), level))

  def excess(a, theta0):
    # From the fit before and from either end of the ridge of E (at its bound, and at half
    # the lowest loss): held at one a, the best fit can sit in either basin.
    starts = [np.asarray(theta0, np.float64).copy() for _ in range(3)]
    starts[1][2], starts[2][2] = -25.0, np.log(0.5) + lL.min()
    r, theta = min((_solve_at_a(a, t, lN, lD, lL, delta) for t in starts),
                   key=lambda rt: float(np.sum(rt[0][keep]**2)))
    return (float(np.sum(r[keep]**2)) - rss0) / (rss0 / max(n - 6, 1)) - crit, theta

  ends = []
  for direction in (-1.0, 1.0):
    a_in, theta_in, step, a_out = form.a, form.theta, PROFILE_STEP, None
    while True:
      a = a_in + direction * step
      if not 0.01 < a < 0.99:
        break
      f, theta = excess(a, theta_in)
      if f > 0:
        a_out = a
        break
      a_in, theta_in, step = a, theta, step * 1.3
    if a_out is None:
      ends.append(a_in)
      continue
    lo, hi = sorted((a_in, a_out))
    ends.append(float(optimize.brentq(lambda a: excess(a, theta_in)[0], lo, hi, xtol=1e-5)))
  return [min(ends[0], form.a), max(ends[1], form.a)]
