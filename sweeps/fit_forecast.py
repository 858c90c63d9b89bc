"""What the fit will have, said by the dry run before any training: per budget, the sizes
left after the grid's refusals and whether they bracket the prior's N*.

Approach 2 (scaling.isoflop.fit) uses a budget only with MIN_SIZES distinct sizes and a minimum
strictly inside them, and needs two such budgets. Both can be foreseen from the grid: a
budget left with two sizes once the size floor refused the others is dropped after its runs
were trained for nothing, and one whose sizes all lie on one side of the prior's N* is
likely to have its minimum at an edge. (The unique-token and HBM refusals come later, when
the data is opened or the cells compiled.)
"""

from collections.abc import Sequence

from chinchax.scaling.numerics import fmt
from chinchax.scaling.isoflop.fit import MIN_SIZES
from chinchax.sweeps import grid as prior_lib
from chinchax.sweeps.grid import Cell


def forecast(cells: Sequence[Cell], budgets: Sequence[float], prior: str | None
             ) -> tuple[list[str], list[str]]:
  """(one line per budget, the warnings) for the IsoFLOP cells of a grid."""
  N_star = prior_lib.prior_optimum(prior) if prior else None
  lines, warnings, usable = [], [], 0
  for C in sorted(float(b) for b in budgets):
    sizes = sorted({c.N for c in cells if c.isoflop and abs(c.budget / C - 1) < 1e-9})
    n = len(sizes)
    text = f"  C={fmt.num(C)}: {n} size{'s' if n != 1 else ''}"
    if sizes:
      text += f", N {fmt.num(sizes[0])}..{fmt.num(sizes[-1])}"
    inside = None
    if N_star is not None:
      x = float(N_star(C))
      inside = bool(sizes) and sizes[0] < x < sizes[-1]
      text += f"; prior N* {fmt.num(x)} {'inside' if inside else 'OUTSIDE'}"
    if n < MIN_SIZES:
      text += "  <- left out of Approach 2"
      warnings.append(
          f"budget C={fmt.num(C)} has {n} size{'s' if n != 1 else ''} after the refusals "
          f"and Approach 2 needs {MIN_SIZES}: the fit will leave it out; add sizes "
          "(n_per_budget), lower min_steps, or drop the budget")
    else:
      usable += 1
      if inside is False:
        side = "below" if x <= sizes[0] else "above"
        warnings.append(
            f"budget C={fmt.num(C)}: the prior's N* {fmt.num(x)} lies {side} its sizes "
            f"{fmt.num(sizes[0])}..{fmt.num(sizes[-1])}: its minimum may fall at an edge and "
            "Approach 2 leave it out; widen span or add sizes")
    lines.append(text)
  if budgets and usable < 2:
    warnings.append(f"only {usable} budget{'s' if usable != 1 else ''} can enter Approach "
                    "2, which needs two: the fit will have no Approach 2")
  return lines, warnings
