"""A recipe's LR and batch from a fitted hparams.json: `recipe.lr_rule = 'law:PATH'`,
`recipe.batch_rule = 'law:PATH'` (sweeps/recipe.py).

The law (`chinchax fit-hparams`) gives each cell's peak LR η*(N, D) (or of C = 6ND, or N) and
its batch B*(D) in tokens. A cell outside the points the law was fitted over is an
extrapolation: the dry run says so, cell by cell (`outside`). No jax here.
"""

import functools
import os

from chinchax.scaling import hparams_file, hparams_law

PREFIX = "law:"


def is_law(rule: str) -> bool:
  return isinstance(rule, str) and rule.startswith(PREFIX)


def path_of(rule: str) -> str:
  return rule[len(PREFIX):]


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> dict:
  del mtime  # part of the cache key only: a refitted file is read again
  return hparams_file.load(path)


def law(rule: str, which: str) -> dict:
  """The `which` ('lr' or 'batch') law of the rule's hparams.json (UserError if none)."""
  from chinchax.errors import UserError  # pylint: disable=g-import-not-at-top
  path = path_of(rule)
  try:
    mtime = os.path.getmtime(path)
  except OSError:
    mtime = 0.0  # not a local file: hparams_file.load says what is wrong
  doc = _load(path, mtime)
  if doc[which] is None:
    raise UserError(f"{path} holds no {which} law (its grid had one batch size per point); "
                    f"use another recipe.{which}_rule")
  return doc[which]


def values(N: float, D: float) -> dict:
  return {"N": N, "D": D, "C": 6.0 * N * D}


def value(rule: str, which: str, N: float, D: float) -> float:
  return hparams_law.predict(law(rule, which), values(N, D))[0]


def outside(rule: str, which: str, N: float, D: float) -> list[str]:
  """One phrase per variable of the law whose value lies outside the law's fitted range."""
  lw, v = law(rule, which), values(N, D)
  return [f"{k}={v[k]:.3g} outside the {which} law's fitted {lo:.3g}-{hi:.3g}"
          for k, (lo, hi) in lw["range"].items() if not lo <= v[k] <= hi]
