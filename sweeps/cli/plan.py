"""`chinchax plan`: N, D, loss and intervals for a budget, from a law.json or a preset.

    chinchax plan (--law=law.json | --preset=NAME) [--flops=C] [--params=N] [--tokens=D]
                  [--unique-tokens=U] [--inference-tokens=T] [--json]

Numbers take float syntax (1e21) or a k/M/B/T suffix (70B, 1.4T). The maths is in
scaling.plan; this module parses flags and prints a table, or one JSON object with --json.
"""

import argparse
import json
import math
import sys
from typing import Any

from chinchax.scaling import plan as plan_lib
from chinchax.scaling import presets
from chinchax.scaling.errors import UserError
from chinchax.scaling.law import ScalingLaw

_SUFFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _number(text: str) -> float:
  scale = _SUFFIXES.get(text[-1:], 1.0)
  body = text[:-1] if text[-1:] in _SUFFIXES else text
  try:
    x = float(body) * scale
  except ValueError:
    raise argparse.ArgumentTypeError(f"not a number: {text!r} (use e.g. 1e21 or 70B)") from None
  if not (math.isfinite(x) and x > 0):
    raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
  return x


class _Parser(argparse.ArgumentParser):
  """argparse that reports a bad flag as one UserError line instead of usage + exit."""

  def error(self, message: str):
    raise UserError(f"{message} (see chinchax plan --help)")


def _parser() -> argparse.ArgumentParser:
  p = _Parser(prog="chinchax plan", description=__doc__.split("\n\n")[0])
  p.add_argument("--law", help="law.json written by `chinchax fit`")
  p.add_argument("--preset", help=f"a published law: {', '.join(presets.names())}")
  p.add_argument("--flops", type=_number, metavar="C", help="training FLOPs (C = 6ND)")
  p.add_argument("--params", type=_number, metavar="N", help="model parameters")
  p.add_argument("--tokens", type=_number, metavar="D", help="training tokens")
  p.add_argument("--unique-tokens", type=_number, metavar="U",
                 help="unique tokens available (data-constrained plan)")
  p.add_argument("--inference-tokens", type=_number, metavar="T",
                 help="tokens the model will serve (inference-aware plan)")
  p.add_argument("--json", action="store_true", help="print one JSON object")
  return p


def _load(args) -> ScalingLaw:
  if args.law and args.preset:
    raise UserError("give either --law or --preset, not both")
  if args.preset:
    return presets.preset(args.preset)
  if args.law:
    return ScalingLaw.load(args.law)
  raise UserError(f"no law: give --law=law.json or --preset=NAME "
                  f"({', '.join(presets.names())})")


# ---------------------------------------------------------------------------- table


_BUDGET_FROM = {
    "flops": "--flops",
    "params": "the budget at which --params is compute-optimal",
    "tokens": "the budget at which --tokens is compute-optimal",
    "params,tokens": "6·N·D of --params and --tokens",
    "flops,params": "--flops; D = C/6N",
    "flops,tokens": "--flops; N = C/6D",
}


def _si(x: float | None) -> str:
  if x is None:
    return "-"
  for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
    if abs(x) >= scale:
      return f"{x:.3g} ({x / scale:.3g}{unit})"
  return f"{x:.4g}"


def _g(x: float | None) -> str:
  return "-" if x is None else f"{x:.4g}"


def _row(label: str, *cells: str) -> str:
  return f"  {label:<26}" + "".join(f"{c:<26}" for c in cells).rstrip()


def _band(interval, key: str, fmt=_g) -> str:
  if interval is None or interval.get(key) is None:
    return ""
  lo, hi = interval[key]
  return f"[{fmt(lo)}, {fmt(hi)}]"


def render(result: dict[str, Any]) -> str:
  law, budget, best = result["law"], result["budget"], result["optimum"]
  conv = law["conventions"]
  lines = [
      f"law: {law['source']}   L = {law['E']:.4g} + {law['A']:.4g}/N^{law['alpha']:.4g} "
      f"+ {law['B']:.4g}/D^{law['beta']:.4g}",
      f"     N* ∝ C^{law['a']:.3f}, D* ∝ C^{law['b']:.3f}; N {conv['params']}, "
      f"C {conv['flops']}, loss in {conv['loss']}",
      f"budget: C = {budget['C']:.4g} FLOPs ({_BUDGET_FROM[budget['source']]})",
      "",
  ]
  interval = best["interval"]
  head = f"{interval['level']:.0%} interval" if interval else ""
  lines += [_row("compute-optimal", "value", head),
            _row("parameters N*", _si(best["N"]), _band(interval, "N")),
            _row("tokens D*", _si(best["D"]), _band(interval, "D")),
            _row("tokens per parameter", f"{best['tokens_per_param']:.3g}",
                 _band(interval, "tokens_per_param")),
            _row("loss", f"{best['loss']:.4f}", _band(interval, "loss", lambda x: f"{x:.4f}"))]

  given = result["given"]
  if given:
    eff = given["compute_efficiency"]
    lines += ["", _row("your (N, D)", "value"),
              _row("parameters N", _si(given["N"])),
              _row("tokens D", _si(given["D"])),
              _row("tokens per parameter", f"{given['tokens_per_param']:.3g}"),
              _row("loss", f"{given['loss']:.4f}"),
              _row("loss above optimum", f"{given['loss_gap']:.4g}"),
              _row("N / N*", f"{given['N_over_N_opt']:.3g}"),
              _row("optimal model's C for it", _g(given["compute_equivalent"]),
                   "" if eff is None else f"({eff:.1%} compute efficiency)")]

  dc = result["data_constrained"]
  if dc:
    chin, opt = dc["chinchilla"], dc["optimal"]
    lines += ["", f"data-constrained (Muennighoff et al. 2023; {_si(dc['unique_tokens'])} "
              f"unique tokens, R_D*={dc['R_D_star']:.3g}, R_N*={dc['R_N_star']:.3g})",
              _row("", "Chinchilla-optimal", "data-constrained optimal")]
    rows = [("parameters N", "N", _si), ("tokens D", "D", _si), ("epochs", "epochs", _g),
            ("loss (with repetition)", "loss", lambda x: f"{x:.4f}")]
    lines += [_row(label, f(chin[k]), f(opt[k])) for label, k, f in rows]
    if dc["given"]:
      lines.append(_row("your (N, D)", f"{dc['given']['epochs']:.3g} epochs",
                        f"loss {dc['given']['loss']:.4f}"))

  inf = result["inference"]
  if inf:
    chin, aware = inf["chinchilla"], inf["inference_optimal"]
    lines += ["", f"inference-aware (Sardana & Frankle 2023; {_si(inf['inference_tokens'])} "
              f"inference tokens, same loss {inf['loss']:.4f})",
              _row("", "Chinchilla-optimal", "inference-optimal")]
    rows = [("parameters N", "N", _si), ("tokens D", "D", _si),
            ("tokens per parameter", "tokens_per_param", lambda x: f"{x:.3g}"),
            ("training FLOPs", "train_flops", _g), ("inference FLOPs", "inference_flops", _g),
            ("total FLOPs", "total_flops", _g)]
    lines += [_row(label, f(chin[k]), f(aware[k])) for label, k, f in rows]
    lines.append(_row("saving", f"{inf['saving_flops']:.4g} FLOPs",
                      f"({inf['saving_fraction']:.1%} of the total)"))

  ext = result["extrapolation"]
  if ext:
    lo, hi = ext["fitted_C"]
    lines += ["", f"fitted budgets: {lo:.3g}–{hi:.3g} FLOPs; this budget is "
              f"{ext['beyond_largest']:.3g}× the largest"]
  lines += [f"warning: {w}" for w in result["warnings"]]
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  try:
    args = _parser().parse_args(argv)
  except SystemExit as e:  # --help
    return int(e.code or 0)
  law = _load(args)
  result = plan_lib.plan(law, C=args.flops, N=args.params, D=args.tokens,
                         U=args.unique_tokens, T=args.inference_tokens)
  if args.json:
    print(json.dumps(result, indent=2, allow_nan=False))
  else:
    print(render(result))
  sys.stdout.flush()
  return 0
