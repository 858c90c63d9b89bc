"""Runs that load cleanly yet look wrong: one warning line each, stored in law.json's
`warnings` (the fit goes on: the user may know better, but must be told).

* N and D swapped: D < N for more than SWAP_FRACTION of the runs. Language models train on
    more tokens than they have parameters (compute-optimal is ~20 tokens per parameter), so a
    table where most runs see fewer tokens than parameters has its columns the wrong way round.
* Duplicate rows: runs with the same N, D and loss (a row pasted twice counts twice).
* Unfinished runs: a CSV `status` other than done/finished (failed rows are skipped): a run
    stopped early reports a loss too high for its D.
* Diverged runs: a loss of nan or inf (a CSV's `nan`, a DataFrame's NaN); they are kept
    out of the fit, since a diverged run says how the run went, not what the law is.
* A loss in other units: losses above UNITS_ABOVE = 20, which no loss in nats or bits per
    token or byte reaches (a 50k vocabulary's untrained loss is 10.8 nats, 15.6 bits):
    perplexities or percentages.
* Budgets that disagree with C: a run whose nominal `budget` differs from its C (6·N·D, or
    the file's C, under the chosen conventions) by more than BUDGET_TOLERANCE (relative). A
    sweep spends each budget to within half a batch, far inside it; beyond it the budgets were
    counted in another convention, or N or D is wrong."""

import numpy as np

from chinchax.scaling.numerics import fmt

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


UNITS_ABOVE = 20.0  # nats (or bits) per token or byte: no language model's loss is this high


def units(loss: np.ndarray) -> list[str]:
  """A warning when losses lie above UNITS_ABOVE: not nats or bits per token or byte."""
  finite = loss[np.isfinite(loss)]
  high = finite > UNITS_ABOVE
  if not high.any():
    return []
  lo, hi = float(finite.min()), float(finite.max())
  likely = "perplexities (exp of the loss in nats: fit ln(perplexity))"
  if hi <= 100:
    likely += ", or percentages (an error rate x 100)"
  return [f"{int(high.sum())} of {len(finite)} losses are above {UNITS_ABOVE:g} (they run "
          f"from {fmt.num(lo)} to {fmt.num(hi)}), which no loss in nats or bits per token or "
          f"byte is: these look like {likely}; convert the column before fitting, since the "
          "law's form and its exponents assume a loss"]


def data_warnings(runs) -> list[str]:
  """Every warning above for `runs` (a scaling.runs.table.Runs)."""
  names = list(runs.name)
  return [*swapped(runs.N, runs.D, names), *duplicates(runs.N, runs.D, runs.loss, names),
          *unfinished(dict(runs.unfinished)), *diverged(list(runs.diverged)),
          *budgets(runs.C, runs.budget, names, runs.flops), *units(runs.loss)]
