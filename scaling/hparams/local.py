"""The optimum of one (N, D) point's LR x batch grid: a local quadratic, not the argmin.

Around the grid's best run the loss is fitted, by least squares, as a quadratic in
x = ln(peak LR) and y = ln(batch tokens):

    L(x, y) = L0 + gx·x + gy·y + ½·[x y]·H·[x y]ᵀ

over the runs within `lr_window` LR values and `batch_window` batch values of the best run (the
window slides inward at the grid's edge, so it always spans 2w+1 values when the grid has them).
A grid point's own noise moves its argmin by a whole grid step; the fit reads the optimum
between the grid's values from all runs near it (marin #7856 does this in LR alone). The cross
term is fitted only when the window holds a full rectangle of at least 6 runs; a grid with one
batch size (or fewer than 3 in the window) locates the LR alone.

Flags (the point then does not enter the law, and says why):
* `edge`: the grid value nearest the fitted optimum is the grid's first or last (or the
  optimum lies beyond them): the runs do not bracket it, and the grid must move.
* `flat`: the fitted curvature is not positive, or the loss rises less than `flat_rtol` of
  itself across the window: the grid cannot locate the optimum.

Diverged runs (nan loss, failed, or more than `explode` above the best loss) never enter the fit;
they are counted and, on the high-LR side, they mark where the surface ends. The spread of the
choice: the LR (batch) range over which the fitted loss stays within `tol` (1%) of its optimum,
ln-half-width sqrt(tol·L*/a) for curvature a. No jax here.
"""

import dataclasses
import math

import numpy as np

LR_WINDOW = 2       # LR values either side of the best run
BATCH_WINDOW = 1    # batch values either side
EXPLODE = 0.5       # a loss more than 50% above the point's best: diverged
FLAT_RTOL = 1e-3
TOL = 0.01


@dataclasses.dataclass(frozen=True)
class Axis:
  """The optimum along one variable (LR or batch)."""

  opt: float | None = None         # the fitted optimum (None: not located)
  within_tol: tuple[float, float] | None = None   # the range within `tol` of the optimum loss
  flags: tuple[str, ...] = ()      # "edge", "flat", "single" (fewer than 3 values)

  @property
  def ok(self) -> bool:
    return self.opt is not None and not self.flags


@dataclasses.dataclass(frozen=True, eq=False)
class Window:
  """What the bootstrap needs to refit a point: its window's design and fit."""

  X: np.ndarray        # design matrix of the window's runs
  fitted: np.ndarray
  resid: np.ndarray
  cols: tuple[str, ...]
  x0: float            # ln LR and ln batch the design is centred on (the best run)
  y0: float
  y_fix: float | None  # the batch (centred) the LR is read at, when not the fitted one


@dataclasses.dataclass(frozen=True, eq=False)
class PointFit:
  N: float
  D: float
  runs: int
  diverged: int
  loss_opt: float | None
  lr: Axis
  batch: Axis
  window: Window | None


def _window(values: np.ndarray, best: float, w: int) -> np.ndarray:
  """The 2w+1 grid values nearest `best`, slid inward at the edges."""
  n = len(values)
  i = int(np.searchsorted(values, best))
  lo = max(0, min(i - w, n - 1 - 2 * w))
  return values[lo:lo + 2 * w + 1]


def _design(x, y, cols) -> np.ndarray:
  terms = {"1": np.ones_like(x), "x": x, "xx": x * x, "y": y, "yy": y * y, "xy": x * y}
  return np.stack([terms[c] for c in cols], axis=1)


def solve(cols, beta) -> tuple[np.ndarray | None, np.ndarray]:
  """(the stationary point (x0, y0 or nan), the Hessian) of the fitted quadratic."""
  b = dict(zip(cols, beta))
  if "y" not in b:
    a = 2 * b["xx"]
    return (np.array([-b["x"] / a, np.nan]) if a > 0 else None), np.array([[a]])
  H = np.array([[2 * b["xx"], b.get("xy", 0.0)], [b.get("xy", 0.0), 2 * b["yy"]]])
  if np.linalg.eigvalsh(H).min() <= 0:
    return None, H
  return -np.linalg.solve(H, [b["x"], b["y"]]), H


def fit_loss(cols, X, loss) -> np.ndarray:
  return np.linalg.lstsq(X, loss, rcond=None)[0]


def optimum(point, *, lr_window: int = LR_WINDOW, batch_window: int = BATCH_WINDOW,
            explode: float = EXPLODE, flat_rtol: float = FLAT_RTOL, tol: float = TOL) -> PointFit:
  """The fitted optimum of one `hparams_runs.Point`."""
  loss = np.asarray(point.loss, float)
  good = np.isfinite(loss)
  if good.any():
    good &= loss <= np.nanmin(loss) * (1 + explode)
  diverged = int((~good).sum())
  none = PointFit(point.N, point.D, len(loss), diverged, None, Axis(flags=("no runs",)),
                  Axis(flags=("no runs",)), None)
  if not good.any():
    return none
  x_all, y_all = np.log(point.lr), np.log(point.B)
  xs, ys = np.unique(x_all[good]), np.unique(y_all[good])
  k = int(np.flatnonzero(good)[np.argmin(loss[good])])
  xw, yw = _window(xs, x_all[k], lr_window), _window(ys, y_all[k], batch_window)
  inw = good & np.isin(x_all, xw) & np.isin(y_all, yw)
  # Centred on the best run: a well-conditioned design whatever the units.
  x0, y0 = x_all[k], y_all[k]
  x, y = x_all[inw] - x0, y_all[inw] - y0
  fit_lr, fit_b = len(np.unique(x)) >= 3, len(np.unique(y)) >= 3
  if not fit_lr:
    return dataclasses.replace(none, lr=Axis(flags=("single",)), batch=Axis(flags=("single",)))
  cols = ("1", "x", "xx") + (("y", "yy") if fit_b else ())
  if fit_b and len(x) >= 6 and len(x) == len(np.unique(x)) * len(np.unique(y)):
    cols += ("xy",)
  X = _design(x, y, cols)
  beta = fit_loss(cols, X, loss[inw])
  stat, _ = solve(cols, beta)
  if stat is None and "xy" in cols:  # a saddle from the cross term alone: read the axes apart
    cols = cols[:-1]
    X = _design(x, y, cols)
    beta = fit_loss(cols, X, loss[inw])
    stat, _ = solve(cols, beta)
  fitted = X @ beta
  b = dict(zip(cols, beta))
  # The LR is read at the fitted batch when that lies inside the batch grid; else (a batch
  # optimum past the grid's edge, or no batch minimum) at the batch grid value nearest it:
  # the best LR the runs can vouch for, not one at an extrapolated batch.
  y_fix = None
  if fit_b:
    grid_y = ys - y0
    if stat is None:
      y_fix = 0.0
    elif int(np.argmin(np.abs(grid_y - stat[1]))) in (0, len(grid_y) - 1):
      y_fix = float(np.clip(stat[1], grid_y.min(), grid_y.max()))
  window = Window(X, fitted, loss[inw] - fitted, cols, float(x0), float(y0), y_fix)
  xo = _lr_at(b, y_fix) if y_fix is not None else (stat[0] if stat is not None else None)
  if xo is None:
    best = float(loss[k])
    flags_b = ("flat",) if fit_b else ("single",)
    return PointFit(point.N, point.D, len(loss), diverged, best, Axis(flags=("flat",)),
                    Axis(flags=flags_b), window)
  yo = y_fix if y_fix is not None else (stat[1] if fit_b else 0.0)
  L = float(_design(np.array([xo]), np.array([yo]), cols)[0] @ beta)
  lr = _axis(xo, x0, b["xx"], x, xs - x0, L, flat_rtol, tol)
  if not fit_b:
    bt = Axis(flags=("single",))
  elif stat is None:
    bt = Axis(flags=("flat",))
  else:
    bt = _axis(stat[1], y0, b["yy"], y, ys - y0, L, flat_rtol, tol)
  return PointFit(point.N, point.D, len(loss), diverged, L, lr, bt, window)


def _axis(o, centre, a, used, grid, L, flat_rtol, tol) -> Axis:
  """The optimum `o` (centred units) along one axis of curvature coefficient `a` (of o²)."""
  flags = []
  nearest = int(np.argmin(np.abs(grid - o)))
  if nearest in (0, len(grid) - 1):  # not bracketed: the grid must move
    flags.append("edge")
  far = max(abs(used.min() - o), abs(used.max() - o))
  if a * far * far < flat_rtol * abs(L):
    flags.append("flat")
  half = math.sqrt(tol * abs(L) / a)
  return Axis(float(math.exp(centre + o)),
              (float(math.exp(centre + o - half)), float(math.exp(centre + o + half))),
              tuple(flags))


def _lr_at(b: dict, y: float) -> float | None:
  """The LR (centred) that minimises the quadratic at batch y; None without curvature."""
  if b["xx"] <= 0:
    return None
  return -(b["x"] + b.get("xy", 0.0) * y) / (2 * b["xx"])


def refit(window: Window, loss: np.ndarray) -> tuple[float | None, float | None]:
  """(LR, batch) optimum offsets (centred, ln units) of the window refitted to `loss`, the
  LR read as the point's was (at `y_fix` when set)."""
  beta = fit_loss(window.cols, window.X, loss)
  stat, _ = solve(window.cols, beta)
  y = float(stat[1]) if stat is not None and "y" in window.cols else None
  if window.y_fix is not None:
    return _lr_at(dict(zip(window.cols, beta)), window.y_fix), y
  if stat is None:
    return None, None
  return float(stat[0]), y
