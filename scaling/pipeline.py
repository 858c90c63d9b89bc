"""The fit of a set of runs: every approach asked for, their intervals and warnings, the
approaches' agreement, the recommendation, the data-constrained law, and law.json's dict.

Which approaches run: by default every one the data support (Approach 1 needs loss curves
or runs of one N at several D, Approach 2 two IsoFLOP budgets, Approach 3 5 runs), the others
skipped with a note; asked for explicitly, one that cannot run is a UserError. The law written is the recommended approach's
(scaling.judgement.caveats): Approach 3's parametric law when it is well determined, else the
allocation law of Approach 2 (or 1). Asked for exactly one approach, the law is that one's.

Runs that repeat data (D > U, scaling.runs.table) are left out of Approaches 1-3 and fitted by the
data-constrained law (scaling.constrained.two_stage) together with the rest: R_D*, R_N* on the base
law of a given law.json (`base_law`), else on a base law fitted first to the runs that
neither repeat data nor exceed N*(U).

On a ladder or a checkpoint suite Approach 3 also fits the nesting form (scaling.parametric.form),
and on a checkpoint suite of 6+ models (one run each, its last checkpoint the run's end) the
law beneath the checkpoints' schedule (scaling.parametric.schedule): either becomes Approach
3's law where the runs call for it (the law's form rejected; the checkpoints bent as a
schedule bends them), else it widens the interval of a.

Approach 2 places its minima by `Options.approach2_method` (scaling.isoflop.minima); it and
Approach 3 carry `lack_of_fit` (residuals against the noise local fits measure) and warn when
they do not fit. Every interval holds its estimate (`scaling.numerics.intervals.holding`), warning if it had not.

Warnings: the data's own first (scaling.judgement.checks), then each approach's (prefixed with
its name) and the fit's (a poorly determined Approach 3, dropped refits, disagreement, the
data-constrained fit's), all in law.json's top-level `warnings`.
"""

import dataclasses
import re
import warnings as warnings_lib
from collections.abc import Callable
from typing import Any

import numpy as np

from chinchax.errors import UserError
from chinchax.scaling.judgement import backtest
from chinchax.scaling.judgement import backtest_doc
from chinchax.scaling.judgement import caveats
from chinchax.scaling.judgement import checks
from chinchax.scaling.constrained import two_stage as dc_two_stage
from chinchax.scaling.envelope import fit as envelope
from chinchax.scaling.isoflop import fit as isoflop
from chinchax.scaling.isoflop import bootstrap as isoflop_bootstrap
from chinchax.scaling.isoflop import budgets as isoflop_budgets
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.numerics import fmt, forks, intervals, power
from chinchax.scaling.runs import anomalies
from chinchax.scaling.runs import design as design_lib
from chinchax.scaling.parametric import form as form_lib
from chinchax.scaling.parametric import schedule as schedule_lib
from chinchax.scaling.law import build as law_build
from chinchax.scaling.law import schema as law_schema
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.parametric import fit as bootstrap_lib
from chinchax.scaling.law.artifact import ScalingLaw
from chinchax.scaling.runs.table import Runs

APPROACHES = ("1", "2", "3")
MAX_FAILED = 0.5  # a bootstrap with more failed resamples than this fraction gives no interval


@dataclasses.dataclass(frozen=True)
class Options:
  approaches: tuple[str, ...] | None = None  # None: every approach the data support
  bootstrap: int = 1000
  ci: float = 0.9
  seed: int = 0
  delta: float = parametric.DEFAULT_DELTA
  base_law: ScalingLaw | None = None
  base_source: str = ""
  approach2_method: str = "auto"  # scaling.isoflop.fit.METHODS


@dataclasses.dataclass(frozen=True, eq=False)
class Fitted:
  """law.json's dict, the runs each approach saw, the fit objects and the power-law draws
  [a, b, log_kN, log_kD] of each approach (for plots)."""

  doc: dict[str, Any]
  runs: Runs
  fits: dict[str, Any]
  draws: dict[str, dict[str, np.ndarray]]
  level: float


def check_options(o: Options) -> None:
  if not (isinstance(o.bootstrap, (int, np.integer)) and not isinstance(o.bootstrap, bool)
          and o.bootstrap >= 0):
    raise UserError(f"bootstrap must be a whole number >= 0, got {o.bootstrap!r}")
  intervals.check_level(o.ci, "ci")
  if not (isinstance(o.delta, (int, float)) and o.delta > 0 and np.isfinite(o.delta)):
    raise UserError(f"delta must be a positive number, got {o.delta!r}")
  if o.approaches is not None and (not o.approaches or set(o.approaches) - set(APPROACHES)):
    raise UserError(f"approaches must be a non-empty subset of 1, 2, 3; got {o.approaches!r}")
  if o.approach2_method not in isoflop.METHODS:
    raise UserError(f"approach2_method must be one of {', '.join(isoflop.METHODS)}; got "
                    f"{o.approach2_method!r}")
  if o.base_law is not None and not o.base_law.predicts_loss:
    raise UserError("the base law must be a parametric law (Approach 3: E, A, B, alpha, "
                    f"beta); {o.base_law.source or 'the one given'} is an allocation law")
  if o.base_law is not None and o.base_law.form != law_schema.PARAMETRIC:
    # Muennighoff et al.'s R_D*, R_N* are fitted on the law's own form, not the nesting one.
    raise UserError(f"the base law must be of the form {law_schema.PARAMETRIC}; "
                    f"{o.base_law.source or 'the one given'} is {o.base_law.form} (its runs "
                    "rejected the law's form); give one of the law's form, e.g. from "
                    "`chinchax law --E= --A= --B= --alpha= --beta=`")


def _quiet(fn: Callable, *args, **kw):
  """fn(...) and the messages of the Python warnings it raised (they go to law.json)."""
  with warnings_lib.catch_warnings(record=True) as caught:
    warnings_lib.simplefilter("always")
    out = fn(*args, **kw)
  return out, [str(w.message) for w in caught]


def _unique(items) -> list[str]:
  return list(dict.fromkeys(str(i) for i in items))


def _interval_block(draws: dict[str, np.ndarray], names, level, entry) -> dict:
  """Percentile intervals, each widened to hold its estimate (`intervals.holding`)."""
  return {"level": float(level),
          **{k: intervals.holding(intervals.interval(draws[k], level), entry.get(k))
             for k in names if len(draws[k])}}


def _approach3(runs: Runs, o: Options, log, design: design_lib.Design
               ) -> tuple[dict, Any, np.ndarray | None]:
  by_size = design_lib.by_size(design)
  if len(runs) < 5:
    raise UserError(f"Approach 3 fits 5 parameters and needs at least 5 runs; got {len(runs)}")
  clusters = design_lib.sizes_of(runs.N) if by_size else None
  drawn = (bootstrap_lib.draw_ahead(len(runs), o.bootstrap, o.seed, clusters)
           if o.bootstrap else None)  # the draws made while the full-data fit runs
  fit3 = parametric.fit_parametric(runs.N, runs.D, runs.loss, delta=o.delta)
  theta3 = np.array([fit3.E, fit3.A, fit3.B, fit3.alpha, fit3.beta])
  with np.errstate(invalid="ignore", over="ignore"):  # a law with alpha < 0: refused below
    allocation = dict(zip(power.NAMES, map(float, power.from_theta(theta3))))
  entry = {"E": fit3.E, "A": fit3.A, "B": fit3.B, "alpha": fit3.alpha, "beta": fit3.beta,
           **allocation,
           "objective": fit3.objective, "starts": fit3.n_starts,
           "starts_at_best": fit3.n_at_best, "n_points": fit3.n_points, "ci": None,
           "bootstrap": None, "warnings": list(fit3.warnings)}
  samples = None
  if o.bootstrap:
    log(f"bootstrap: {o.bootstrap} resamples of Approach 3"
        f"{' (whole models, each with all its checkpoints)' if by_size else ''} ...")
    raw = bootstrap_lib.bootstrap_parametric(
        runs.N, runs.D, runs.loss, n_resamples=o.bootstrap, seed=o.seed, delta=o.delta,
        fit=fit3, clusters=clusters, drawn=drawn)
    ok = np.all(np.isfinite(raw), axis=1) & np.all(raw[:, 1:] > 0, axis=1)
    samples = raw[ok]
    dropped = int((~ok).sum())
    entry["bootstrap"] = {"kind": "sizes" if by_size else "pairs",
                          "n_resamples": o.bootstrap, "dropped": dropped,
                          "seed": o.seed}
    if dropped:
      entry["warnings"].append(
          f"{dropped} of {o.bootstrap} bootstrap refits gave no law (alpha, beta, A or B not "
          "positive) and were dropped: the intervals are optimistic; fit more budgets or sizes")
    if len(samples):
      P = power.from_theta(samples)
      columns = {**dict(zip(("E", "A", "B", "alpha", "beta"), samples.T)),
                 **dict(zip(power.NAMES, P.T))}
      entry["ci"] = _interval_block(columns, ("E", "A", "B", "alpha", "beta", "a", "b"), o.ci,
                                    entry)
      entry["warnings"] += checks.shifted(entry, columns, o.ci)
      if design.kind in design_lib.FORM_SENSITIVE:
        nested, draws_Rx6 = _form(runs, o, log, entry, fit3, clusters)
        if nested is not None:
          fit3, samples = nested, draws_Rx6
  if design.kind == "checkpoints":
    entry["curve_shape"] = checks.curve_shape(runs, fit3, design_lib.sizes_of(runs.N))
    if o.bootstrap and by_size:
      fit3, samples = _schedule(runs, o, log, entry, fit3, samples, design_lib.sizes_of(runs.N))
  entry["lack_of_fit"] = checks.approach3(runs, fit3)
  if (entry["lack_of_fit"] or {}).get("fits") is False:
    entry["warnings"].append(checks.approach3_message(
        entry["lack_of_fit"], form_lib.TEXT if "gamma" in entry else law_schema.PARAMETRIC))
  entry["problems"] = caveats.approach3_problems(entry, len(runs))
  return entry, fit3, samples


def _form(runs: Runs, o: Options, log, entry: dict, fit3, clusters):
  """The nesting form's a beside the law's (`parametric.form`): the interval of a (and of
  b = 1 - a) becomes the hull of both, and the entry says when they disagree. When the runs
  reject the law's form (F test, form_lib.P_REJECT), the nesting form, which holds the law at
  gamma = 1, becomes Approach 3's law: the entry's coefficients, gamma, intervals (a's too)
  and draws are its own, the law's are kept under `law_form`, and the nesting form is returned
  with its draws; otherwise (None, None)."""
  theta3 = (fit3.E, fit3.A, fit3.B, fit3.alpha, fit3.beta)
  ff = form_lib.fit_form(runs.N, runs.D, runs.loss, theta3, o.delta)
  log(f"form: {form_lib.TEXT}, gamma = {ff.gamma:.3g}: a = {ff.a:.3f} "
      f"({min(o.bootstrap, form_lib.MAX_RESAMPLES)} resamples) ...")
  draws_Rx6, a_S, ci_form = _laws_and_a(
      form_lib.bootstrap(runs.N, runs.D, runs.loss, ff, o.delta, n_resamples=o.bootstrap,
                         seed=o.seed, clusters=clusters), ff.a, o.ci)
  if not len(draws_Rx6):
    return None, None
  law_ci = entry["ci"]["a"]
  adopt = ff.p_value < form_lib.P_REJECT
  if adopt:
    # Its interval is the answer's, not one side of a hull. The estimate leans against
    # E >= 0 and along the ridge of gamma against the exponents, so the draws are skewed as
    # it is biased (the reflected interval), and the refits from the full fit do not walk
    # that ridge as far as the objective allows (the profile, `form_lib.profile_a`).
    profile = form_lib.profile_a(runs.N, runs.D, runs.loss, ff, o.delta, o.ci)
    reflected = intervals.with_reflection(a_S, ff.a, o.ci)
    ci_form = [min(reflected[0], profile[0]), max(reflected[1], profile[1])]
  entry["form"] = {"form": form_lib.TEXT, "gamma": ff.gamma, "a": ff.a, "ci_a": ci_form,
                   "p_value": ff.p_value, "n_resamples": int(len(a_S)), "adopted": adopt}
  hull = [min(law_ci[0], ci_form[0]), max(law_ci[1], ci_form[1])]
  said = (f"on this design a rests on the law's form: {form_lib.TEXT} (gamma = {ff.gamma:.3g}) "
          f"gives a = {ff.a:.3f} {fmt.interval(ci_form)} against the law's {entry['a']:.3f} "
          f"{fmt.interval(law_ci)}; the interval of a given is the hull of both")
  if adopt:
    _adopt(entry, ff, draws_Rx6, o)
    entry.setdefault("notes", []).append(
        f"the runs reject the law's form (F test p = {ff.p_value:.1g}), so Approach 3's law is "
        f"{form_lib.TEXT} (gamma = {ff.gamma:.3g}), a = {ff.a:.3f} {fmt.interval(ci_form)}; "
        f"the law's own form gives a = {entry['law_form']['a']:.3f} {fmt.interval(law_ci)}")
  elif ci_form[1] < law_ci[0] or ci_form[0] > law_ci[1]:
    entry["warnings"].append(said + "; runs nearer the optimum's tokens per parameter would "
                             "decide between them")
  else:
    entry.setdefault("notes", []).append(said)
  if not adopt:  # adopted, the law's form is rejected: a's interval is the nesting form's
    entry["ci"]["a"], entry["ci"]["b"] = hull, [1 - hull[1], 1 - hull[0]]
  return (ff, draws_Rx6) if adopt else (None, None)


def _laws_and_a(draws_RxP: np.ndarray, a: float, ci: float):
  """An alternative law's bootstrap refits that gave a law (every coefficient and exponent
  after E positive), their a, and its interval holding the estimate a; (empty, None, None)
  when none did."""
  draws_RxP = draws_RxP[np.all(draws_RxP[:, 1:] > 0, axis=1)]
  if not len(draws_RxP):
    return draws_RxP, None, None
  a_S = power.from_theta(draws_RxP)[:, 0]
  return draws_RxP, a_S, intervals.holding(intervals.interval(a_S, ci), a)


def _adopt(entry: dict, ff, draws_Rx6: np.ndarray, o: Options) -> None:
  """The entry's law becomes the nesting form's; the rejected law's numbers, and the
  warnings its fit gave, are kept under `law_form`."""
  keep = ("E", "A", "B", "alpha", "beta", *power.NAMES, "objective", "warnings")
  entry["law_form"] = {"form": law_schema.PARAMETRIC, **{k: entry[k] for k in keep},
                       "ci_a": entry["ci"]["a"]}
  values = ff.values
  P = power.from_theta(values)
  entry.update(dict(zip(opt.NESTED_NAMES, map(float, values))),
               **dict(zip(power.NAMES, map(float, P))), objective=ff.objective, warnings=[])
  columns = {**dict(zip(opt.NESTED_NAMES, draws_Rx6.T)),
             **dict(zip(power.NAMES, power.from_theta(draws_Rx6).T))}
  entry["ci"] = _interval_block(columns, (*opt.NESTED_NAMES, "a", "b"), o.ci, entry)
  # No `checks.shifted` here: the reflected interval holds its estimate by construction.
  ci_a = entry["form"]["ci_a"]  # the reflected and profile intervals' hull (`_form`)
  entry["ci"]["a"], entry["ci"]["b"] = ci_a, [1 - ci_a[1], 1 - ci_a[0]]


def _schedule(runs: Runs, o: Options, log, entry: dict, fit3, samples, sizes_n):
  """The law beneath the checkpoints' schedule (`parametric.schedule`), each model's last
  checkpoint read as its run's end. The table does not say whether a checkpoint's schedule
  had ended, so both readings are kept: when the checkpoints bend as a schedule does (the
  curve-shape check) the law beneath it becomes Approach 3's law, with its own draws and
  interval of a, and the law read directly is kept under `schedule.without`; otherwise the
  interval of a is the hull of both readings'. Returns Approach 3's fit and draws, replaced
  or not."""
  pl = schedule_lib.places(runs.N, runs.D, sizes_n)
  if isinstance(pl, str):
    entry.setdefault("notes", []).append(
        f"the checkpoints' schedule is not fitted ({schedule_lib.TEXT}): {pl}")
    return fit3, samples
  if "gamma" in entry:  # the runs reject the law's form, which the schedule's law has
    entry.setdefault("notes", []).append(
        f"the checkpoints' schedule is not fitted ({schedule_lib.TEXT}): the runs reject the "
        f"law's form, and the nesting form {form_lib.TEXT} is Approach 3's law")
    return fit3, samples
  law_theta = [entry[k] for k in ("E", "A", "B", "alpha", "beta")]
  sf = schedule_lib.fit(runs.N, runs.D, runs.loss, law_theta, pl, o.delta)
  log(f"schedule: {schedule_lib.TEXT}, {pl.text}: "
      f"a = {sf.a:.3f} ({min(o.bootstrap, schedule_lib.MAX_RESAMPLES)} resamples) ...")
  draws, a_S, ci_a = _laws_and_a(
      schedule_lib.bootstrap(runs.N, runs.D, runs.loss, sf, o.delta, n_resamples=o.bootstrap,
                             seed=o.seed, clusters=sizes_n), sf.a, o.ci)
  if not len(draws):
    entry.setdefault("notes", []).append(
        f"the checkpoints' schedule is not fitted ({schedule_lib.TEXT}): none of its "
        "bootstrap refits gave a law")
    return fit3, samples
  shape = entry.get("curve_shape")
  adopt = shape is not None and shape["p_value"] < checks.P_SHAPE
  before = {"form": law_schema.PARAMETRIC, "a": entry["a"], "ci_a": entry["ci"]["a"]}
  entry["schedule"] = {
      "form": schedule_lib.TEXT, "tokens_per_param": list(pl.multiples),
      "f": [float(v) for v in np.exp(pl.knots)], "g": [float(v) for v in sf.g],
      "a": sf.a, "ci_a": ci_a, "p_value": sf.p_value, "n_resamples": int(len(a_S)),
      "adopted": adopt}
  said = (f"{schedule_lib.TEXT} ({pl.text}, each run ending at its model's last checkpoint, "
          f"g at its checkpoints' places) gives a = {sf.a:.3f} {fmt.interval(ci_a)}, the law "
          f"read directly {before['a']:.3f} {fmt.interval(before['ci_a'])}")
  if adopt:
    entry["schedule"]["without"] = before
    P = power.from_theta(sf.law)
    entry.update(dict(zip(("E", "A", "B", "alpha", "beta"), map(float, sf.law))),
                 **dict(zip(power.NAMES, map(float, P))), objective=sf.objective)
    columns = {**dict(zip(("E", "A", "B", "alpha", "beta"), draws.T)),
               **dict(zip(power.NAMES, power.from_theta(draws).T))}
    entry["ci"] = _interval_block(columns, ("E", "A", "B", "alpha", "beta", "a", "b"), o.ci,
                                  entry)
    entry["ci"]["a"], entry["ci"]["b"] = ci_a, [1 - ci_a[1], 1 - ci_a[0]]
    entry.setdefault("notes", []).append(
        "the checkpoints bend as a schedule's decay bends them, so Approach 3's law is the law "
        f"beneath the schedule: {said}")
    return sf, draws
  hull = [min(before["ci_a"][0], ci_a[0]), max(before["ci_a"][1], ci_a[1])]
  entry["ci"]["a"], entry["ci"]["b"] = hull, [1 - hull[1], 1 - hull[0]]
  entry.setdefault("notes", []).append(
      "on checkpoints of one run per model a also rests on whether each checkpoint's schedule "
      f"had ended, which the runs do not say: {said}; the interval of a given is the hull of "
      "both")
  return fit3, samples


def _one_D_suite(runs: Runs) -> list[str]:
  """A checkpoint suite whose models all ran to one D (Pythia's) cannot say whether its
  checkpoints are runs trained to their D: the warning that says so, or none."""
  pl = schedule_lib.places(runs.N, runs.D, design_lib.sizes_of(runs.N))
  if not (isinstance(pl, str) and pl.startswith(schedule_lib.ONE_D)):
    return []
  return ["a rests on reading each checkpoint as a run trained to its D, which these runs "
          f"cannot check: {schedule_lib.ONE_D}, so a schedule's excess before its end (a "
          "cosine run's) is one more term of D, moves beta and a, and no fit of these runs can "
          "tell it from the law's; fit runs trained to their D (cooldown branches, final "
          "evaluations) or models run to different lengths"]


def _refuse_a_law_that_rises(entry: dict) -> None:
  """Approach 3 is the only approach left and its law is no loss law (a term that rises
  with its variable): one line, not a law.json that fails its own schema."""
  bad = [f"{k} = {fmt.num(entry[k])}" for k in ("alpha", "beta", "A", "B")
         if not (np.isfinite(entry[k]) and entry[k] > 0)]
  if bad:
    rises = [v for k, v in (("alpha", "N"), ("beta", "D")) if not entry[k] > 0]
    why = (f"the loss does not fall with {' or '.join(rises)} in these runs" if rises
           else "a term is not positive")
    raise UserError(f"no scaling law fits these runs: Approach 3 gives {', '.join(bad)} ({why}) "
                    "and no other approach could be fitted; look for a mislabelled size or "
                    "token count, or runs that diverged")


def _allocation(name: str, runs: Runs, o: Options, log) -> tuple[dict, Any, dict | None]:
  """Approach 1 or 2: the fit's dict, its interval of a and b, and its warnings."""
  fit_fn, boot_fn = {"2": (isoflop.fit_isoflop, isoflop_bootstrap.bootstrap_isoflop),
                     "1": (envelope.fit_envelope, envelope.bootstrap_envelope)}[name]
  kw = {"method": o.approach2_method} if name == "2" else {}
  fit, caught = _quiet(fit_fn, runs, **kw)
  entry = fit.to_dict()
  if not 0 < entry["a"] < 1:  # b = 1 - a: one of N*, D* would shrink as C grows
    raise UserError(f"Approach {name} gives a = {entry['a']:.3f}, b = {entry['b']:.3f}: one of "
                    "N* and D* would fall as compute grows, so these runs do not determine the "
                    "allocation by this approach; add budgets, or sizes around each minimum")
  entry["warnings"] = _dropped_in_one(_unique([
      *getattr(fit, "dropped", ()), *getattr(fit, "warnings", ()),
      *checks.unprefixed(caught, name)]))
  entry["ci"], entry["bootstrap"], draws = None, None, None
  if o.bootstrap:
    log(f"bootstrap: {o.bootstrap} resamples of Approach {name} ...")
    try:
      boot, caught = _quiet(boot_fn, runs, n_resamples=o.bootstrap, seed=o.seed, **kw)
    except UserError as e:
      entry["warnings"].append(f"no interval: {e}")
      return entry, fit, None
    entry["warnings"] = _unique([*entry["warnings"], *checks.unprefixed(caught, name)])
    if boot.get("notes"):  # what the interval is made of (isoflop_bootstrap.interval_note)
      entry["notes"] = [*entry.get("notes", ()), *boot["notes"]]
    failed, n = int(boot["n_failed"]), int(boot["n_resamples"])
    entry["bootstrap"] = {"kind": boot.get("kind", {"2": "residual", "1": "curves"}[name]),
                          "n_resamples": n, "dropped": failed, "seed": o.seed}
    if failed > MAX_FAILED * n:
      # The survivors of a mostly failed bootstrap are the resamples closest to the
      # original fit: their spread would understate the uncertainty.
      more = {"2": "sample more sizes per budget",
              "1": "a resample of whole curves needs two sizes that each have the lowest loss "
                   "over a range of C: train more sizes, with curves that overlap in C"}[name]
      entry["warnings"].append(f"no interval: {failed} of {n} bootstrap resamples could not "
                               f"be fitted; {more}")
    else:
      if failed:
        entry["warnings"].append(f"{failed} of {n} bootstrap resamples could not be fitted "
                                 "and were left out of the interval")
      draws = {k: np.asarray(boot[k], np.float64) for k in power.NAMES}
      entry["ci"] = _interval_block(draws, power.NAMES, o.ci, entry)
      entry["warnings"] += checks.shifted(entry, draws, o.ci)
      entry["warnings"] += _unbounded(entry["ci"]["a"], o.ci)
  return entry, fit, draws


def _unbounded(ci_a, ci: float) -> list[str]:
  """The estimate of a is inside (0, 1) (else refused above), but its interval may not be:
  past 1, b = 1 - a is negative and D* would fall as compute grows; below 0, N* would."""
  lo, hi = ci_a
  if 0 < lo and hi < 1:
    return []
  side = ("past 1, where b < 0 and D* would fall as compute grows" if hi >= 1
          else "below 0, where N* would fall as compute grows")
  return [f"its {ci:.0%} interval of a, {fmt.interval(ci_a)}, reaches {side}: these runs do "
          "not bound the allocation by this approach"]


def _dropped_in_one(lines: list[str], most: int = 3) -> list[str]:
  """More than `most` budgets dropped for too few sizes are said in one line (law.json's
  `dropped` names each): a mix of a grid and a ladder drops every pseudo-budget of its
  ladder."""
  few = r"budget C=\S+ dropped: \d+ distinct sizes, need \d+"
  dropped = [l for l in lines if re.fullmatch(few, l)]
  if len(dropped) <= most:
    return lines
  C = sorted(float(l.split()[1][2:]) for l in dropped)
  k = sorted({int(l.split(" dropped: ", 1)[1].split()[0]) for l in dropped})
  one = (f"{len(dropped)} budgets dropped (C = {fmt.num(C[0])} to {fmt.num(C[-1])}), each with "
         f"{k[0] if len(k) == 1 else f'{k[0]}-{k[-1]}'} distinct sizes, need "
         f"{isoflop_budgets.MIN_SIZES}; law.json's approaches.2.dropped names each")
  first = lines.index(dropped[0])
  rest = [l for l in lines if l not in dropped]
  return rest[:first] + [one] + rest[first:]


def _wanted(o: Options) -> tuple[tuple[str, ...], bool]:
  return (o.approaches, True) if o.approaches is not None else (APPROACHES, False)


def fit_runs(runs: Runs, o: Options, log: Callable[[str], None] | None = None) -> Fitted:
  """Every approach asked for on `runs`; law.json's dict (validated) and the pieces."""
  check_options(o)
  log = log or (lambda _: None)
  wanted, explicit = _wanted(o)
  warnings, notes = anomalies.data_warnings(runs), []
  if runs.n_failed:
    notes.append(f"{runs.n_failed} failed runs skipped")
  all_runs, repeats = runs, runs.repeats
  if repeats.any():
    runs = runs.subset(~repeats)
    notes.append(f"{int(repeats.sum())} of {len(all_runs)} runs repeat data (D > U): "
                 "Approaches 1-3 fit the other runs, the data-constrained law fits them all")

  design = design_lib.read(runs)
  entries, fits, draws, samples3, skipped = {}, {}, {}, None, []
  if not design.separable:
    if o.base_law is None:  # no approach can fit it, and no base law to fit R_D* on
      raise UserError(design_lib.not_separable(design))
    skipped.append(f"Approaches 1-3: {design_lib.not_separable(design)}")
    wanted = ()
  if "2" in wanted and not design.supports_isoflop and explicit:
    warnings.append(f"Approach 2 was asked for, but {design.why_not_isoflop()}: its minima "
                    f"rest on budgets of fewer than {design_lib.MIN_SIZES} sizes, or on "
                    "pseudo-budgets of runs that share a C by chance")
  log(f"design: {design.text}")
  # The backtest's refits need only the runs: where `chinchax fit` may fork they run in a
  # child beside the approaches' fits (forks.ahead), for each approach that may be fitted;
  # elsewhere here at the end, for those fitted.
  refit = lambda names: backtest.backtest(runs, backtest.refits(names, o.delta,
                                                                o.approach2_method))
  candidates = sorted(n for n in wanted if n != "2" or design.supports_isoflop or explicit)
  with forks.ahead(lambda: refit(candidates)) as backtest_of:
    for name in sorted(wanted, reverse=True):  # 3, then 2, then 1
      if name == "2" and not (design.supports_isoflop or explicit):
        skipped.append(f"Approach 2: {design.why_not_isoflop()}")
        continue
      try:
        if name == "3":
          entries["3"], fits["3"], samples3 = _approach3(runs, o, log, design)
          if samples3 is not None and len(samples3):
            draws["3"] = dict(zip(power.NAMES, power.from_theta(samples3).T))
        else:
          entries[name], fits[name], d = _allocation(name, runs, o, log)
          if d is not None:
            draws[name] = d
      except UserError as e:
        why = str(e) if str(e).startswith(f"Approach {name}") else f"Approach {name}: {e}"
        if explicit:
          raise UserError(why) from None
        skipped.append(why)
    bt = None
    if entries:
      log("backtest: refitting without the largest budgets ...")
      bt = backtest.only(backtest_of(here=lambda: refit(sorted(entries))), sorted(entries))
  beneath = entries.get("3", {}).get("schedule", {}).get("adopted", False)
  if design.kind == "checkpoints" and "3" in entries:
    warnings += _one_D_suite(runs)
  if design_lib.caveat(design, beneath):
    notes.append(f"design: {design_lib.caveat(design, beneath)}")
  notes += [f"skipped: {why}" for why in skipped]
  if not entries and o.base_law is None:
    raise UserError("; ".join(skipped) + "; so no approach could be fitted")

  if entries:
    for k in entries:
      entries[k]["backtest"] = backtest_doc.miss(bt, k)
  shape = (entries.get("3") or {}).get("curve_shape")
  if shape and shape["p_value"] < checks.P_SHAPE:  # the runs', not Approach 3's: no problem
    warnings.append(checks.curve_shape_message(
        shape, beneath=beneath))
  for k in sorted(entries):
    warnings += [f"Approach {k}: {w}" for w in entries[k]["warnings"]]
    notes += [f"Approach {k}: {n}" for n in entries[k].get("notes", ())]
  disagreements = caveats.agreement(entries)
  warnings += disagreements
  if entries:
    approach, why = caveats.recommend(entries, list(o.approaches) if explicit else None)
    if entries[approach].get("problems"):
      warnings.append(f"Approach 3's law is poorly determined: "
                      f"{'; '.join(entries[approach]['problems'])}")
    elif "3" in entries and entries["3"]["problems"]:
      warnings.append(f"Approach 3's law is poorly determined and is not the answer: "
                      f"{'; '.join(entries['3']['problems'])}")
  else:
    approach, why = "3", f"the base law {o.base_source or ''} (no approach could be fitted)"

  dc = None
  if repeats.any():
    dc = _data_constrained(all_runs, o, log, warnings)
    if dc is not None:
      warnings += dc["warnings"]

  if approach == "3" and "3" in entries:
    _refuse_a_law_that_rises(entries["3"])
  common = dict(
      ci_level=o.ci, approaches=entries, recommended={"approach": approach, "why": why},
      warnings=_unique(warnings), notes=notes, data_constrained=dc,
      params_convention=runs.params, flops_convention=runs.flops,
      N=runs.N, D=runs.D, C=runs.C, inputs=list(runs.sources))
  if approach == "3" and "3" in entries:
    e3, fit3 = entries["3"], fits["3"]  # fit3: the law's fit, or the nesting form adopted
    doc = law_build.build_law(
        **{k: e3[k] for k in opt.PARAM_NAMES}, gamma=e3.get("gamma"), delta=o.delta,
        n_starts=e3["starts"], objective=e3["objective"], n_at_best=e3["starts_at_best"],
        n_points=e3["n_points"], fit_warnings=getattr(fit3, "warnings", ()), samples=samples3,
        seed=o.seed if o.bootstrap else None,
        bootstrap_kind=(entries["3"].get("bootstrap") or {}).get("kind", "pairs"), **common)
  elif approach in entries:
    e, d = entries[approach], draws.get(approach)
    doc = law_build.build_power_law(
        **{k: e[k] for k in power.NAMES}, approach=approach,
        samples=None if d is None else np.stack([d[k] for k in power.NAMES], axis=1),
        seed=o.seed if d is not None else None,
        bootstrap_kind=(e.get("bootstrap") or {}).get("kind", "pairs"), **common)
  else:  # only the data-constrained law was fitted, on the given base law
    doc = _base_law_doc(o, common)
  doc["fit"]["disagreements"] = disagreements
  if approach == "3" and ({"form", "schedule"} & set(entries.get("3", {}))) and doc.get("ci"):
    doc["ci"]["a"], doc["ci"]["b"] = entries["3"]["ci"]["a"], entries["3"]["ci"]["b"]
  doc["data"]["design"] = design.to_dict()
  if entries:
    doc["backtest"] = law_build.plain(bt)
  return Fitted(doc=doc, runs=runs, fits=fits, draws=draws, level=o.ci)


def _data_constrained(runs: Runs, o: Options, log, said: list[str]) -> dict | None:
  base = o.base_law
  log(f"data-constrained law: {'R_D*, R_N*' if base else 'the base law, then R_D*, R_N*'}"
      f"{f', {o.bootstrap} resamples' if o.bootstrap else ''} ...")
  try:
    return dc_two_stage.fit(runs.N, runs.D, runs.U, runs.loss,
                            base=None if base is None else base.theta,
                            base_samples=None if base is None else base.samples,
                            base_source=o.base_source, n_resamples=o.bootstrap, seed=o.seed,
                            level=o.ci, delta=o.delta)
  except UserError as e:
    said.append(f"data-constrained law skipped: "
                 f"{str(e).removeprefix('data-constrained fit: ')}")
    return None


def _base_law_doc(o: Options, common: dict) -> dict:
  """law.json when the runs fit only R_D*, R_N*: the given base law, its ranges and draws."""
  base = o.base_law
  ranges = base.ranges
  common = {**common, **{k: list(ranges[k]) if ranges[k] else None for k in ("N", "D", "C")}}
  doc = law_build.build_law(**dict(zip(("E", "A", "B", "alpha", "beta"), map(float, base.theta))),
                            samples=base.samples, **common)
  doc["data"]["points"] = base.doc["data"]["points"]
  doc["fit"]["points"] = base.doc["fit"]["points"]
  return doc
