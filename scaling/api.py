"""The library API, the same as the command line: `chinchax.fit` and `chinchax.plan`.

    import chinchax
    law = chinchax.fit("runs/smoke", bootstrap=1000, ci=0.9, out="law.json")
    print(law.recommended["approach"], law.a, law.warnings)
    p = chinchax.plan(law, flops=1e21)
    print(p)                     # the table `chinchax plan` prints
    p.N, p.D, p.to_dict()

`chinchax fit` and `chinchax plan` parse their flags and call these; nothing here knows about
a command line. `summary(law, n_runs, law_path)` is a fitted law as `chinchax fit` and the
sweep print it: the headline (scaling.judgement.caveats) first, then every warning and note,
each approach's parameters with intervals, and the allocation table from the largest fitted
budget up."""

from collections.abc import Callable, Iterable, Mapping
import os
from typing import Any

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling import pipeline as fit_pipeline
from chinchax.scaling.parametric import fit as parametric
from chinchax.scaling.plan import extrapolation
from chinchax.scaling.plan import planner as plan_lib
from chinchax.scaling.law import presets
from chinchax.scaling.judgement import caveats
from chinchax.scaling.numerics import fmt
from chinchax.scaling.law import build as law_build
from chinchax.scaling.runs import table as runs_lib
from chinchax.scaling.law.artifact import ScalingLaw


__all__ = ["fit", "plan", "as_runs", "as_law"]


def as_runs(runs, *, params_convention: str = "total", flops_convention: str = "6ND",
            schedule: str = "all") -> runs_lib.Runs:
  """Runs from a path (sweep workdir, runs.jsonl, CSV), a list of paths, a `Runs`, or a
  table of columns read as a CSV is: a pandas DataFrame or a mapping {column: values} with
  N, D (or C), loss and optionally budget, U, run (or name), status; other columns ignored."""
  if isinstance(runs, runs_lib.Runs):
    return runs
  if isinstance(runs, Mapping) or hasattr(runs, "columns"):  # a dict, a DataFrame
    return runs_lib.from_columns(runs, params=params_convention, flops=flops_convention,
                                 source=f"<{type(runs).__name__}>")
  if not isinstance(runs, (str, os.PathLike, list, tuple)):
    raise UserError(f"runs: expected a path, a list of paths, a DataFrame or a mapping of "
                    f"columns, got {type(runs).__name__}")
  paths = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
  return runs_lib.load_runs([os.fspath(p) for p in paths], params=params_convention,
                            flops=flops_convention, schedule=schedule)


def as_law(law) -> ScalingLaw:
  """A ScalingLaw from itself, a law.json path, a law.json dict, or a preset's name."""
  if isinstance(law, ScalingLaw):
    return law
  if isinstance(law, Mapping):
    return ScalingLaw.from_dict(law)
  if isinstance(law, str) and law in presets.PRESETS:
    return presets.preset(law)
  if isinstance(law, (str, os.PathLike)):
    return ScalingLaw.load(law)
  raise UserError(f"expected a law: a ScalingLaw, a law.json path or dict, or a preset "
                  f"({', '.join(presets.names())}); got {type(law).__name__}")


def _approaches(spec) -> tuple[str, ...] | None:
  if spec is None:
    return None
  items = spec.split(",") if isinstance(spec, str) else (
      [spec] if isinstance(spec, int) else list(spec) if isinstance(spec, Iterable) else [spec])
  chosen = tuple(sorted({str(s).strip() for s in items if str(s).strip()}))
  if not chosen or set(chosen) - set(fit_pipeline.APPROACHES):
    raise UserError(f"approaches: give a comma list of 1, 2, 3 (e.g. '2,3'); got {spec!r}")
  return chosen


def fit_detailed(runs, *, approaches=None, bootstrap: int = 1000, ci: float = 0.9,
                 seed: int = 0, delta: float = parametric.DEFAULT_DELTA,
                 params_convention: str = "total", flops_convention: str = "6ND",
                 schedule: str = "all", base_law=None, out: str | None = None,
                 plots: str | None = None, log: Callable[[str], None] | None = None,
                 approach2_method: str = "auto"
                 ) -> tuple[ScalingLaw, runs_lib.Runs, list[str]]:
  """`fit`, returning (law, the runs read, the files written)."""
  base = None
  if base_law is not None:
    base = as_law(base_law)
  options = fit_pipeline.Options(
      approaches=_approaches(approaches), bootstrap=bootstrap, ci=ci, seed=seed, delta=delta,
      base_law=base, base_source=base.source if base is not None else "",
      approach2_method=approach2_method)
  fit_pipeline.check_options(options)
  _check_outputs(runs, out, plots)
  runs = as_runs(runs, params_convention=params_convention, flops_convention=flops_convention,
                 schedule=schedule)
  if base is not None and (base.conventions["params"], base.conventions["flops"]) != (
      runs.params, runs.flops):
    raise UserError(f"the base law counts N {base.conventions['params']} and C "
                    f"{base.conventions['flops']}, the runs N {runs.params} and C {runs.flops}; "
                    "use one convention for both")
  fitted = fit_pipeline.fit_runs(runs, options, log)
  fitted.doc["provenance"]["inputs_sha256"] = runs_lib.digest(runs)
  law = ScalingLaw.from_dict(fitted.doc, source=os.fspath(out) if out else "", copy=False)
  written = []
  if out:
    law.save(out)
    written.append(os.fspath(out))
  if plots:
    from chinchax.scaling import figures as fit_plots  # pylint: disable=g-import-not-at-top  (matplotlib)
    written += fit_plots.write_plots(fitted, os.fspath(plots))
  return law, runs, written


def _check_outputs(runs, out, plots) -> None:
  """Refuse, before the fit, outputs that cannot be written or would overwrite an input."""
  if out:
    atomic.check_writable(out, "out")
    inputs = [runs] if isinstance(runs, (str, os.PathLike)) else (
        runs if isinstance(runs, (list, tuple)) else [])
    for path in inputs:
      if isinstance(path, (str, os.PathLike)) and not atomic.is_remote(path) and \
          os.path.abspath(os.fspath(path)) == os.path.abspath(os.fspath(out)):
        raise UserError(f"out {os.fspath(out)} is one of the runs files; writing law.json "
                        "there would overwrite the input: give another --out")
  if plots:
    atomic.check_writable(plots, "plots", folder=True)


def fit(runs, *, approaches=None, bootstrap: int = 1000, ci: float = 0.9, seed: int = 0,
        delta: float = parametric.DEFAULT_DELTA, params_convention: str = "total",
        flops_convention: str = "6ND", schedule: str = "all", base_law=None,
        out: str | None = None, plots: str | None = None,
        log: Callable[[str], None] | None = None, approach2_method: str = "auto") -> ScalingLaw:
  """Fit scaling laws to runs; the law object of law.json (what `chinchax fit` writes).

  runs: a sweep workdir, runs.jsonl or CSV path (or several), a `Runs`, or a mapping of
    arrays N, D (or C), loss [, budget, U].
  approaches: None (every approach the data support), or some of 1, 2, 3 ("2,3", [2, 3], 2);
    asked for exactly one, the law is that approach's.
  bootstrap: resamples for the intervals (0: none); ci: their level, in (0, 1).
  params_convention: "total" or "non_embedding"; flops_convention: "6ND" or "chinchilla".
  base_law: a law (path, dict, ScalingLaw, preset name) whose E, A, B, alpha, beta the
    data-constrained fit holds fixed (runs with a unique-tokens column U); None: joint.
  out: write law.json there; plots: write the figures into that folder.
  approach2_method: how Approach 2 places each budget's minimum: "auto" (the joint profile
    fit when it passes the lack-of-fit check, else "local"), "local", "vp", "vp_levels",
    "parabola" (each checked for lack of fit, falling back to "local"); scaling.isoflop.fit.
  Returns the ScalingLaw: `.approaches`, `.warnings`, `.recommended`, `.data_constrained`,
  `.optimum(C)`, `.interval(...)`, and `.predict(N, D)` when it predicts losses.
  """
  return fit_detailed(runs, approaches=approaches, bootstrap=bootstrap, ci=ci, seed=seed,
                      delta=delta, params_convention=params_convention,
                      flops_convention=flops_convention, schedule=schedule, base_law=base_law,
                      out=out, plots=plots, log=log, approach2_method=approach2_method)[0]


def plan(law, *, flops: float | None = None, params: float | None = None,
         tokens: float | None = None, unique_tokens: float | None = None,
         inference_tokens: float | None = None, ci: float | None = None) -> plan_lib.Plan:
  """Plan N and D from a law (what `chinchax plan` prints): any of flops (C), params (N),
  tokens (D), with unique_tokens (U) and inference_tokens (T); ci: the intervals' level
  (default: the law's). Returns a Plan (`str(p)`, `p.to_dict()`, `p.N`, `p.warnings`)."""
  return plan_lib.plan(as_law(law), C=_float(flops), N=_float(params), D=_float(tokens),
                       U=_float(unique_tokens), T=_float(inference_tokens), level=ci)


def _float(x: Any) -> float | None:
  if x is None:
    return None
  if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
    return float(x)
  raise UserError(f"expected a number, got {x!r}")


# The table's budgets (law_build.table_budgets): the fitted range's ends, then 10x past it,
# each flagged; a plan further out is `chinchax plan`'s, with its extrapolation warning.


def _parameters(entry: dict) -> list[str]:
  ci = entry.get("ci") or {}
  cells = []
  for name in ("E", "A", "B", "alpha", "beta", "gamma")[:6 if "gamma" in entry else 5]:
    band = f" {fmt.interval(ci[name])}" if ci.get(name) else ""
    cells.append(f"{name} = {fmt.num(entry[name], 4)}{band}")
  return ["  " + ", ".join(cells[:3]), "  " + ", ".join(cells[3:])]


def _table(law: ScalingLaw, law_path: str | None) -> list[str]:
  C_min, C_max = law.fitted_range
  level = fmt.percent(law.ci_level) if law.samples is not None else ""
  lines = [f"compute-optimal allocation from the law of Approach {law.approach}"
           + (f" ({level} intervals):" if level else ":"),
           f"  {'C (FLOPs)':<10} {'N*':<28} {'D*':<28} {'D*/N*':<8} {'loss':<8} fitted range"]
  for C in law_build.table_budgets(law.fitted_range):
    N, D = law.optimum(C)
    past = extrapolation.table_label(law, C, N, D)
    cells = [fmt.num(C), fmt.num(N), fmt.num(D)]
    if law.samples is not None:
      cells[1] += " " + fmt.interval(law.interval("N", C))
      cells[2] += " " + fmt.interval(law.interval("D", C))
    loss = f"{law.optimal_loss(C):.4f}" if law.predicts_loss else "-"
    lines.append(f"  {cells[0]:<10} {cells[1]:<28} {cells[2]:<28} {fmt.num(D / N):<8} "
                 f"{loss:<8} {past}")
  lines.append(f"  a larger budget: chinchax plan --law={law_path or 'LAW'} --flops=C "
               "(it warns past 3x)")
  return lines


def summary(law: ScalingLaw, n_runs: int, law_path: str | None = None) -> str:
  """The fitted law as `chinchax fit` and the sweep print it; `law_path`, where its law.json
  was written, goes into the `chinchax plan` line."""
  doc = law.doc
  lines = [f"fitted {n_runs} runs"] + caveats.headline(doc)
  if doc["warnings"]:
    lines += ["warnings:"] + [f"  - {w}" for w in doc["warnings"]]
  if doc["notes"]:
    lines += ["notes:"] + [f"  - {n}" for n in doc["notes"]]
  e3 = doc["approaches"].get("3")
  if e3:
    state = "poorly determined, not the answer" if e3.get("problems") else "well determined"
    unknown = caveats.unidentified(e3)
    if unknown and not e3.get("problems"):
      state = f"a and b well determined; unidentified: {', '.join(unknown)}"
    form = "E + (A/N^alpha + B/D^beta)^gamma" if "gamma" in e3 else "E + A/N^alpha + B/D^beta"
    lines += [f"Approach 3's law L = {form} ({state}); Huber objective "
              f"{fmt.num(e3['objective'], 4)}, {e3['starts_at_best']}/{e3['starts']} starts "
              "reached it:"] + _parameters(e3)
  if law.fitted_range:
    lines += _table(law, law_path)
  if doc["data_constrained"]:
    dc = doc["data_constrained"]
    ci = dc["ci"] or {}
    said = dc.get("statements") or {}
    lines.append("data-constrained law (Muennighoff et al. 2023), base law "
                 f"{dc['base_source']}: "
                 + "; ".join(said.get(k) or f"{k[:3]}* = {fmt.num(dc[k])} "
                             f"{fmt.interval(ci.get(k))}" for k in ("R_D_star", "R_N_star")))
    lines += [f"  {dc['depends_on_base']}"] if dc.get("depends_on_base") else []
  return "\n".join(lines)
