"""What design the runs have, read before any fit: which approaches it can support, and
whether it can separate N from D at all.

Runs are counted in distinct sizes, token counts and D/N ratios, each value within SAME
(relative) of another being one: a shape recipe rounds N a little differently per run, a
batch rounds D. The kinds, first match wins:

* one D: every run at one D (a Pythia-style suite of sizes) — N is varied, D is not;
* one N: every run one size at several D (checkpoints of one model) — D is varied, N is not;
* one ray: every run at one D/N — N and D move together, log D = log N + const;
* IsoFLOP: at least MIN_GROUPS budget groups (runs whose C agree within
  `table.BUDGET_RTOL`) of at least MIN_SIZES distinct sizes hold most of the runs, unless
  the sizes are each seen at more D than a grid gives them and no budget is declared (the
  checkpoints of a suite whose models share their D fall into such groups by chance);
* a ladder: every size of the runs trained at 2 to LADDER_MAX_D distinct D (a few sizes x a
  few token multipliers);
* checkpoints along D: sizes each seen at more than LADDER_MAX_D distinct D (evaluations of
  each model during training);
* a mix: anything else (part grid, part ladder).

The law E + A/N^alpha + B/D^beta separates the N term from the D term only if log N and
log D vary independently: the first three kinds cannot, and the fit refuses them in one line
saying what is and is not identified rather than hand a singular system to a solver.
Approach 2 needs IsoFLOP groups; on a design without them, and on checkpoints along D
(whose groups are checkpoints that share a C by chance), it is skipped with a note."""

import dataclasses

import numpy as np

from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs.table import Runs, budget_groups

SAME = 0.02  # values within 2% are one size, one D, one ratio
MIN_SIZES = 3  # an IsoFLOP group: at least this many distinct sizes at about one C
MIN_GROUPS = 2
LADDER_MAX_D = 6  # more distinct D per size than this: checkpoints along D, not a ladder
MIN_CLUSTERS = 6  # fewer sizes than this and resampling sizes leaves too few distinct draws
# No IsoFLOP minimum seen: a comes from the law's form (scaling.parametric.form).
FORM_SENSITIVE = ("ladder", "checkpoints")


def distinct(x: np.ndarray) -> int:
  """How many distinct values `x` holds, values within SAME of the previous one being one."""
  v = np.sort(np.log(np.asarray(x, np.float64)))
  return int(1 + np.sum(np.diff(v) > np.log1p(SAME))) if len(v) else 0


@dataclasses.dataclass(frozen=True)
class Design:
  kind: str            # one_D | one_N | one_ray | isoflop | ladder | checkpoints | mix
  n_runs: int
  n_sizes: int
  n_tokens: int        # distinct D
  n_ratios: int        # distinct D/N
  isoflop_groups: int  # budget groups of >= MIN_SIZES distinct sizes
  text: str            # one line: the design and what it supports

  @property
  def separable(self) -> bool:
    return self.kind not in ("one_D", "one_N", "one_ray")

  @property
  def supports_isoflop(self) -> bool:
    """Approach 2's budgets are IsoFLOP groups. On checkpoints along D the groups are
    checkpoints that share a C by chance (most runs are in none), each before its run's
    schedule has ended: minima of losses the schedule, not the allocation, shaped."""
    return self.isoflop_groups >= MIN_GROUPS and self.kind != "checkpoints"

  def why_not_isoflop(self) -> str:
    """Why Approach 2 does not run on this design by default (one clause)."""
    if self.kind == "checkpoints" and self.isoflop_groups >= MIN_GROUPS:
      return (f"on checkpoints along D its budgets would be the {self.isoflop_groups} groups "
              "of checkpoints that share a C by chance, each before its run's schedule has "
              f"ended ({self.text})")
    return (f"it needs {MIN_GROUPS} or more IsoFLOP groups of {MIN_SIZES}+ sizes at about "
            f"one C, and this design has {self.isoflop_groups} ({self.text})")

  def to_dict(self) -> dict:
    return {"kind": self.kind, "runs": self.n_runs, "sizes": self.n_sizes,
            "tokens": self.n_tokens, "ratios": self.n_ratios,
            "isoflop_groups": self.isoflop_groups, "text": self.text}


def sizes_of(N: np.ndarray) -> np.ndarray:
  """A label per run: its size among the distinct sizes (values within SAME are one)."""
  order = np.argsort(N)
  label = np.empty(len(N), np.int64)
  label[order] = np.concatenate([[0], np.cumsum(np.diff(np.log(N[order])) > np.log1p(SAME))])
  return label


def by_size(d: "Design") -> bool:
  """Whether the fit's bootstrap resamples whole sizes: on checkpoints along D, where each
  model contributes many runs that share its deviation from the law. Not on a ladder: with
  its few sizes (4-6) the resamples hold too few distinct ones, and on a Kaplan-form truth
  (bench/design_coverage.py, 100 draws) the interval of a held the truth in 48, against 75
  for the pairs bootstrap."""
  return d.kind == "checkpoints" and d.n_sizes >= MIN_CLUSTERS


def _per_size_tokens(N: np.ndarray, D: np.ndarray) -> list[int]:
  """The distinct D of each distinct size."""
  label = sizes_of(N)
  return [distinct(D[label == k]) for k in range(int(label.max()) + 1)]


def _dense(per_size: list[int], groups: list[np.ndarray], N: np.ndarray,
           budget: np.ndarray) -> bool:
  """Whether the sizes are each seen at more D than an IsoFLOP design gives them: more than
  LADDER_MAX_D and more than its groups hold sizes (a size is in at most one run per budget,
  and a budget's sizes straddle its minimum, so a grid's sizes see few budgets each), with no
  budget declared. Checkpoints of a suite whose models share their D (Pythia's: every model
  evaluated at the same steps) fall into groups of one C by chance and would otherwise read
  as a grid."""
  if np.any(np.isfinite(budget)) or not groups:
    return False
  sizes_per_group = float(np.median([distinct(N[g]) for g in groups]))
  return float(np.median(per_size)) > max(LADDER_MAX_D, sizes_per_group)


def read(runs: Runs) -> Design:
  """The design of `runs` (their finite-loss runs)."""
  ok = np.isfinite(runs.loss)
  N, D = runs.N[ok], runs.D[ok]
  n, sizes, tokens, ratios = int(ok.sum()), distinct(N), distinct(D), distinct(D / N)
  groups = [g for g in budget_groups(runs.subset(ok)) if distinct(N[g]) >= MIN_SIZES]
  in_groups = sum(len(g) for g in groups)
  per_size = _per_size_tokens(N, D) if n else []
  dense = bool(per_size) and _dense(per_size, groups, N, runs.budget[ok])
  if n and tokens == 1:
    kind, text = "one_D", (f"one D ({fmt.num(float(np.median(D)))} tokens) for all {n} runs "
                           f"of {sizes} sizes: the loss against N at that D")
  elif n and sizes == 1:
    kind, text = "one_N", (f"one N ({fmt.num(float(np.median(N)))} parameters) for all {n} "
                           f"runs at {tokens} D: the loss against D at that size")
  elif n and ratios == 1:
    kind, text = "one_ray", (f"one D/N ({fmt.num(float(np.median(D / N)))} tokens per parameter) "
                             f"for all {n} runs: the loss along that ray")
  elif len(groups) >= MIN_GROUPS and in_groups >= 0.5 * n and not dense:
    kind, text = "isoflop", (f"IsoFLOP groups: {len(groups)} budgets of {MIN_SIZES}+ sizes "
                             f"hold {in_groups} of {n} runs ({sizes} sizes)")
  elif per_size and min(per_size) >= 2 and max(per_size) <= LADDER_MAX_D:
    kind, text = "ladder", (f"a ladder: {sizes} sizes, each at {min(per_size)}-"
                            f"{max(per_size)} token counts ({n} runs)")
  elif per_size and np.median(per_size) > LADDER_MAX_D:
    kind, text = "checkpoints", (f"checkpoints along D: {sizes} sizes, each at up to "
                                 f"{max(per_size)} token counts ({n} runs)")
  else:
    kind, text = "mix", (f"a mix: {sizes} sizes, {tokens} token counts, {len(groups)} "
                         f"IsoFLOP groups of {MIN_SIZES}+ sizes ({n} runs)")
  return Design(kind, n, sizes, tokens, ratios, len(groups), text)


def caveat(d: Design, beneath: bool = False) -> str | None:
  """A note on what the fit assumes of this design and cannot check from the table; `beneath`:
  Approach 3's law is the law beneath the checkpoints' schedule (`parametric.schedule`)."""
  if d.kind == "checkpoints" and beneath:
    return ("each model's checkpoints are read as one run whose schedule ends at its last "
            "checkpoint (the law beneath the schedule); a model whose last checkpoint is not "
            "its run's end, or whose schedule differs from the others', moves a: fit the "
            "final evaluations or the cooldown branches where that is so")
  if d.kind == "checkpoints":
    return ("checkpoints are read as runs trained to their D; the checkpoints of one long run "
            "sit above such runs until its learning rate has decayed (a cosine run's until "
            "its end, a WSD run's until its cooldown), which moves a: fit the cooldown branches "
            "or the final evaluations when the schedule did not end at each checkpoint")
  return None


def not_separable(d: Design) -> str:
  """The one line a fit of a design that cannot separate N from D says instead."""
  what = {"one_D": "the D term (B, beta) and so the allocation N*(C), D*(C) are not "
                   "identified; only L(N) = E' + A/N^alpha at that D is",
          "one_N": "the N term (A, alpha) and so the allocation are not identified; only "
                   "L(D) = E' + B/D^beta at that N is",
          "one_ray": "the N and D terms cannot be told apart, so the allocation is not "
                     "identified; only the loss along that ray is"}[d.kind]
  return (f"these runs cannot separate N from D ({d.text}): {what}; a scaling law needs "
          "runs at two or more D for some size and two or more sizes (an IsoFLOP grid, or a "
          "ladder of sizes x token counts)")
