"""The dry run says, per budget, how many sizes the fit will have after the grid's refusals,
and warns when a budget cannot enter Approach 2 (before any run is trained)."""

import re

from chinchax.scaling.isoflop.fit import MIN_SIZES
from chinchax import cli
from chinchax.sweeps import spec as spec_lib
from chinchax.cli import flags


def _dry_run(capsys, *overrides):
  assert cli.run(["sweep", "--dry-run", "--config=tiny", *overrides]) == 0
  return capsys.readouterr().out


def _sizes_by_budget(*overrides):
  """Counted here from the resolved grid: the cells per nominal budget."""
  f = flags.parse_config_flags(["--config=tiny", *overrides], "chinchax sweep", "tiny", "wd")
  spec = spec_lib.resolve(f.config, "wd")
  out = {}
  for c in spec.cells:
    out.setdefault(c.budget, set()).add(c.N)
  return {C: len(v) for C, v in out.items()}, list(f.config.budgets)


def test_a_budget_the_size_floor_leaves_with_two_sizes_is_named(capsys):
  override = "--config.budgets=(1e11,3e11,1e12)"
  out = _dry_run(capsys, override)
  counts, budgets = _sizes_by_budget(override)
  short = [C for C in budgets if counts.get(C, 0) < MIN_SIZES]
  assert short == [1e11], counts  # the floor refuses one of the smallest budget's sizes
  for C in budgets:
    n = counts.get(C, 0)
    line = re.search(rf"^  C={C:.0e}".replace("e+", "e") + rf": {n} sizes?\b.*$", out, re.M)
    assert line, (C, out[-1500:])
    assert ("left out of Approach 2" in line.group(0)) == (n < MIN_SIZES)
  warnings = [l for l in out.splitlines() if l.startswith("warning: ")]
  assert len(warnings) == 1 and "budget C=1e11 has 2 sizes" in warnings[0]


def test_a_grid_every_budget_of_which_enters_approach_2_has_no_warning(capsys):
  out = _dry_run(capsys)
  assert "sizes per budget for the fit" in out and "warning:" not in out
  assert len(re.findall(r"^  C=.*: 3 sizes, .* inside$", out, re.M)) == 2
