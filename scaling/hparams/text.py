"""What `chinchax fit-hparams` prints: each point's optimum, then the LR and batch laws."""

from chinchax.scaling.numerics import fmt


def _g(x) -> str:
  return "-" if x is None else fmt.num(x)


def _range(pair) -> str:
  return "-" if not pair else f"{fmt.num(pair[0])}-{fmt.num(pair[1])}"


def points_table(doc: dict) -> str:
  tol = doc["settings"]["tol"]
  head = (f"{'N':>9} {'D':>9} {'runs':>4} {'div':>3} {'loss*':>7} {'LR*':>9} "
          f"{f'LR within {tol:.0%}':>17} {'B* tokens':>9} {f'B within {tol:.0%}':>15}  flags")
  lines = [head]
  for p in doc["points"]:
    flags = [f"lr {f}" for f in p["lr"]["flags"]] + [
        f"batch {f}" for f in p["batch"]["flags"] if f != "single"]
    loss = f"{p['loss_opt']:.4f}" if p["loss_opt"] is not None else "-"
    lines.append(f"{fmt.num(p['N']):>9} {fmt.num(p['D']):>9} {p['runs']:>4} {p['diverged']:>3} "
                 f"{loss:>7} "
                 f"{_g(p['lr']['opt']):>9} {_range(p['lr']['within_tol']):>17} "
                 f"{_g(p['batch']['opt']):>9} {_range(p['batch']['within_tol']):>15}  "
                 f"{', '.join(flags) or 'interior'}")
  return "\n".join(lines)


def law_line(law: dict, level: float) -> str:
  ci = law["ci"]
  parts = [f"c = {fmt.num(law['coef'], 4)}" + (f" {fmt.interval(ci['coef'])}"
                                                if "coef" in ci else "")]
  for v in law["vars"]:
    e = law["exponents"][v]
    parts.append(f"{v}^{e:+.3f}" + (f" [{ci[v][0]:+.3f}, {ci[v][1]:+.3f}]" if v in ci else ""))
  span = ", ".join(f"{v} {fmt.num(r[0])}-{fmt.num(r[1])}" for v, r in law["range"].items())
  return (f"{law['form']}: " + ", ".join(parts) + f"  ({level:.0%} intervals, "
          f"{law['points_used']} points, fitted over {span})")


def summary(doc: dict) -> str:
  level = doc["settings"]["ci"]
  out = [points_table(doc), "", "LR law:    " + law_line(doc["lr"], level)]
  if doc["batch"] is not None:
    out.append("batch law: " + law_line(doc["batch"], level))
  out += [f"warning: {w}" for w in doc["warnings"]]
  return "\n".join(out)
