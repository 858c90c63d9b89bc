"""Step 2 of a task law: accuracy from the task's loss, a sigmoid between a floor and a ceiling,

    acc(L) = floor + (ceiling − floor)·σ(−k·(L − L0)),

fitted by weighted least squares on every evaluation (intermediate checkpoints included).

Why this form: it is the one the model ladders use (Bhagia et al. 2024, OLMo; Llama 3's
second step), its four numbers each mean something a reader can check (the floor is the
task's chance when the loss says nothing, the ceiling what a perfect loss would give, L0
the loss at half-way, k how sharp the turn), and it is bounded where accuracy is: a linear or
logit-linear link fitted on the small models' half of the curve runs past 1 or never bends.
The floor is the task's chance when it is known (given, and then held: one number fewer to
pin down from the few evaluations near chance); else it is fitted.

The ceiling is not identified when the evaluations never pass the curve's midpoint: a
ceiling of 0.7 with a steep turn and one of 1 with a late, slow one fit the low half
equally well. `identified` says so; the fit's warnings carry it.

The fit runs in coordinates where every parameter is O(1) and unbounded (z = (L − m)/s,
floor = σ(w), ceiling = floor + (1 − floor)·σ(u), k = e^v / s) by Levenberg–Marquardt,
batched: one row of weights per bootstrap resample (a run drawn twice counts twice), all
resamples minimised together in numpy. No jax here.
"""

import dataclasses

import numpy as np

COLUMNS = ("floor", "ceiling", "k", "L0")
ITERATIONS = 200
U_CLIP = 20.0  # ceiling's logit: beyond it the ceiling is 1 (or the floor) to 1e-9


@dataclasses.dataclass(frozen=True)
class Scale:
  """The loss's centre and spread over the evaluations: z = (L − m)/s."""

  m: float
  s: float

  @classmethod
  def of(cls, L) -> "Scale":
    L = np.asarray(L, np.float64)
    s = float(np.std(L))
    return cls(float(np.mean(L)), s if s > 0 else 1.0)


def _sigmoid(x):
  return 0.5 * (1.0 + np.tanh(0.5 * x))  # exact and overflow-free


def predict(params_Sx4: np.ndarray, L) -> np.ndarray:
  """acc at loss L for each row [floor, ceiling, k, L0]: (S,) for a scalar L, (S, n) else."""
  p = np.asarray(params_Sx4, np.float64)
  f, c, k, L0 = (p[..., i:i + 1] for i in range(4))
  L = np.asarray(L, np.float64)
  out = f + (c - f) * _sigmoid(-k * (L - L0))
  return out[..., 0] if L.ndim == 0 else out


def each(params_Sx4: np.ndarray, L_S: np.ndarray) -> np.ndarray:
  """(S,) accuracies: each row's sigmoid at its own loss (a draw through both steps)."""
  f, c, k, L0 = np.asarray(params_Sx4, np.float64).T
  return f + (c - f) * _sigmoid(-k * (np.asarray(L_S, np.float64) - L0))


def _natural(th_Sx4: np.ndarray, scale: Scale) -> np.ndarray:
  w, u, v, z0 = th_Sx4.T
  f = _sigmoid(w)
  c = f + (1.0 - f) * _sigmoid(u)
  return np.stack([f, c, np.exp(v) / scale.s, scale.m + scale.s * z0], axis=1)


def _residuals_and_jacobian(th_Sx4, z_n, y_n, free_floor: bool):
  w, u, v, z0 = (th_Sx4[:, i:i + 1] for i in range(4))
  f = _sigmoid(w)
  su = _sigmoid(u)
  h = (1.0 - f) * su
  k = np.exp(v)
  t = -k * (z_n - z0)
  g = _sigmoid(t)
  pred = f + h * g
  r = pred - y_n
  dg = g * (1.0 - g)
  J = np.stack([
      f * (1.0 - f) * (1.0 - su * g) if free_floor else np.zeros_like(r),
      (1.0 - f) * su * (1.0 - su) * g + 0.0 * r,
      h * dg * t,
      h * dg * k + 0.0 * r,
  ], axis=2)
  return r, J


def minimize(th0_Sx4: np.ndarray, z_n: np.ndarray, y_n: np.ndarray, W_Sxn: np.ndarray,
             free_floor: bool, iterations: int = ITERATIONS):
  """Levenberg–Marquardt from each start, weighted rows: (theta, weighted SSE) per start."""
  th = np.array(th0_Sx4, np.float64)
  W = np.broadcast_to(W_Sxn, (len(th), len(z_n)))
  lam = np.full(len(th), 1e-2)
  r, J = _residuals_and_jacobian(th, z_n, y_n, free_floor)
  F = np.sum(W * r * r, axis=1)
  eye = np.eye(4)
  F_checkpoint = F.copy()
  for it in range(iterations):
    JW = J * W[..., None]
    JWt = JW.transpose(0, 2, 1)
    H = JWt @ J
    grad = (JWt @ r[..., None])[..., 0]
    diag = np.einsum("spp->sp", H)
    A = H + lam[:, None, None] * (diag[:, :, None] * eye + 1e-9 * eye)
    if not free_floor:  # the floor's row is zero: hold it
      A[:, 0, 0] = 1.0
    try:
      step = -np.linalg.solve(A, grad[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a flat direction (accuracies that never move): least norm
      step = -(np.linalg.pinv(A) @ grad[..., None])[..., 0]
    trial = th + step
    trial[:, 1] = np.clip(trial[:, 1], -U_CLIP, U_CLIP)
    trial[:, 2] = np.clip(trial[:, 2], -8.0, 8.0)
    rt, Jt = _residuals_and_jacobian(trial, z_n, y_n, free_floor)
    Ft = np.sum(W * rt * rt, axis=1)
    better = np.isfinite(Ft) & (Ft < F)
    th[better], r[better], J[better], F[better] = trial[better], rt[better], Jt[better], Ft[better]
    lam = np.where(better, lam / 3.0, np.minimum(lam * 4.0, 1e12))
    if it % 10 == 9:  # every start has stopped gaining: done
      if np.all((F_checkpoint - F <= 1e-10 * (F + 1e-300)) | (lam >= 1e12)):
        break
      F_checkpoint = F.copy()
  return th, F


def _logit(p):
  p = np.clip(p, 1e-6, 1 - 1e-6)
  return np.log(p / (1 - p))


@dataclasses.dataclass(frozen=True)
class LinkFit:
  """The fitted sigmoid, its fitting coordinates (the bootstrap starts there) and its data."""

  params: np.ndarray  # [floor, ceiling, k, L0]
  theta: np.ndarray  # (w, u, v, z0)
  scale: Scale
  free_floor: bool
  sse: float
  loss_range: tuple[float, float]  # the losses the fit saw

  @property
  def floor(self) -> float:
    return float(self.params[0])

  @property
  def ceiling(self) -> float:
    return float(self.params[1])

  @property
  def midpoint_passed(self) -> bool:
    """Do the evaluations reach past half-way from floor to ceiling? Else the ceiling is not
    identified (it trades against L0 and k)."""
    return bool(self.loss_range[0] < self.params[3])


def fit(L, acc, *, floor: float | None = None, weights=None) -> LinkFit:
  """The sigmoid through (L, acc): the best of a small grid of starts carried to a minimum."""
  L, acc = np.asarray(L, np.float64), np.asarray(acc, np.float64)
  scale = Scale.of(L)
  z = (L - scale.m) / scale.s
  w = np.ones_like(L) if weights is None else np.asarray(weights, np.float64)
  free = floor is None
  w0 = _logit(max(float(np.min(acc)) * 0.9, 1e-3)) if free else _logit(floor)
  grid = np.array([(w0, u, v, z0) for u in (-1.0, 1.0, 4.0) for v in (0.0, 1.0, 2.0)
                   for z0 in (-1.5, 0.0, 1.5)], np.float64)
  th, F = minimize(grid, z, acc, w[None], free)
  best = int(np.nanargmin(np.where(np.isfinite(F), F, np.inf)))
  return LinkFit(params=_natural(th[best:best + 1], scale)[0], theta=th[best], scale=scale,
                 free_floor=free, sse=float(F[best]),
                 loss_range=(float(L.min()), float(L.max())))


START_SHIFTS = ((0.0, 0.0, 0.0), (2.0, -0.5, -0.5), (-1.0, 0.5, 0.5))  # (u, v, z0) offsets


def refit(L, acc, W_Rxn: np.ndarray, full: LinkFit) -> np.ndarray:
  """(R, 4) sigmoids [floor, ceiling, k, L0], one per row of weights, each the best of three
  starts around the full-data fit (a resample can move the ceiling's basin), batched."""
  L, acc = np.asarray(L, np.float64), np.asarray(acc, np.float64)
  z = (L - full.scale.m) / full.scale.s
  R, k = len(W_Rxn), len(START_SHIFTS)
  starts = np.repeat(full.theta[None], k, axis=0)
  starts[:, 1:] += np.asarray(START_SHIFTS)
  th, F = minimize(np.tile(starts, (R, 1)), z, acc, np.repeat(W_Rxn, k, axis=0),
                   full.free_floor)
  F = np.where(np.isfinite(F), F, np.inf).reshape(R, k)
  best = np.argmin(F, axis=1)
  return _natural(th.reshape(R, k, 4)[np.arange(R), best], full.scale)
