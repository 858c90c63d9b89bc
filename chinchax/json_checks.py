"""Checks of JSON values that raise a UserError naming the field (`where`) and the value, and
the one loader of chinchax's JSON artifacts (`load`)."""

import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from chinchax import atomic
from chinchax.errors import UserError

T = TypeVar("T")


def shown(x) -> str:
  text = repr(x) if isinstance(x, float) else json.dumps(x)
  return text if len(text) <= 60 else text[:57] + "..."


def is_number(x) -> bool:
  """A finite JSON number (a bool is not one; an integer beyond any float is not finite)."""
  if not isinstance(x, (int, float)) or isinstance(x, bool):
    return False
  try:
    return math.isfinite(x)
  except OverflowError:  # an integer beyond any float: JSON allows it, no law needs it
    return False


def number(x, where: str, kind: str = "finite", nullable: bool = False):
  """kind: 'finite', 'positive', 'nonnegative' or 'unit' (strictly inside (0, 1))."""
  if x is None and nullable:
    return
  tests = {"finite": lambda v: True, "positive": lambda v: v > 0,
           "nonnegative": lambda v: v >= 0, "unit": lambda v: 0 < v < 1}
  if not (is_number(x) and tests[kind](x)):
    words = {"finite": "a finite number", "positive": "a positive finite number",
             "nonnegative": "a non-negative finite number",
             "unit": "a number strictly between 0 and 1"}[kind]
    raise UserError(f"{where}: expected {words}{' or null' if nullable else ''}, "
                    f"got {shown(x)}")


def integer(x, where: str, minimum: int = 0, nullable: bool = False):
  if x is None and nullable:
    return
  if not (isinstance(x, int) and not isinstance(x, bool) and x >= minimum):
    raise UserError(f"{where}: expected an integer >= {minimum}"
                    f"{' or null' if nullable else ''}, got {shown(x)}")


def obj(x, where: str, keys: Sequence[str] = ()) -> dict:
  if not isinstance(x, dict):
    raise UserError(f"{where}: expected an object, got {shown(x)}")
  missing = [k for k in keys if k not in x]
  if missing:
    raise UserError(f"{where}: missing key{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}")
  return x


def interval(x, where: str, kind: str = "finite", nullable: bool = False):
  if x is None and nullable:
    return
  if not (isinstance(x, list) and len(x) == 2):
    raise UserError(f"{where}: expected an interval [lo, hi], got {shown(x)}")
  number(x[0], f"{where}[0]", kind)
  number(x[1], f"{where}[1]", kind)
  if x[0] > x[1]:
    raise UserError(f"{where}: lower end {x[0]!r} is above upper end {x[1]!r}")


def string(x, where: str):
  if not (isinstance(x, str) and x):
    raise UserError(f"{where}: expected a non-empty string, got {shown(x)}")


def strings(x, where: str):
  if not (isinstance(x, list) and all(isinstance(s, str) for s in x)):
    raise UserError(f"{where}: expected a list of strings, got {shown(x)}")


def load(path, what: str, made_by: str, check: Callable[[Any], T]) -> T:
  """The JSON document at `path` (local or gs://) passed through `check`, the one reader of
  chinchax's JSON artifacts (law.json, hparams.json, forecast.json). Anything wrong is one
  UserError line naming the file: unreadable or missing, not JSON, or what `check` refused.
  `what` names the artifact ("law", "hparams"), `made_by` the command that writes one."""
  path = os.fspath(path)
  try:
    text = atomic.read_text(path)
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"cannot read {what} file {path}: {getattr(e, 'strerror', None) or e}"
                    ) from None
  if text is None:
    raise UserError(f"cannot read {what} file {path}: No such file or directory; one is "
                    f"written by `{made_by}`")
  expected = f"expected a {what} file written by `{made_by}`"
  try:
    doc = json.loads(text)
  except json.JSONDecodeError as e:
    raise UserError(f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
                    f"{expected}") from None
  except RecursionError:
    raise UserError(f"{path}: JSON nested too deep; {expected}") from None
  except ValueError as e:  # e.g. an integer of more digits than Python will convert
    raise UserError(f"{path} is not valid JSON ({e}); {expected}") from None
  try:
    return check(doc)
  except UserError as e:
    raise UserError(f"{path}: {e}") from None
