"""The prior optimum N*(C) a sweep grid centres its sizes on (`prior` of the sweep config).

    preset:NAME          a published law (`scaling.presets`)
    tokens_per_param:R   D = R·N, hence N* = sqrt(C / (6R))
    PATH                 the law.json of an earlier sweep: how a second, larger sweep is aimed
"""

import math
import os
from collections.abc import Callable

from chinchax.errors import UserError


def prior_optimum(spec: str) -> Callable[[float], float]:
  """N*(C) of a prior: 'preset:NAME', 'tokens_per_param:R' or a path to a law.json."""
  # Imported here: the fits' numerics (scipy) are only needed by a law-based prior.
  from chinchax.scaling import law as law_lib  # pylint: disable=g-import-not-at-top
  from chinchax.scaling import presets  # pylint: disable=g-import-not-at-top

  spec = str(spec).strip()
  if spec.startswith("preset:"):
    law = presets.preset(spec.removeprefix("preset:"))
  elif spec.startswith("tokens_per_param:"):
    text = spec.removeprefix("tokens_per_param:")
    try:
      R = float(text)
    except ValueError:
      R = float("nan")
    if not (R > 0 and math.isfinite(R)):
      raise UserError(f"prior {spec!r}: tokens_per_param must be a positive number, "
                      f"e.g. 'tokens_per_param:20'")
    return lambda C: math.sqrt(C / (6.0 * R))
  elif spec.endswith(".json") or os.path.exists(spec):
    law = law_lib.ScalingLaw.load(spec)
  else:
    raise UserError(f"unknown prior {spec!r}: use 'preset:NAME' (one of "
                    f"{', '.join(presets.names())}), 'tokens_per_param:R' or the path of a "
                    "law.json")
  if law.conventions["params"] != "total":
    raise UserError(f"prior {spec!r} counts {law.conventions['params']} parameters; the grid "
                    "sizes total parameters, so refit it with the total convention")
  return lambda C: law.optimum(C)[0]
