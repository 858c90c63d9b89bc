"""A law from published coefficients: E, A, B, alpha, beta read in a paper (Muennighoff et
al.'s, Sardana et al.'s, a colleague's) made into a law.json that `chinchax plan` reads.

The file is law.json's own schema, with the marks of a law not fitted here:
`provenance.fitted` is false and `provenance.reference` says where the numbers came from;
there are no bootstrap draws (so no intervals) and no approaches' results. The fitted ranges
of N, D and C are the paper's when given (the planner measures extrapolation from them),
else unknown (null), and the plan then says it cannot tell how far it extrapolates.
"""

import json
import math
from collections.abc import Sequence

from chinchax.errors import UserError
from chinchax.scaling.law import artifact as law_lib
from chinchax.scaling.runs.conventions import FLOPS_CONVENTIONS, PARAMS_CONVENTIONS


def _check(name: str, value, allow_zero: bool = False) -> float:
  try:
    x = float(value)
  except (TypeError, ValueError, OverflowError):
    raise UserError(f"{name} is not a number: {str(value)[:40]!r}") from None
  ok = math.isfinite(x) and (x >= 0 if allow_zero else x > 0)
  if not ok:
    raise UserError(f"{name} must be a {'nonnegative' if allow_zero else 'positive'} finite "
                    f"number, got {value!r}")
  return x


def _range(name: str, pair) -> list[float] | None:
  if pair is None:
    return None
  if len(pair) != 2:
    raise UserError(f"fitted {name} range: give two numbers LO,HI, got {pair!r}")
  lo, hi = (_check(f"fitted {name} range", v) for v in pair)
  if lo > hi:
    raise UserError(f"fitted {name} range: LO {lo:g} is above HI {hi:g}")
  return [lo, hi]


def law_dict(*, E: float, A: float, B: float, alpha: float, beta: float,
             reference: str = "", params_convention: str = "total",
             flops_convention: str = "6ND", loss_unit: str = "nats/token",
             N: Sequence[float] | None = None, D: Sequence[float] | None = None,
             C: Sequence[float] | None = None) -> dict:
  """The law.json dict (validated) of L = E + A/N^alpha + B/D^beta as given."""
  values = {"E": _check("E", E, allow_zero=True), "A": _check("A", A), "B": _check("B", B),
            "alpha": _check("alpha", alpha), "beta": _check("beta", beta)}
  if params_convention not in PARAMS_CONVENTIONS:
    raise UserError(f"params convention: one of {', '.join(PARAMS_CONVENTIONS)}, got "
                    f"{params_convention!r}")
  if flops_convention not in FLOPS_CONVENTIONS:
    raise UserError(f"flops convention: one of {', '.join(FLOPS_CONVENTIONS)}, got "
                    f"{flops_convention!r}")
  ranges = {"N": _range("N", N), "D": _range("D", D), "C": _range("C", C)}
  where = reference or "coefficients given by hand"
  notes = [f"not fitted here: made from published coefficients ({where}); no bootstrap "
           "draws, so no intervals"]
  if ranges["C"] is None:
    notes.append("the fitted range of C is unknown (give it: --fitted-C=LO,HI), so a plan "
                 "cannot say how far it extrapolates")
  law = law_lib.build_law(
      **values, N=ranges["N"], D=ranges["D"], C=ranges["C"],
      params_convention=params_convention, flops_convention=flops_convention,
      loss_unit=loss_unit,
      recommended={"approach": "3", "why": f"a law given by its coefficients ({where})"},
      notes=notes, extra={"reference": reference or None})
  law["data"]["points"] = None  # the ranges are the paper's, not points held here
  law["fit"]["points"] = None
  law["provenance"]["fitted"] = False
  law["provenance"]["reference"] = where
  return law_lib.validate_law(law)


def load(path) -> law_lib.ScalingLaw:
  """A law.json, or a JSON object of the five coefficients alone ({"E": 1.87, "A": 521,
  "B": 1488, "alpha": 0.353, "beta": 0.353}, optionally "reference"): what a user writes
  from a paper."""
  from chinchax import atomic  # pylint: disable=g-import-not-at-top
  try:
    obj = json.loads(atomic.read_text(path) or "null")
  except (ValueError, OSError, UnicodeDecodeError, RecursionError):
    obj = None  # load_law says what is wrong with it
  names = ("E", "A", "B", "alpha", "beta")
  if isinstance(obj, dict) and "schema" not in obj and set(obj) & set(names):
    missing = [k for k in names if k not in obj]
    extra = sorted(set(obj) - set(names) - {"reference"})
    if missing or extra:
      wrong = ([f"missing {', '.join(missing)}"] if missing else []) + (
          [f"unknown {', '.join(extra)}"] if extra else [])
      raise UserError(f"{path}: a law of coefficients holds E, A, B, alpha, beta (and "
                      f"optionally reference); {'; '.join(wrong)}")
    try:
      return law_from_coefficients(**{k: obj[k] for k in names},
                                   reference=str(obj.get("reference") or path))
    except UserError as e:
      raise UserError(f"{path}: {e}") from None
  return law_lib.ScalingLaw.load(path)


def law_from_coefficients(E: float, A: float, B: float, alpha: float, beta: float, *,
                          reference: str = "", params_convention: str = "total",
                          flops_convention: str = "6ND", loss_unit: str = "nats/token",
                          N=None, D=None, C=None, out: str | None = None
                          ) -> law_lib.ScalingLaw:
  """A ScalingLaw (what `chinchax plan` reads) from a paper's E, A, B, alpha, beta.

  reference: where the numbers come from (kept in law.json); params_convention and
  flops_convention: how that paper counted N and C ("total"/"non_embedding", "6ND"/
  "chinchilla"); N, D, C: the paper's fitted ranges (lo, hi), if known; out: also write
  law.json there.

      law = chinchax.law_from_coefficients(1.87, 521, 1488, 0.353, 0.353,
                                           reference="Muennighoff et al. 2023")
      chinchax.plan(law, flops=1e22)
  """
  from chinchax import atomic  # pylint: disable=g-import-not-at-top
  if out:
    atomic.check_writable(out, "out")
  doc = law_dict(E=E, A=A, B=B, alpha=alpha, beta=beta, reference=reference,
                 params_convention=params_convention, flops_convention=flops_convention,
                 loss_unit=loss_unit, N=N, D=D, C=C)
  law = law_lib.ScalingLaw.from_dict(doc, source=str(out or ""))
  if out:
    law.save(out)
  return law
