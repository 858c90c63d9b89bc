"""hparams.json: the artifact of `chinchax fit-hparams`, as law.json is of `chinchax fit`.

    schema       "chinchax/hparams/v1"
    lr, batch    each: form, vars, coef, exponents {var: e}, ci {coef|var: [lo, hi]}, range
                 {var: [lo, hi]} (the fitted points' span), points_used, rms_log_residual,
                 bootstrap, draws (the replicates' [ln c, exponents...]), warnings; `batch` is
                 null when the grid has one batch size per point
    points       per (N, D): runs, diverged, loss_opt, lr and batch {opt, within_tol, flags}
    conventions  lr: the peak LR (after warmup) of `schedule` with `optimizer`; batch: tokens
                 per optimizer step; seq_len; N: total parameters; D: tokens; C: 6ND; loss
    settings     ci, bootstrap, seed, windows, explode, flat_rtol, tol
    provenance   chinchax version, created, inputs
    warnings     every warning of both laws and of the points

A file that is not this is refused with one line naming the field (`load`). No jax here.
"""

import json
import os
from typing import Any

from chinchax import atomic
from chinchax.errors import UserError
from chinchax import json_checks
from chinchax.scaling.numerics import intervals

SCHEMA = "chinchax/hparams/v1"
TOP_KEYS = ("schema", "lr", "batch", "points", "conventions", "settings", "provenance",
            "warnings")
LAW_KEYS = ("form", "vars", "coef", "exponents", "ci", "range", "draws", "warnings")
VARS = ("N", "D", "C")


def _fail(where: str, what: str):
  raise UserError(f"{where}: {what}; expected an hparams.json written by `chinchax fit-hparams`")


def _num(x, where: str, positive: bool = False) -> float:
  if not json_checks.is_number(x):
    _fail(where, f"not a finite number: {str(x)[:40]}")
  if positive and not x > 0:
    _fail(where, f"must be positive, got {x}")
  return float(x)


def _pair(x, where: str) -> None:
  if not (isinstance(x, list) and len(x) == 2):
    _fail(where, "not a [lo, hi] pair")
  _num(x[0], where)
  _num(x[1], where)


def _law(law, where: str) -> None:
  if not isinstance(law, dict):
    _fail(where, "not an object")
  missing = [k for k in LAW_KEYS if k not in law]
  if missing:
    _fail(where, f"missing {', '.join(missing)}")
  vs = law["vars"]
  if not (isinstance(vs, list) and vs and all(v in VARS for v in vs)):
    _fail(f"{where}.vars", f"not a list of {', '.join(VARS)}")
  _num(law["coef"], f"{where}.coef", positive=True)
  if not (isinstance(law["exponents"], dict) and set(law["exponents"]) == set(vs)):
    _fail(f"{where}.exponents", f"must name exactly {', '.join(vs)}")
  for v in vs:
    if abs(_num(law["exponents"][v], f"{where}.exponents.{v}")) > 10:
      _fail(f"{where}.exponents.{v}", f"{law['exponents'][v]} is beyond ±10, no scaling law")
    if not isinstance(law["range"], dict) or v not in law["range"]:
      _fail(f"{where}.range", f"lacks {v}")
    _pair(law["range"][v], f"{where}.range.{v}")
  if not isinstance(law["ci"], dict):
    _fail(f"{where}.ci", "not an object")
  for k, pair in law["ci"].items():
    _pair(pair, f"{where}.ci.{k}")
  draws = law["draws"]
  if not isinstance(draws, list) or any(
      not isinstance(d, list) or len(d) != 1 + len(vs) for d in draws):
    _fail(f"{where}.draws", f"not a list of [ln c, {', '.join(vs)}] rows")
  for d in draws:
    for x in d:
      _num(x, f"{where}.draws")


def validate(doc: Any) -> dict:
  if not isinstance(doc, dict):
    _fail("hparams.json", "not a JSON object")
  missing = [k for k in TOP_KEYS if k not in doc]
  if missing:
    _fail("hparams.json", f"missing top-level key{'s' if len(missing) > 1 else ''} "
          f"{', '.join(missing)}")
  if doc["schema"] != SCHEMA:
    _fail("schema", f"expected {SCHEMA!r}, got {str(doc['schema'])[:40]!r}")
  _law(doc["lr"], "lr")
  if doc["batch"] is not None:
    _law(doc["batch"], "batch")
  for k in ("points", "warnings"):
    if not isinstance(doc[k], list):
      _fail(k, "not a list")
  for k in ("conventions", "settings", "provenance"):
    if not isinstance(doc[k], dict):
      _fail(k, "not an object")
  if "ci" in doc["settings"]:
    try:
      intervals.check_level(doc["settings"]["ci"], "settings.ci")
    except UserError as e:  # the level's own words, then what the file should be
      raise UserError(f"{e}; expected an hparams.json written by `chinchax fit-hparams`"
                      ) from None
  return doc


def save(path: str | os.PathLike, doc: dict) -> None:
  atomic.write_text(os.fspath(path), json.dumps(validate(doc), indent=1) + "\n")


def load(path: str | os.PathLike) -> dict:
  """The validated dict of an hparams.json; a UserError of one line otherwise."""
  return json_checks.load(path, "hparams", "chinchax fit-hparams", validate)
