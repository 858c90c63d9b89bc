"""Numbers as a person reads them: `1.2e12`, `0.452`, `[0.43, 0.47]`, `17x`.

One place for the console, law.json's warning texts, the plan and report.md, so that a
figure reads the same everywhere. Large and small numbers get an exponent without `+` or
leading zeros (`1.2e12`, not `1.2e+12`); counts of parameters and tokens may carry an SI
suffix up to T (`70B`, `1.4T`) and never a stacked one (`3.2e+03T`).
"""

import math

_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def num(x: float | None, digits: int = 3) -> str:
  """`digits` significant digits; an exponent outside [1e-3, 1e4)."""
  if x is None:
    return "-"
  x = float(x)
  if not math.isfinite(x):
    return str(x)
  if x == 0:
    return "0"
  rounded = float(f"{x:.{digits}g}")  # the range is the rounded number's: 9999 → 1e4
  if 1e-3 <= abs(rounded) < 1e4:
    # 1000 → "1000", not "1e+03"
    return str(int(rounded)) if rounded.is_integer() else f"{rounded:.{digits + 3}f}".rstrip("0")
  mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
  if "." in mantissa:
    mantissa = mantissa.rstrip("0").rstrip(".")
  return f"{mantissa}e{int(exponent)}"


def exact(x: float) -> str:
  """Every digit the float needs to be read back the same (Python's shortest round-trip), in
  `num`'s form: a config value shown where two values must not read alike (0.0012345678,
  1e12, 3.5e-5), and typed back as an override."""
  x = float(x)
  if not math.isfinite(x) or x == 0:
    return num(x)
  if 1e-3 <= abs(x) < 1e4:  # repr writes these without an exponent
    return repr(x).removesuffix(".0")
  digits = len(repr(abs(x)).split("e")[0].replace(".", "").strip("0"))
  return num(x, max(1, digits))


def count(x: float | None) -> str:
  """A count of parameters, tokens or FLOPs: `1.4e12 (1.4T)`, `6.3e5 (630k)`, `5e22`."""
  if x is None:
    return "-"
  for scale, unit in _SUFFIXES:
    if scale <= abs(x) < 1e3 * scale:
      return f"{num(x)} ({x / scale:.3g}{unit})"
  return num(x)


def interval(pair, digits: int = 3) -> str:
  """`[lo, hi]`; empty for None."""
  if pair is None:
    return ""
  return f"[{num(pair[0], digits)}, {num(pair[1], digits)}]"


def factor(x: float | None) -> str:
  """How many times: `17x`, `2.5x`, `1x`."""
  if x is None:
    return "-"
  return f"{num(x, 2 if x < 10 else 3)}x"


def clock(seconds: float) -> str:
  """A duration as a clock reads it: `4:05`, `1:02:03` from an hour."""
  s = int(seconds)
  return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def percent(level: float) -> str:
  """A confidence level: 0.9 → `90%`, 0.995 → `99.5%`."""
  return f"{100 * level:.4g}%"


def loss_law(law, exponent: str = ".3f") -> str:
  """The right-hand side of L(N, D) from a dict with E, A, B, alpha, beta (and gamma, the
  nesting form's outer power): "E + A/N^alpha + B/D^beta" or "E + (...)^gamma", in numbers."""
  inner = (f"{num(law['A'], 4)}/N^{law['alpha']:{exponent}} + "
           f"{num(law['B'], 4)}/D^{law['beta']:{exponent}}")
  if law.get("gamma") is not None:
    inner = f"({inner})^{law['gamma']:{exponent}}"
  return f"{num(law['E'], 4)} + {inner}"
