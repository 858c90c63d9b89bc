"""What `chinchax fit-hparams` prints: each point's optimum, then the LR and batch laws."""


def _g(x) -> str:
  return "-" if x is None else f"{x:.3g}"


def _range(pair) -> str:
  return "-" if not pair else f"{pair[0]:.3g}-{pair[1]:.3g}"


def points_table(doc: dict) -> str:
  tol = doc["settings"]["tol"]
  head = (f"{'N':>9} {'D':>9} {'runs':>4} {'div':>3} {'loss*':>7} {'LR*':>9} "
          f"{f'LR within {tol:.0%}':>17} {'B* tokens':>9} {f'B within {tol:.0%}':>15}  flags")
  lines = [head]
  for p in doc["points"]:
    flags = [f"lr {f}" for f in p["lr"]["flags"]] + [
        f"batch {f}" for f in p["batch"]["flags"] if f != "single"]
    loss = f"{p['loss_opt']:.4f}" if p["loss_opt"] is not None else "-"
    lines.append(f"{p['N']:>9.3g} {p['D']:>9.3g} {p['runs']:>4} {p['diverged']:>3} {loss:>7} "
                 f"{_g(p['lr']['opt']):>9} {_range(p['lr']['within_tol']):>17} "
                 f"{_g(p['batch']['opt']):>9} {_range(p['batch']['within_tol']):>15}  "
                 f"{', '.join(flags) or 'interior'}")
  return "\n".join(lines)


def law_line(law: dict, level: float) -> str:
  ci = law["ci"]
  parts = [f"c = {law['coef']:.4g}" + (f" [{ci['coef'][0]:.3g}, {ci['coef'][1]:.3g}]"
                                       if "coef" in ci else "")]
  for v in law["vars"]:
    e = law["exponents"][v]
    parts.append(f"{v}^{e:+.3f}" + (f" [{ci[v][0]:+.3f}, {ci[v][1]:+.3f}]" if v in ci else ""))
  span = ", ".join(f"{v} {r[0]:.3g}-{r[1]:.3g}" for v, r in law["range"].items())
  return (f"{law['form']}: " + ", ".join(parts) + f"  ({level:.0%} intervals, "
          f"{law['points_used']} points, fitted over {span})")


def summary(doc: dict) -> str:
  level = doc["settings"]["ci"]
  out = [points_table(doc), "", "LR law:    " + law_line(doc["lr"], level)]
  if doc["batch"] is not None:
    out.append("batch law: " + law_line(doc["batch"], level))
  out += [f"warning: {w}" for w in doc["warnings"]]
  return "\n".join(out)
