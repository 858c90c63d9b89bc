"""The peak LR and batch of a plan's N*, D* from a fitted hparams.json (`chinchax plan
--hparams`), each with its bootstrap interval and a note when the plan lies beyond the
points the law was fitted over. No jax here."""

from chinchax.scaling.hparams import law as hparams_law
from chinchax.scaling.numerics import fmt


def at(doc: dict, N: float, D: float, ci: float | None = None) -> dict:
  """{"lr": {...}, "batch": {...} or None, "ci": level} for a model of N parameters, D tokens."""
  level = doc["settings"].get("ci", 0.9) if ci is None else ci
  values = {"N": N, "D": D, "C": 6.0 * N * D}
  out = {"ci": level, "conventions": doc["conventions"]}
  for which in ("lr", "batch"):
    law = doc[which]
    if law is None:
      out[which] = None
      continue
    value, interval = hparams_law.predict(law, values, level)
    beyond = {v: round(max(lo / values[v], values[v] / hi), 3)
              for v, (lo, hi) in law["range"].items() if not lo <= values[v] <= hi}
    out[which] = {"value": value, "ci": interval, "form": law["form"], "beyond": beyond}
  return out


def text(hp: dict, seq_len: int | None = None) -> str:
  lines = []
  for which, name in (("lr", "peak LR"), ("batch", "batch (tokens)")):
    h = hp[which]
    if h is None:
      continue
    ci = (f"  [{fmt.num(h['ci'][0])}, {fmt.num(h['ci'][1])}] ({hp['ci']:.0%})" if h["ci"] else "")
    seqs = (f"  = {h['value'] / seq_len:.1f} sequences of {seq_len}"
            if which == "batch" and seq_len else "")
    line = f"{name:<15} {fmt.num(h['value'])}{ci}{seqs}   {h['form']}"
    if h["beyond"]:
      line += "  (extrapolated: " + ", ".join(
          f"{v} {fmt.num(x)}x beyond the fitted range" for v, x in h["beyond"].items()) + ")"
    lines.append(line)
  return "\n".join(lines)
