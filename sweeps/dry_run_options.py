"""`chinchax sweep --dry-run`'s own flags, `--compile[=TARGET]`, `--json` and
`--headroom=F` (sweeps/dry_run.py says what they do), split from the rest of argv before the
config's flags are read.

Apart from the dry run itself, which imports jax: the sweep's command reads its flags, and
answers `--help` or refuses a bad flag, before it imports what trains or compiles.
"""

import dataclasses

from chinchax.errors import UserError

HEADROOM = 0.10  # the share of HBM a cell leaves free, by default


@dataclasses.dataclass(frozen=True)
class Options:
  compile: str | None = None   # "" = the config's target
  json: bool = False
  headroom: float = HEADROOM


def split(argv: list[str]) -> tuple[list[str], Options]:
  rest, kw = [], {}
  for arg in argv:
    name, eq, value = arg.partition("=")
    if name == "--compile":
      kw["compile"] = value
    elif arg == "--json":
      kw["json"] = True
    elif name == "--headroom":
      try:
        kw["headroom"] = float(value)
      except ValueError:
        kw["headroom"] = -1.0
      if not 0 <= kw["headroom"] < 1:
        raise UserError(f"--headroom={value!r}: give the fraction of HBM to keep free, "
                        "from 0 to below 1 (default 0.1)")
    else:
      rest.append(arg)
  return rest, Options(**kw)
