"""The fit's checks, each a warning line stored in law.json: runs that look wrong
(`data_warnings`), a model that does not describe them (`lack_of_fit`), intervals that do not
hold their estimates (`shifted`).

Runs that load cleanly yet look wrong: one warning line each, stored in law.json's
`warnings` (the fit goes on: the user may know better, but must be told).

* N and D swapped: D < N for more than SWAP_FRACTION of the runs. Language models train on
    more tokens than they have parameters (compute-optimal is ~20 tokens per parameter), so a
    table where most runs see fewer tokens than parameters has its columns the wrong way round.
* Duplicate rows: runs with the same N, D and loss (a row pasted twice counts twice).
* Unfinished runs: a CSV `status` other than done/finished (failed rows are skipped): a run
    stopped early reports a loss too high for its D.
* Diverged runs: a loss of nan or inf (a CSV's `nan`, a DataFrame's NaN); they are kept
    out of the fit, since a diverged run says how the run went, not what the law is.
* Budgets that disagree with C: a run whose nominal `budget` differs from its C (6·N·D, or
    the file's C, under the chosen conventions) by more than BUDGET_TOLERANCE (relative). A
    sweep spends each budget to within half a batch, far inside it; beyond it the budgets were
    counted in another convention, or N or D is wrong.

Does a fitted model describe the runs? Every approach that models the losses is checked the
same way (Approach 3's law by `approach3`, Approach 2's profile fits in `isoflop_minima`;
Approach 1 reads the envelope of the loss curves, with no model of them to check): the root-mean-square of its residuals over the runs of the IsoFLOP
budgets, over sigma, the noise the local window fits measure (`scaling.isoflop_local`: a
parabola per budget around its lowest loss, robust to diverged runs). A model that fits has
a ratio near 1 (its residuals are noise); above RATIO it is misspecified for these runs, or
a few runs are far off, and its minima or exponents are not to be trusted as they stand.
The warning names where the squared residuals concentrate: a few runs (diverged, or a
broken record), badly undertrained runs (D/N < 1, far from any minimum), the runs far from
each budget's minimum, or the runs near the minima (the family's shape is wrong there).

The noise credited is at least FLOOR = 0.1% of the median loss: no sweep measures less (the
seed-to-seed spread of a training run's loss is 0.2-1%); a smaller local spread is the local
fits' own model error on noise-free synthetic data, and against it every model but the exact
one would fail.

RATIO = 3: under Gaussian noise a fitting model's ratio is an F-like ratio of two variance
estimates; with 10 or more degrees of freedom on each side it exceeds 3 (variance ratio 9)
with probability below 0.1%. On real published sweeps a joint profile fit that placed the
minima wrongly had ratios of 10-40."""

import numpy as np

from chinchax.scaling import fmt, isoflop_budgets, isoflop_local, law_build
from chinchax.scaling.runs import budget_groups, Runs


SWAP_FRACTION = 0.5
BUDGET_TOLERANCE = 0.10


def _some(names, k: int = 2) -> str:
  names = list(names)
  return ", ".join(names[:k]) + (", ..." if len(names) > k else "")


def swapped(N: np.ndarray, D: np.ndarray, names) -> list[str]:
  below = D < N
  if below.mean() <= SWAP_FRACTION:
    return []
  return [f"D < N for {int(below.sum())} of {len(N)} runs: columns N and D look swapped "
          "(language models train on more tokens than they have parameters, ~20 per "
          "parameter when compute-optimal); check which column is which"]


def duplicates(N: np.ndarray, D: np.ndarray, loss: np.ndarray, names) -> list[str]:
  keys = {}
  for i, key in enumerate(zip(N.tolist(), D.tolist(), loss.tolist())):
    keys.setdefault(key, []).append(names[i])
  extra = [group for group in keys.values() if len(group) > 1]
  if not extra:
    return []
  n = sum(len(g) - 1 for g in extra)
  return [f"{n} runs repeat another run's N, D and loss (e.g. {_some(extra[0])}): a "
          "duplicate row counts twice in the fit; remove the copies"]


def unfinished(status: dict) -> list[str]:
  if not status:
    return []
  example, word = next(iter(status.items()))
  return [f"{len(status)} runs have a status other than done (e.g. {example}: {word!r}): a "
          "run stopped early reports a loss too high for its D; finish them or drop them"]


def diverged(names) -> list[str]:
  if not names:
    return []
  return [f"{len(names)} runs have a loss of nan or inf (e.g. {_some(names)}): they "
          "diverged and are kept out of the fit; a sweep at a lower learning rate may "
          "recover them"]


def budgets(C: np.ndarray, budget: np.ndarray, names, flops: str) -> list[str]:
  known = ~np.isnan(budget)
  off = np.zeros(len(C), bool)
  off[known] = np.abs(C[known] / budget[known] - 1) > BUDGET_TOLERANCE
  if not off.any():
    return []
  i = int(np.flatnonzero(off)[0])
  how = "6·N·D" if flops == "6ND" else "C (chinchilla count)"
  return [f"{int(off.sum())} of {int(known.sum())} runs have a budget that differs from their "
          f"{how} by more than {BUDGET_TOLERANCE:.0%} (e.g. {names[i]}: budget "
          f"{fmt.num(budget[i])}, {how} = {fmt.num(C[i])}): the budgets were counted in another "
          "convention, or N or D is wrong"]


def data_warnings(runs) -> list[str]:
  """Every warning above for `runs` (a scaling.runs.Runs)."""
  names = list(runs.name)
  return [*swapped(runs.N, runs.D, names), *duplicates(runs.N, runs.D, runs.loss, names),
          *unfinished(dict(runs.unfinished)), *diverged(list(runs.diverged)),
          *budgets(runs.C, runs.budget, names, runs.flops)]


RATIO = 3.0
FLOOR = 1e-3  # the least noise credited, relative to the median loss
FEW = 0.5  # share of the squared residuals that makes "a few runs" the cause
UNDERTRAINED = 1 / 3  # share carried by D/N < 1 runs that makes them the cause


def local_fits(bud, y_n: np.ndarray) -> tuple[isoflop_local.Local, float]:
  """The local fits of the screened budgets and the noise they measure (NaN if nothing does)."""
  loc = isoflop_local.fit(bud.log_N_n, bud.budget_n, len(bud.C_K), y_n[None])
  return loc, float(loc.sigma_R[0])


def lack_of_fit(residual_n: np.ndarray, sigma: float, *, N_n, D_n, in_window_n, loss_n) -> dict:
  """The lack-of-fit record of residuals `residual_n` (runs: sizes N_n, tokens D_n, losses
  loss_n; whether each lies in a local window near its budget's minimum)."""
  r2 = np.asarray(residual_n, np.float64)**2
  rms = float(np.sqrt(r2.mean()))
  if np.isfinite(sigma):
    sigma = max(sigma, FLOOR * float(np.median(loss_n)))
  if not np.isfinite(sigma) or sigma <= 0:
    return {"rms": rms, "sigma": None, "ratio": None, "limit": RATIO, "fits": None,
            "cause": None}
  ratio = rms / sigma
  total = r2.sum()
  n_few = max(2, int(0.05 * len(r2)))
  worst = np.argsort(r2)[::-1][:n_few]
  top = r2[worst].sum() / total
  under = np.asarray(D_n) < np.asarray(N_n)
  far = ~np.asarray(in_window_n, bool)
  if top > FEW and not under[worst].all():  # the most undertrained runs: named below
    cause = (f"{n_few} runs carry {top:.0%} of its squared residuals: a few runs far off the "
             "rest (diverged, or a broken record?)")
  elif under.any() and r2[under].sum() / total > UNDERTRAINED:
    cause = (f"badly undertrained runs (D/N < 1, {under.sum()} of {len(r2)}) carry "
             f"{r2[under].sum() / total:.0%} of its squared residuals: the model's form does "
             "not describe them, and they pull where it puts the minima")
  elif far.any() and r2[far].sum() / total > 0.5:
    cause = (f"runs far from each budget's minimum carry {r2[far].sum() / total:.0%} of its "
             "squared residuals: the model's form does not describe the whole range of sizes")
  else:
    cause = ("the runs near each budget's minimum carry most of its squared residuals: the "
             "model's form does not describe the profiles where the minima are")
  return {"rms": rms, "sigma": float(sigma), "ratio": float(ratio), "limit": RATIO,
          "fits": bool(ratio <= RATIO), "cause": cause}


def lack_of_fit_message(record: dict, what: str) -> str:
  return (f"{what} does not fit these runs: its residuals (rms {record['rms']:.3g} nats) are "
          f"{record['ratio']:.1f}x the noise local fits measure ({record['sigma']:.2g} nats; "
          f"above {record['limit']:g}x is a lack of fit); {record['cause']}")


holding = law_build.holding
SHIFTED_NAMES = ("a", "b")


def unprefixed(messages, name: str) -> list[str]:
  """The messages without the "Approach k: " their Python warning carried: the pipeline
  prefixes every approach's warnings once, in law.json's list."""
  prefix = f"Approach {name}: "
  return [m[len(prefix):] if m.startswith(prefix) else m for m in messages]


def shifted(entry: dict, draws: dict, level: float) -> list[str]:
  """A warning for each of a, b whose bootstrap percentile interval missed the estimate."""
  out = []
  for k in SHIFTED_NAMES:
    if entry.get(k) is None or k not in draws or not len(draws[k]):
      continue
    lo, hi = law_build.quantiles(draws[k], level)
    if not lo <= entry[k] <= hi:
      out.append(f"the bootstrap's interval of {k}, [{lo:.3f}, {hi:.3f}], does not hold the "
                 f"estimate {k} = {entry[k]:.3f}: the estimator is biased on this design; "
                 "the interval given is widened to hold it")
  return out


def approach3(runs: Runs, fit3) -> dict | None:
  """Approach 3's lack-of-fit record over the runs of the IsoFLOP budgets (None: no budget
  has 3 sizes)."""
  bud, _ = isoflop_budgets.screen(runs, budget_groups(runs), runs.loss)
  if len(bud.C_K) == 0:
    return None
  y = runs.loss[bud.idx_n]
  loc, sigma = local_fits(bud, y)
  N, D = runs.N[bud.idx_n], runs.D[bud.idx_n]
  predicted = fit3.E + fit3.A * N**-fit3.alpha + fit3.B * D**-fit3.beta
  return lack_of_fit(y - predicted, sigma, N_n=N, D_n=D,
                           in_window_n=np.isfinite(loc.fitted_Rxn[0]), loss_n=y)


def approach3_message(record: dict) -> str:
  return lack_of_fit_message(record, "the law E + A/N^alpha + B/D^beta")
