"""The end of a sweep: its fit (`fit_workdir`) and WORKDIR/report.md from its runs.jsonl and
law.json (`write_report`, also `chinchax report WORKDIR`).

The report, in order: the runs (one row per cell: C, N, shape, D, D/N, steps, status, eval
loss, time, the hardware it ran on, tokens/s and MFU), the per-budget IsoFLOP minima (the
best measured run of each budget, and Approach 2's minimum where the fit has it), the fit's headline and caveats exactly as
`chinchax fit` prints them (scaling.judgement.caveats, from law.json), Approach 3's L(N, D) = E +
A/N^alpha + B/D^beta with its bootstrap intervals, the exponents a, b of N* ∝ C^a,
D* ∝ C^b per approach with intervals, the data-constrained R_D*, R_N* when fitted, the
compute-optimal N*, D* for budgets beyond the sweep (`scaling.plan.planner`), the pre-registered
forecast against the run it was about (sweep config `forecast`, sweeps/forecast_score.py), the
task laws when the runs scored tasks (tasks.json: each task's two steps and their figure), and
links to the plots. `chinchax sweep` writes it at the end; this command rebuilds it.

`fit_workdir(workdir, bootstrap)` is the sweep's one call of the fit: it does what `chinchax fit WORKDIR --out=WORKDIR/law.json --plots=WORKDIR/plots
--bootstrap=B` does, through the library (`chinchax.scaling.api.fit_detailed`), not the
command line, and prints the same summary. When the runs scored tasks (`config.tasks`) it
first fits them as `chinchax fit-tasks WORKDIR --out=WORKDIR/tasks.json --plots=WORKDIR/plots`
does (`fit_tasks_workdir`); a task fit that fails is a warning, not the sweep's failure, and
removes a tasks.json of earlier runs."""

import json
import math
import os
import sys

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling import api
from chinchax.scaling.law import pack as law_pack
from chinchax.scaling.law import schema as law_schema
from chinchax.scaling.numerics import fmt
from chinchax.scaling.plan import planner as plan_lib
from chinchax.scaling.judgement import caveats
from chinchax.scaling.plan import extrapolation
from chinchax.scaling.plan import forecast as forecast_lib
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.runs import records as records_lib
from chinchax.scaling.tasks import file as tasks_file
from chinchax.scaling.tasks import fit as tasks_fit
from chinchax.scaling.tasks import steps as tasks_steps
from chinchax.scaling.tasks import table as tasks_table
from chinchax.scaling.tasks import text as tasks_text
from chinchax.sweeps import forecast_score


PLOTS = ("isoflops", "optimal", "law", "residuals")
TASKS = "tasks.json"
# Compute-optimal rows at these multiples of the top budget: the table ends near the data
# (`chinchax plan --flops=C` goes further, with its extrapolation warning).
BEYOND = (1.0, 3.0, 10.0)
_METHODS = {"vp": "the joint fit of every budget's profile", "parabola": "a parabola in log N",
            "vp_levels": "the joint fit at matched loss levels"}


def _read_records(workdir: str) -> list[dict]:
  path = os.path.join(workdir, "runs.jsonl")
  if not atomic.exists(path):
    raise UserError(f"{path}: no runs.jsonl; is {workdir} a sweep workdir?")
  return [r for _, r in records_lib.read_runs(path)]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
  return (["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
          + ["| " + " | ".join(r) + " |" for r in rows])


def _g(x, spec=".3g") -> str:
  """A number as `spec` says; significant digits (`.3g`, `.2e`) as fmt.num writes them (1.2e12)."""
  if x is None or (isinstance(x, float) and not math.isfinite(x)):
    return "–"
  if spec[-1] in "ge":
    return fmt.num(x, int(spec[1:-1]) + (spec[-1] == "e"))
  return format(x, spec)


def _seconds(x) -> str:
  """Whole seconds, or tenths below 10 s: a WSD branch's cooldown may take one."""
  return _g(x, ".1f" if isinstance(x, (int, float)) and abs(x) < 10 else ".0f")


def _ci(pair, spec=".3f") -> str:
  return f" [{_g(pair[0], spec)}, {_g(pair[1], spec)}]" if pair else ""


def runs_section(records: list[dict]) -> list[str]:
  rows = []
  for r in sorted(records, key=lambda r: (r.get("budget") or 0.0, r.get("N_total", 0))):
    s = r.get("shape") or {}
    loss = _g(r.get("eval_loss"), ".4f") if r.get("status") == "done" else (
        f"failed: {r.get('reason')}")
    rows.append([r["name"], _g(r.get("budget")), f"{r.get('N_total', 0):,}",
                 f"{s.get('d_model')} x {s.get('n_layers')}", _g(r.get("D")),
                 _g(r["D"] / r["N_total"], ".1f") if r.get("N_total") else "–",
                 str(r.get("steps", "–")), loss, _seconds(r.get("wall_s")),
                 _hardware(r), _g(r.get("tokens_per_s"), ".3g"),
                 _g(100 * r["mfu"], ".1f") + "%" if r.get("mfu") is not None else "–"])
  n_failed = sum(r.get("status") != "done" for r in records)
  notes = sorted({r["hardware"]["peak_flops_reason"] for r in records
                  if (r.get("hardware") or {}).get("peak_flops_reason")})
  wall = ["", "wall s: each run's own training call in its last session"
          + (" (a WSD branch: its cooldown, not the stable run it starts from)"
             if any(r.get("schedule") == "wsd" for r in records) else "")
          + "; runs trained side by side overlap, so the column does not add up to the "
          "sweep's time."]
  return ["## Runs", "", f"{len(records)} runs, {n_failed} failed.", ""] + _table(
      ["cell", "C", "N", "d_model x L", "D", "D/N", "steps", "eval loss", "wall s", "hardware",
       "tokens/s", "MFU"], rows) + wall + [""] * bool(notes) + [f"- MFU: {n}" for n in notes]


def _hardware(r: dict) -> str:
  """`16 x TPU v5 (tpu), mesh 1x16x1` from the record's hardware (older records: –)."""
  hw = r.get("hardware")
  if not hw:
    return "–"
  mesh = "x".join(str(v) for v in (hw.get("mesh") or {}).values())
  return f"{hw['device_count']} x {hw['device_kind']} ({hw['backend']}), mesh {mesh}"


def minima_section(records: list[dict], law: dict | None) -> list[str]:
  by_budget: dict[float, list[dict]] = {}
  for r in records:
    if r.get("status") == "done" and r.get("budget") and r.get("eval_loss") is not None:
      by_budget.setdefault(float(r["budget"]), []).append(r)
  rows = []
  for C in sorted(by_budget):
    best = min(by_budget[C], key=lambda r: r["eval_loss"])
    rows.append([_g(C), str(len(by_budget[C])), best["name"], f"{best['N_total']:,}",
                 _g(best["D"]), _g(best["eval_loss"], ".4f")])
  out = ["## IsoFLOP minima", "", "The best measured run of each budget."]
  out += [""] + _table(["C", "runs", "best cell", "N", "D", "eval loss"], rows)
  fit2 = (law or {}).get("approaches", {}).get("2")
  if fit2:
    p = fit2["points"]
    how = _METHODS.get(fit2.get("method"), fit2.get("method") or "its fit")
    out += ["", f"Approach 2's minimum per budget ({how}):", ""]
    out += _table(["C", "N*", "D*", "loss"],
                  [[_g(C), _g(N), _g(D), _g(L, ".4f")]
                   for C, N, D, L in zip(p["C"], p["N"], p["D"], p["loss"])])
    out += [f"- {d}" for d in fit2.get("dropped", [])]
  return out


def law_section(law: dict) -> list[str]:
  """The headline and caveats of `chinchax fit` (scaling.judgement.caveats), then the numbers."""
  out = ["## Fitted law", "",
         f"Loss in {law['conventions']['loss']}, N {law['conventions']['params']} parameters, "
         f"C by {law['conventions']['flops']}, fitted on {law['data']['points']} runs.", "",
         "```"] + caveats.headline(law) + ["```", ""]
  if law["warnings"] or law["notes"]:
    out += ["### Caveats", ""] + [f"- warning: {w}" for w in law["warnings"]]
    out += [f"- note: {n}" for n in law["notes"]] + [""]
  e3 = law["approaches"].get("3")
  p, ci = (law["law"], law.get("ci") or {}) if "E" in law["law"] else (e3, (e3 or {}).get("ci")
                                                                     or {})
  if p:
    state = ("" if "E" in law["law"] and not (e3 or {}).get("problems")
             else " (poorly determined: not the answer)")
    level = f"{ci['level']:.0%} bootstrap interval" if ci else "no bootstrap"
    out += [f"L(N, D) = E + A / N^alpha + B / D^beta{state}:", ""]
    out += _table(["", "value", level],
                  [[k, _g(p[k], ".4g"), _ci(ci.get(k), ".4g").strip() or "–"]
                   for k in ("E", "A", "B", "alpha", "beta")]) + [""]
  rows = []
  for name in ("1", "2", "3"):
    a = law.get("approaches", {}).get(name)
    if a and a.get("a") is not None:
      c = a.get("ci") or {}
      rows.append([f"Approach {name}" + (" (recommended)" if law["recommended"]["approach"]
                                          == name else ""),
                   f"{a['a']:.3f}{_ci(c.get('a'))}", f"{a['b']:.3f}{_ci(c.get('b'))}"])
  out += ["Compute-optimal exponents, N* ∝ C^a and D* ∝ C^b:", ""]
  out += _table(["approach", "a", "b"], rows)
  dc = law.get("data_constrained")
  if dc:
    said = dc.get("statements") or {k: f"{k[:3]}* = {fmt.num(dc[k])}" for k in ("R_D_star",
                                                                            "R_N_star")}
    out += ["", f"Data-constrained law (Muennighoff et al. 2023): {said['R_D_star']}, "
            f"{said['R_N_star']}; base law {dc.get('base_source', '')}."]
  return out


def optimal_section(law: dict) -> list[str]:
  scaling_law = law_lib.ScalingLaw.from_dict(law)
  fitted = law["data"].get("C")
  top = (fitted or [1e18, 1e18])[1]
  rows = []
  for k in BEYOND:
    C = top if k == 1 else float(f"{top * k:.2g}")  # the largest fitted C as it is, not rounded
    o = plan_lib.compute_optimal(scaling_law, C)
    band = o["interval"] or {}
    past = extrapolation.table_label(scaling_law, C, o["N"], o["D"])
    rows.append([_g(C, ".1e"), _g(o["N"]) + _ci(band.get("N"), ".3g"),
                 _g(o["D"]) + _ci(band.get("D"), ".3g"), _g(o["tokens_per_param"], ".1f"),
                 _g(o["loss"], ".4f"), past])
  return ["## Compute-optimal models at and past the sweep's largest budget", "",
          "From the fitted law; a row past the fitted budgets is an extrapolation. Further out: "
          "`chinchax plan --law=law.json --flops=C` (it warns past 3x).", ""
          ] + _table(["C (FLOPs)", "N*", "D*", "D*/N*", "loss", "fitted range"], rows)


def forecast_section(score: dict | None) -> list[str]:
  """The pre-registered forecast (sweep config `forecast`) against what the runs reached."""
  if not score:
    return []
  out = ["## Forecast", "", forecast_lib.score_line(score), ""]
  if score.get("status") == "scored":
    band = score.get("interval")
    out += _table(["", "C", "N", "D", "loss"], [
        ["forecast", _g(score["C"]), _g(score["N"]), _g(score["D"]),
         _g(score["forecast"], ".4f") + (_ci(band, ".4f") if band else "")],
        [f"actual ({score['run']})", "", _g(score["run_N"]), _g(score["run_D"]),
         _g(score["actual"], ".4f")]]) + [""]
  return out + [f"Forecast record: {score.get('forecast_path', '')}, law sha256 "
                f"{score['law_sha256'][:12]}....", ""]


def tasks_section(records: list[dict], workdir: str) -> list[str]:
  """The task laws of tasks.json (`chinchax fit-tasks`), or why there are none."""
  if not any(r.get("tasks") for r in records):
    return []
  out = ["## Task accuracy", ""]
  path = os.path.join(workdir, TASKS)
  if not atomic.exists(path):
    try:
      data, _ = tasks_table.load(workdir)
      for d in data.values():
        tasks_steps.check_design(d, 1)
      why = "run `chinchax fit-tasks WORKDIR` to see why"
    except UserError as e:
      why = str(e)
    return out + [f"The runs scored tasks, but no tasks.json: {why}", ""]
  doc = tasks_file.load(path)
  out += ["Each task in two steps (`chinchax fit-tasks`): step 1 the task's loss L(N, D) from "
          "each run's final evaluation, step 2 the accuracy from the loss over every "
          f"evaluation; {doc['settings']['ci']:.0%} bootstrap intervals over runs through "
          "both. `chinchax plan --tasks=tasks.json` predicts from them.", "", "```",
          tasks_text.summary(doc), "```", ""]
  for task in doc["tasks"]:
    stem = tasks_file.figure_name(task)
    if atomic.exists(os.path.join(workdir, "plots", f"{stem}.png")):
      out += [f"![{task}](plots/{stem}.png)", ""]
  return out


def render(records: list[dict], law: dict | None, workdir: str,
           fit_error: str | None = None) -> str:
  out = [f"# Sweep report: {os.path.basename(os.fspath(workdir).rstrip('/'))}", ""]
  out += runs_section(records) + [""] + minima_section(records, law) + [""]
  if fit_error:
    out += ["## Fit", "", f"The fit failed: {fit_error}", ""]
  elif law is None:
    out += ["## Fit", "", "No law.json yet: run `chinchax fit` on this workdir.", ""]
  else:
    out += law_section(law) + [""] + optimal_section(law) + [""]
  out += forecast_section(forecast_score.read_score(workdir))
  out += tasks_section(records, workdir)
  plots = [s for s in PLOTS if atomic.exists(os.path.join(workdir, "plots", f"{s}.png"))]
  if plots:
    out += ["## Plots", ""] + [f"![{s}](plots/{s}.png)" for s in plots] + [""]
  return "\n".join(out)


def write_report(workdir: str, fit_error: str | None = None) -> str:
  workdir = os.fspath(workdir)
  records = _read_records(workdir)
  law_path = os.path.join(workdir, "law.json")
  law_text = None if fit_error else atomic.read_text(law_path)
  law = None
  if law_text is not None:
    try:
      law = law_schema.read(law_pack.unpack(json.loads(law_text)))
    except (json.JSONDecodeError, UserError) as e:
      raise UserError(f"{law_path}: {e}") from None
  text = render(records, law, workdir, fit_error)
  path = os.path.join(workdir, "report.md")
  atomic.write_text(path, text)
  return path


def fit_workdir(workdir: str, bootstrap: int) -> str:
  """Fits the runs of the sweep in `workdir`; writes law.json and plots/, prints the law.

  Returns the path of law.json; UserError when the runs give no law.
  """
  out, plots = os.path.join(workdir, "law.json"), os.path.join(workdir, "plots")
  log = lambda m: print(m, file=sys.stderr, flush=True)
  fit_tasks_workdir(workdir, bootstrap, log)
  law, runs, written = api.fit_detailed(workdir, bootstrap=bootstrap, out=out, plots=plots,
                                        log=log)
  print(api.summary(law, len(runs), out))
  print("wrote " + ", ".join(written))
  return out


def fit_tasks_workdir(workdir: str, bootstrap: int, log) -> str | None:
  """WORKDIR/tasks.json and the task figures when the runs scored tasks, else None."""
  path = os.path.join(workdir, TASKS)
  if not any(r.get("tasks") for r in _read_records(workdir)):
    return None
  try:
    laws = tasks_fit.fit_tasks(workdir, out=path, plots=os.path.join(workdir, "plots"),
                               bootstrap=bootstrap)
  except UserError as e:
    log(f"chinchax sweep: warning: the task fit failed: {e}")
    if atomic.exists(path):  # a law of other runs would read as this sweep's
      atomic.remove(path)
    return None
  print(tasks_text.summary(laws.doc))
  print("wrote " + ", ".join(laws.written))
  return path
