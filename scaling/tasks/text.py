"""What `chinchax fit-tasks` prints (each task's two laws, intervals, warnings) and the table
`chinchax plan --tasks` prints."""

from chinchax.scaling.numerics import fmt


def _band(ci, name) -> str:
  return f" {fmt.interval(ci[name])}" if ci and ci.get(name) else ""


def summary(doc: dict) -> str:
  lines = []
  unit = doc["conventions"]["loss"]
  for task, e in doc["tasks"].items():
    s1, s2 = e["step1"], e["step2"]
    last = ("each run's final evaluation" if s1["last"] == 1 else
            f"the mean of each run's last {s1['last']} evaluations")
    lines.append(f"{task}: {s1['runs']} runs, {s2['evaluations']} evaluations; loss in {unit}")
    lines.append(f"  step 1  L = {fmt.num(s1['E'], 4)} + {fmt.num(s1['A'], 4)}/N^"
                 f"{s1['alpha']:.3f} + {fmt.num(s1['B'], 4)}/D^{s1['beta']:.3f}  ({last})")
    if s1["ci"]:
      lines.append("          " + ", ".join(f"{n}{_band(s1['ci'], n)}"
                                            for n in ("E", "alpha", "beta")))
    held = "floor held at the task's chance" if s2["floor_fixed"] else "floor fitted"
    lines.append(f"  step 2  acc = {s2['floor']:.3g} + ({s2['ceiling']:.3g} - {s2['floor']:.3g})"
                 f"·sigmoid(-{s2['k']:.3g}·(L - {s2['L0']:.4g}))  ({held}; every evaluation)")
    names = ("ceiling", "k", "L0") if s2["floor_fixed"] else ("floor", "ceiling", "k", "L0")
    bands = ", ".join(f"{n}{_band(s2['ci'], n)}" for n in names) if s2["ci"] else ""
    lines.append(f"          {bands + '; ' if bands else ''}losses seen "
                 f"{s2['loss_range'][0]:.4g}-{s2['loss_range'][1]:.4g}, rms residual "
                 f"{s2['rms_residual']:.3g}")
    lines += [f"  warning: {w}" for w in e["warnings"]]
  return "\n".join(lines)


def _interval(pair) -> str:
  return f" [{pair[0]:.4g}, {pair[1]:.4g}]" if pair else ""


def plan_table(predictions: dict, level: float, N: float, D: float) -> str:
  """One line per task: loss and accuracy with intervals, and why a prediction is flagged."""
  lines = [f"tasks at N = {fmt.num(N, 3)}, D = {fmt.num(D, 3)} ({level:.0%} intervals):"]
  width = max(len(t) for t in predictions)
  for task, p in predictions.items():
    line = (f"  {task:<{width}}  loss {p['loss']:.4g}{_interval(p['loss_interval'])}"
            f"  accuracy {p['accuracy']:.3f}{_interval(p['accuracy_interval'])}")
    why = []
    if p["extrapolated"]:
      lo, hi = p["loss_range"]
      side = f"below {lo:.4g}, the lowest" if p["loss"] < lo else f"above {hi:.4g}, the highest"
      why.append(f"extrapolated: the loss is {side} step 2 saw")
    if p["beyond"]:
      why.append(", ".join(f"{k} {x:g}x" for k, x in p["beyond"].items()) +
                 " beyond the runs")
    lines.append(line + (f"  ({'; '.join(why)})" if why else ""))
  return "\n".join(lines)
