"""One task's law in two steps, and one bootstrap over runs through both.

Step 1: the task's loss L(N, D) = E + A/N^alpha + B/D^beta, by Approach 3 (scaling.parametric:
the Huber loss of log residuals, variable projection), on each run's final evaluation (or the
mean of its last k: `TaskData.final`). Intermediate checkpoints stay out of step 1: under a
decaying schedule a checkpoint's loss is not the loss of a run trained to that D.
Step 2: accuracy from that loss (scaling.tasks.link), on every evaluation, intermediate
checkpoints included: the link from loss to accuracy does not care how the loss was reached,
and the checkpoints fill in the losses between the runs'.

The bootstrap draws runs with replacement; each resample refits step 1 on the drawn runs
(a run drawn twice counts twice, `parametric.refit`, batched) and step 2 on every evaluation
of the drawn runs (the same counts as weights, `link.refit`, batched), so a draw is one
consistent pair of laws and a prediction's interval carries both steps' uncertainty and
their correlation (the runs that pull step 1 down also pull step 2's curve)."""

import dataclasses

import numpy as np

from chinchax.errors import UserError

from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import intervals
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.tasks import link
from chinchax.scaling.tasks.table import TaskData

COLUMNS = parametric.COLUMNS + link.COLUMNS  # a draw: [E, A, B, alpha, beta, floor, ceiling, k, L0]
E_SPAN = 100.0  # an interval of E wider than this factor: E is not identified
CEILING_SPAN = 0.2  # an interval of the ceiling wider than this: the ceiling is not identified


@dataclasses.dataclass(frozen=True, eq=False)
class TaskFit:
  task: str
  step1: parametric.ParametricFit
  step2: link.LinkFit
  draws: np.ndarray | None  # (R, 9) in COLUMNS order; rows that are no law dropped
  dropped: int
  final: tuple[np.ndarray, np.ndarray, np.ndarray]  # (N, D, loss) per run: step 1's data
  data: TaskData
  last: int
  warnings: tuple[str, ...]


def usable(draws_Rx9: np.ndarray) -> np.ndarray:
  """Rows that are a pair of laws: finite, A, B, alpha, beta, k > 0, floor <= ceiling."""
  d = draws_Rx9
  keep = np.all(np.isfinite(d), axis=1) & np.all(d[:, 1:5] > 0, axis=1) & (d[:, 0] >= 0)
  return keep & (d[:, 7] > 0) & (d[:, 5] <= d[:, 6])


def check_design(data: TaskData, last: int = 1):
  """(N, D, loss) of each run's final evaluations, refused in one line when log N and log D do
  not vary apart: the law's N and D terms could not be told apart."""
  N, D, L = data.final(last)
  logs = np.column_stack([np.ones_like(N), np.log(N), np.log(D)])
  if np.linalg.matrix_rank(logs, tol=1e-6) < 3:
    raise UserError(f"task {data.task!r}: its runs' final evaluations do not vary N and D "
                    f"apart (N {fmt.num(N.min())}..{fmt.num(N.max())}, "
                    f"D {fmt.num(D.min())}..{fmt.num(D.max())}); "
                    "step 1 needs runs of different sizes at different token counts")
  return N, D, L


def fit_task(data: TaskData, *, bootstrap: int = 1000, seed: int = 0, last: int = 1,
             level: float = 0.9, chance: float | None = None,
             delta: float = parametric.DEFAULT_DELTA) -> TaskFit:
  """Both steps of one task and, with bootstrap > 0, their joint draws."""
  N, D, L = check_design(data, last)
  step1 = parametric.fit_parametric(N, D, L, delta=delta)
  floor = data.chance if chance is None else chance
  step2 = link.fit(data.loss, data.accuracy, floor=floor)
  draws, dropped = None, 0
  if bootstrap:
    rng = np.random.default_rng(seed)
    n = len(data.runs)
    counts_Rxn = rng.multinomial(n, np.full(n, 1.0 / n), size=bootstrap).astype(np.float64)
    laws = parametric.refit(N, D, L, counts_Rxn, step1, delta)
    sigmoids = link.refit(data.loss, data.accuracy, counts_Rxn[:, data.of_run], step2)
    both = np.concatenate([laws, sigmoids], axis=1)
    keep = usable(both)
    draws, dropped = both[keep], int(np.sum(~keep))
  return TaskFit(task=data.task, step1=step1, step2=step2, draws=draws, dropped=dropped,
                 final=(N, D, L), data=data, last=last,
                 warnings=_warnings(step1, step2, draws, dropped, bootstrap, level))


def _warnings(step1, step2, draws, dropped, bootstrap, level) -> tuple[str, ...]:
  out = [f"step 1: {w}" for w in step1.warnings]
  ci = None if draws is None or not len(draws) else intervals.quantiles(draws, level, axis=0)
  if ci is not None:
    lo, hi = ci[0][0], ci[1][0]
    if not any("E=" in w for w in step1.warnings) and (lo <= 0 or hi / lo > E_SPAN):
      out.append(f"step 1: E is not identified (its {level:.0%} interval [{fmt.num(lo)}, "
                 f"{fmt.num(hi)}]): the task loss's floor is not pinned down by these runs, and "
                 "losses far past them rest on the form alone")
  if not step2.midpoint_passed:
    out.append(f"step 2: the ceiling is not identified: the evaluations never pass the "
               f"sigmoid's midpoint (lowest loss {step2.loss_range[0]:.4g}, L0 = "
               f"{step2.params[3]:.4g}), so a higher ceiling with a later turn fits as well; "
               "accuracies below the lowest loss seen rest on the form")
  elif ci is not None and ci[1][6] - ci[0][6] > CEILING_SPAN:
    out.append(f"step 2: the ceiling is not identified (its {level:.0%} interval "
               f"[{ci[0][6]:.3g}, {ci[1][6]:.3g}]); accuracies below the lowest loss seen "
               "rest on the form")
  if step2.free_floor and step2.loss_range[1] < step2.params[3]:
    out.append(f"step 2: the floor is not identified: no evaluation's loss is above the "
               f"sigmoid's midpoint (highest loss {step2.loss_range[1]:.4g}, L0 = "
               f"{step2.params[3]:.4g}); give the task's chance (a chance column or --chance)")
  if bootstrap and dropped > 0.05 * bootstrap:
    out.append(f"{dropped} of {bootstrap} resamples gave no law and were dropped: the runs "
               "pin the task's laws down poorly")
  return tuple(out)
