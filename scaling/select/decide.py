"""`chinchax next`: the K cells of a pool whose results are expected to narrow the answer most
per FLOP, and whether to stop (`choose`).

1. With fewer than `MIN_RUNS` runs (or runs no law can be fitted to) there is nothing to ask:
   the cells are a space-filling first design over the pool (scaling/select/first.py).
2. Else Approach 3's law is fitted to the runs (scaling/parametric, the Huber fit) with
   `resamples` pairs-bootstrap refits (seed `seed`: the same runs give the same decision).
   The answer's interval at `level` is read from the draws (scaling/select/answer.py).
3. Stop when that interval is at most `width` wide and the fit is well determined (4: a
   narrow interval of a fit that warns is not believed), or no cell of the pool that is not
   yet run fits in the FLOPs left (`flops_left`).
4. Else, while the fit is poorly determined (scaling/select/spread.py: the fit warns, the
   interval is wider than 0.3 for a or 1.0 for log N*, or the draws are far from Gaussian),
   the K cells are a D-optimal design per FLOP for the law's five parameters at the draws'
   median, and no width after them is promised (`expected["phase"] = "spread"`).
5. Once it is well determined, the K cells are chosen greedily by expected reduction of the
   answer's variance per FLOP (scaling/select/gain.py: a Gaussian update over the draws, the
   runs' noise from the fit's residuals), each conditioned on the cells chosen before it.
   `expected` holds the interval now and the width the batch is expected to leave: the width
   now scaled by the square root of the variance ratio (`expected["phase"] = "gain"`).

Cells with fewer tokens than parameters (D/N < `MIN_TOKENS_PER_PARAM`, badly undertrained:
the law's form does not describe them, scaling/isoflop/lack_of_fit.py) are offered only when
no other cell of the pool fits in the FLOPs left.

The noise of a log-loss observation is the fit's residual scale: 1.4826 · the median absolute
log residual, corrected for the 5 parameters fitted (· sqrt(n / (n − 5))), floored at
`NOISE_FLOOR` (0.1%: two runs of one cell rarely agree better)."""

import dataclasses
import math

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt, intervals, optimum
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.runs.table import Runs
from chinchax.scaling.select import answer, first, gain, spread
from chinchax.scaling.select import pool as pool_lib

MIN_RUNS = 8  # fewer runs: a first design, not a fit (5 parameters and their bootstrap)
NOISE_FLOOR = 1e-3
RESAMPLES = 200
LEVEL = 0.9
MIN_TOKENS_PER_PARAM = 1.0


@dataclasses.dataclass(frozen=True)
class Chosen:
  N: float
  D: float
  budget: float
  cost: float
  why: str


@dataclasses.dataclass(frozen=True)
class Decision:
  """What to train next: `cells`, whether to `stop` and `why`, and the numbers (`expected`)."""

  cells: tuple[Chosen, ...]
  stop: bool
  why: str
  expected: dict

  def to_dict(self) -> dict:
    return {"next": [{"N": c.N, "D": c.D, "budget": c.budget, "cost": c.cost, "why": c.why}
                     for c in self.cells],
            "stop": self.stop, "why": self.why, "expected": self.expected}

  def text(self) -> str:
    lines = [self.why]
    lines += [f"  N={fmt.num(c.N)} D={fmt.num(c.D)} C={fmt.num(c.budget)}: {c.why}"
              for c in self.cells]
    return "\n".join(lines)


def noise_of(fit: parametric.ParametricFit, runs: Runs) -> float:
  """The sd of a run's log-loss about the law (module docstring)."""
  r = np.log(runs.loss) - np.log(fit.predict(runs.N, runs.D))
  n = len(r)
  scale = 1.4826 * float(np.median(np.abs(r - np.median(r)))) * math.sqrt(n / max(n - 5, 1))
  return max(scale, NOISE_FLOOR)


def target_budget(pool: pool_lib.Pool, C_target: float | None) -> float:
  if C_target is None:
    return float(answer.PAST_POOL * np.max(pool_lib.budgets_of(pool)))
  if not (math.isfinite(C_target) and C_target > 0):
    raise UserError(f"--target-flops must be a positive number of FLOPs, got {C_target!r}")
  return float(C_target)


def check_request(k: int, flops_left: float | None, width: float | None) -> None:
  if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
    raise UserError(f"--k must be a whole number >= 1 (cells to choose), got {k!r}")
  if flops_left is not None and not (math.isfinite(flops_left) and flops_left > 0):
    raise UserError(f"--flops-left must be a positive number of FLOPs, got {flops_left!r}")
  if width is not None and not (math.isfinite(width) and width > 0):
    raise UserError(f"--width must be a positive number, got {width!r}")


def choose(runs: Runs | None, pool: pool_lib.Pool, k: int, *, flops_left: float | None = None,
           C_target: float | None = None, target: str = "N", width: float | None = None,
           level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0,
           tried: np.ndarray | None = None) -> Decision:
  """The decision for `runs` (None: none yet) and the candidate `pool` (module docstring);
  `tried`: a mask of cells run already that gave no loss (diverged, failed): not offered."""
  answer.check_target(target)
  check_request(k, flops_left, width)
  intervals.check_level(level, "level")
  C_t = target_budget(pool, C_target)
  width = answer.DEFAULT_WIDTH[target] if width is None else float(width)
  left = math.inf if flops_left is None else float(flops_left)
  N_run = np.zeros(0) if runs is None else runs.N
  D_run = np.zeros(0) if runs is None else runs.D
  free = ~pool_lib.made(pool, N_run, D_run)
  if tried is not None:
    free &= ~np.asarray(tried, bool)
  sensible = free & (pool.D >= MIN_TOKENS_PER_PARAM * pool.N)
  if (sensible & (pool.cost <= (math.inf if flops_left is None else flops_left))).any():
    free = sensible
  said = answer.name(target, C_t)
  expected = {"target": target, "answer": said, "C_target": C_t, "level": level,
              "width_goal": width, "runs": int(len(N_run)),
              "cells_left": int((free & (pool.cost <= left)).sum())}
  budgets = pool_lib.budgets_of(pool)

  fit, draws, why_first = None, None, ""
  if runs is None or len(runs) < MIN_RUNS:
    why_first = f"{len(N_run)} runs, fewer than the {MIN_RUNS} a law and its bootstrap need"
  else:
    try:
      fit = parametric.fit_parametric(runs.N, runs.D, runs.loss)
      raw = parametric.bootstrap_parametric(runs.N, runs.D, runs.loss, n_resamples=resamples,
                                            seed=seed, fit=fit)
      draws = raw[np.all(np.isfinite(raw), axis=1) & np.all(raw[:, 1:] > 0, axis=1)]
      if len(draws) < max(10, resamples // 2):
        why_first = f"only {len(draws)} of {resamples} bootstrap refits gave a law"
    except UserError as e:
      why_first = f"no law fits the runs yet ({e})"

  if why_first:
    picks = first.design(pool, k, left, free, first.placed_of(pool, N_run, D_run))
    if not picks:
      return Decision((), True, f"stop: no cell of the pool that is not run yet fits in "
                      f"{fmt.num(left)} FLOPs", expected)
    cells = tuple(Chosen(float(pool.N[j]), float(pool.D[j]), float(budgets[j]),
                         float(pool.cost[j]), "first design: farthest from the cells already "
                         "placed in (log C, place among its budget's sizes)") for j in picks)
    expected["flops"] = float(sum(c.cost for c in cells))
    return Decision(cells, False, f"first design of {len(cells)} cells ({why_first})",
                    expected)

  q = answer.values(draws, target, C_t)
  ok = np.isfinite(q)
  lo, hi = intervals.interval(q[ok], level)
  estimate = float(answer.values(np.array([[fit.E, fit.A, fit.B, fit.alpha, fit.beta]]),
                                 target, C_t)[0])
  now = hi - lo
  sigma = noise_of(fit, runs)
  expected.update(estimate=estimate, interval=[lo, hi], width=now, noise=sigma)
  if target == "N":
    expected.update(N_star=math.exp(estimate), N_star_interval=[math.exp(lo), math.exp(hi)])
  head = (f"{said} = {fmt.num(estimate)} {fmt.interval([lo, hi])} ({fmt.percent(level)}; "
          f"width {fmt.num(now)}, goal {fmt.num(width)})")
  poor = spread.problems(fit.warnings, q, lo, hi, level, target)
  expected["phase"] = "spread" if poor else "gain"
  if now <= width and not poor:
    return Decision((), True, f"stop: {head}: narrow enough", expected)
  if not (free & (pool.cost <= left)).any():
    return Decision((), True, f"stop: {head}; no cell of the pool that is not run yet fits "
                    f"in {fmt.num(left)} FLOPs", expected)

  if poor:
    expected["poorly_determined"] = poor
    central = draws[ok & (q >= np.quantile(q[ok], 0.01)) & (q <= np.quantile(q[ok], 0.99))]
    picks = spread.design(np.median(central, axis=0), N_run, D_run, pool.N, pool.D, pool.cost,
                          k, left, free)
    cells = tuple(Chosen(float(pool.N[j]), float(pool.D[j]), float(budgets[j]),
                         float(pool.cost[j]), "the fit is poorly determined: the most "
                         "information on the law's five parameters per FLOP (D-optimal at the "
                         "draws' median), after the cells above") for j in picks)
    expected.update(width_after=None, flops=float(sum(c.cost for c in cells)))
    return Decision(cells, False, f"{head}; poorly determined ({'; '.join(poor)}): these "
                    f"{len(cells)} cells spread the design (no width promised)", expected)

  with np.errstate(all="ignore"):
    f = np.log(optimum.loss(pool.N, pool.D, draws))
  Sigma = gain.covariance(q, f)
  picks, var_after = gain.greedy(Sigma, sigma**2, pool.cost, k, left, free)
  var_now = float(Sigma[0, 0])
  cells, removed = [], 0.0
  for i, p in enumerate(picks):
    share = p.reduction / var_now if var_now > 0 else 0.0
    removed += p.reduction
    # Greedy: each pick's gain is given the picks above it, so a later one may gain more per
    # FLOP than an earlier one did alone.
    why = (f"expected to remove {share:.1%} of the variance of {said} "
           f"({fmt.num(p.reduction / p.cost)} per FLOP, the most of the cells not run yet)"
           if i == 0 else
           f"with the cells above, expected to remove a further {share:.1%} of the variance "
           f"of {said} ({fmt.num(p.reduction / p.cost)} per FLOP, the most of the cells left)")
    cells.append(Chosen(float(pool.N[p.index]), float(pool.D[p.index]), float(budgets[p.index]),
                        p.cost, why))
  ratio = max(var_after, 0.0) / var_now if var_now > 0 else 1.0
  expected.update(width_after=now * math.sqrt(ratio), flops=float(sum(c.cost for c in cells)),
                  variance_removed=1.0 - ratio)
  return Decision(tuple(cells), False, f"{head}; these {len(cells)} cells are expected to "
                  f"narrow it to {fmt.num(expected['width_after'])}", expected)
