"""`chinchax law`: a law.json from published coefficients, for `chinchax plan --law=`.

    chinchax law --E=1.87 --A=521 --B=1488 --alpha=0.353 --beta=0.353 --out=law.json
                 [--reference=TEXT] [--params-convention=total|non_embedding]
                 [--flops-convention=6ND|chinchilla] [--loss-unit=nats/token]
                 [--fitted-N=LO,HI] [--fitted-D=LO,HI] [--fitted-C=LO,HI]

L(N, D) = E + A/N^alpha + B/D^beta as a paper gives it (the example is Muennighoff et al.
2023's base law). The file is law.json's own schema, marked as not fitted here
(provenance.fitted = false, with the reference); it has no intervals. Give the paper's fitted
ranges (--fitted-C, ...) so that a plan can say how far it extrapolates. The library
function is `chinchax.law_from_coefficients` (scaling/law/coefficients.py).
"""

import argparse

from chinchax import atomic
from chinchax.scaling.law import artifact as law_artifact
from chinchax.scaling.law import coefficients
from chinchax.scaling.law import text as law_text
from chinchax.scaling.runs.conventions import FLOPS_CONVENTIONS, PARAMS_CONVENTIONS
from chinchax.cli import plan as plan_cli
from chinchax.cli import argtypes


def _pair(text: str) -> tuple[float, float]:
  parts = text.split(",")
  if len(parts) != 2:
    raise argparse.ArgumentTypeError(f"give LO,HI (e.g. 1e18,1e22), got {text!r}")
  return tuple(plan_cli._number(p.strip()) for p in parts)  # pylint: disable=protected-access


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax law", allow_abbrev=False,
              description=__doc__.split("\n\n")[0],
              epilog="example: chinchax law --E=1.87 --A=521 --B=1488 --alpha=0.353 "
                     "--beta=0.353 --reference='Muennighoff et al. 2023' --out=law.json")
  for name, what in (("E", "irreducible loss"), ("A", "parameter term's coefficient"),
                     ("B", "data term's coefficient"), ("alpha", "parameter term's exponent"),
                     ("beta", "data term's exponent")):
    p.add_argument(f"--{name}", type=float, required=True, help=what)
  p.add_argument("--out", required=True, help="where to write law.json (no default, so that "
                 "no law.json is replaced by accident; one named is replaced, and the output "
                 "says so)")
  p.add_argument("--reference", default="", help="where the numbers come from")
  p.add_argument("--params-convention", default="total", choices=PARAMS_CONVENTIONS,
                 help="how the paper counts N (default: total)")
  p.add_argument("--flops-convention", default="6ND", choices=FLOPS_CONVENTIONS,
                 help="how the paper counts C (default: 6ND)")
  p.add_argument("--loss-unit", default="nats/token", help="(default: nats/token)")
  for name in ("N", "D", "C"):
    p.add_argument(f"--fitted-{name}", type=_pair, metavar="LO,HI",
                   help=f"the paper's fitted range of {name} (default: unknown)")
  return p


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)  # --help exits through the dispatcher (cli/__init__.py)
  atomic.check_backend(args.out, "--out")
  replaced = law_artifact.replaced(args.out)
  law = coefficients.law_from_coefficients(
      args.E, args.A, args.B, args.alpha, args.beta, reference=args.reference,
      params_convention=args.params_convention, flops_convention=args.flops_convention,
      loss_unit=args.loss_unit, N=args.fitted_N, D=args.fitted_D, C=args.fitted_C,
      out=args.out)
  print(law_text.short(law))
  print(f"wrote {args.out}" + (f" (replacing {replaced})" if replaced else "")
        + f": plan with it by chinchax plan --law={args.out} --flops=C")
  return 0
