"""A plan (scaling.plan.planner) as the table `chinchax plan` prints; numbers by scaling.numerics.fmt."""

from typing import Any

from chinchax.scaling.numerics import fmt

_BUDGET_FROM = {
    "flops": "--flops",
    "params": "the budget at which --params is compute-optimal",
    "tokens": "the budget at which --tokens is compute-optimal",
    "params,tokens": "6·N·D of --params and --tokens",
    "flops,params": "--flops; D = C/6N",
    "flops,tokens": "--flops; N = C/6D",
}


def _row(label: str, *cells: str) -> str:
  return f"  {label:<26}" + "".join(f"{c:<30}" for c in cells).rstrip()


def _loss(x) -> str:
  return "-" if x is None else f"{x:.4f}"


def _band(interval, key: str, digits: int = 3) -> str:
  if interval is None or interval.get(key) is None:
    return ""
  if key == "loss":
    lo, hi = interval[key]
    return f"[{lo:.4f}, {hi:.4f}]"
  return fmt.interval(interval[key], digits)


def _law_lines(law: dict[str, Any]) -> list[str]:
  conv = law["conventions"]
  if law["form"].startswith("E + "):
    what = f"L = {fmt.loss_law(law, '.4g')}"
  else:
    what = f"allocation law of Approach {law['approach']} (predicts no loss)"
  return [f"law: {law['source'] or law.get('reference') or '-'}   {what}",
          f"     N* ∝ C^{law['a']:.3f}, D* ∝ C^{law['b']:.3f}; N {conv['params']}, "
          f"C {conv['flops']}, loss in {conv['loss']}"]


def render(result: dict[str, Any]) -> str:
  law, budget, best = result["law"], result["budget"], result["optimum"]
  lines = _law_lines(law) + [
      f"budget: C = {fmt.num(budget['C'])} FLOPs ({_BUDGET_FROM[budget['source']]})", ""]
  interval = best["interval"]
  head = f"{fmt.percent(interval['level'])} interval" if interval else ""
  lines += [_row("compute-optimal", "value", head),
            _row("parameters N*", fmt.count(best["N"]), _band(interval, "N")),
            _row("tokens D*", fmt.count(best["D"]), _band(interval, "D")),
            _row("tokens per parameter", fmt.num(best["tokens_per_param"]),
                 _band(interval, "tokens_per_param")),
            _row("loss", _loss(best["loss"]), _band(interval, "loss"))]

  given = result["given"]
  if given:
    eff = given["compute_efficiency"]
    band = given["loss_interval"]
    lines += ["", _row("your (N, D)", "value", head if band else ""),
              _row("parameters N", fmt.count(given["N"])),
              _row("tokens D", fmt.count(given["D"])),
              _row("tokens per parameter", fmt.num(given["tokens_per_param"])),
              _row("N / N*", fmt.num(given["N_over_N_opt"]))]
    if given["loss"] is not None:
      lines += [_row("loss", _loss(given["loss"]), _band({"loss": band}, "loss") if band else ""),
                _row("loss above optimum", fmt.num(given["loss_gap"])),
                _row("optimal model's C for it", fmt.num(given["compute_equivalent"]),
                     "" if eff is None else f"({eff:.1%} compute efficiency)")]

  dc = result["data_constrained"]
  if dc:
    chin, best_dc = dc["chinchilla"], dc["optimal"]
    where = "fitted to runs" if dc["source"] == "fitted" else "the published values"
    ci = dc.get("ci")
    said = dc.get("statements") or {}
    r_d, r_n = (said.get(name) or f"{k}={fmt.num(dc[f'{name}'])}"
                + (f" {fmt.interval(ci[name])}" if ci and ci[name] else "")
                for k, name in (("R_D*", "R_D_star"), ("R_N*", "R_N_star")))
    lines += ["", f"data-constrained (Muennighoff et al. 2023; {fmt.count(dc['unique_tokens'])} "
              f"unique tokens; {r_d}, {r_n}, {where})",
              _row("", "Chinchilla-optimal", "data-constrained optimal")]
    rows = [("parameters N", "N", fmt.count), ("tokens D", "D", fmt.count),
            ("epochs", "epochs", fmt.num), ("loss (with repetition)", "loss", _loss)]
    lines += [_row(label, f(chin[k]), f(best_dc[k])) for label, k, f in rows]
    if dc["given"]:
      lines.append(_row("your (N, D)", f"{fmt.num(dc['given']['epochs'])} epochs",
                        f"loss {dc['given']['loss']:.4f}"))

  inf = result["inference"]
  if inf:
    chin, aware = inf["chinchilla"], inf["inference_optimal"]
    lines += ["", f"inference-aware (Sardana & Frankle 2023; {fmt.count(inf['inference_tokens'])} "
              f"inference tokens, same loss {inf['loss']:.4f})",
              _row("", "Chinchilla-optimal", "inference-optimal")]
    rows = [("parameters N", "N", fmt.count), ("tokens D", "D", fmt.count),
            ("tokens per parameter", "tokens_per_param", fmt.num),
            ("training FLOPs", "train_flops", fmt.num),
            ("inference FLOPs", "inference_flops", fmt.num),
            ("total FLOPs", "total_flops", fmt.num)]
    lines += [_row(label, f(chin[k]), f(aware[k])) for label, k, f in rows]
    lines.append(_row("saving", f"{fmt.num(inf['saving_flops'])} FLOPs",
                      f"({inf['saving_fraction']:.1%} of the total)"))

  ext = result["extrapolation"]
  if ext:
    fitted, factors = ext["fitted"], ext["factors"]
    parts = [f"{k} {fmt.interval(fitted[k])} ("
             + ("inside" if factors[k] <= 1 else f"{fmt.factor(factors[k])} outside") + ")"
             for k in ("N", "D", "C") if fitted[k]]
    lines += ["", "fitted ranges: " + "; ".join(parts)]
  lines += [f"note: {n}" for n in result["notes"]]
  lines += [f"warning: {w}" for w in result["warnings"]]
  if law["warnings"]:
    lines.append(f"the law's own caveats (law.json, recommended: Approach "
                 f"{law['recommended']['approach']}):")
    lines += [f"  - {w}" for w in law["warnings"]]
  return "\n".join(lines)
