"""law.json on disk and the `ScalingLaw` object every planner reads.

The file's shape and its validation are scaling.law.schema; building the dict from fitted
numbers is scaling.law.build. A law is either Approach 3's L(N, D) = E + A/N^alpha +
B/D^beta, or its nesting form E + (A/N^alpha + B/D^beta)^gamma (either plans allocations
and predicts losses), or an allocation law N* = k_N·C^a, D* = k_D·C^b from Approach 1 or 2
(allocations only: asking it for a loss is a UserError that says so). Intervals are percentile bands of the stored bootstrap draws, at any budget
and any level.
"""

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from chinchax import atomic, json_checks
from chinchax.scaling.law import pack as law_pack
from chinchax.scaling.law import schema
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.numerics import intervals, power
from chinchax.errors import UserError
from chinchax.scaling.law.build import TABLE_BUDGETS, build_law, build_power_law  # noqa: F401
from chinchax.scaling.law.schema import FORM, SCHEMA, validate_law  # noqa: F401

__all__ = ["FORM", "SCHEMA", "ScalingLaw", "build_law", "build_power_law", "load_law",
           "replaced", "save_law", "validate_law"]


def save_law(path: str | os.PathLike, law: Mapping[str, Any]) -> None:
  """Validate, then write atomically: a refused law never reaches the disk."""
  atomic.write_json(path, law_pack.pack(validate_law(dict(law))))


def replaced(path: str) -> str | None:
  """What a save to `path` would replace, said for the command's "wrote" line: "the law.json
  made at TIME", "the file that was there", or None (nothing, or a folder, which the save
  refuses)."""
  if not atomic.exists(path) or atomic.isdir(path):
    return None
  try:
    created = json.loads(atomic.read_text(path) or "{}")["provenance"]["created"]
    return f"the law.json made at {created}"
  except (ValueError, KeyError, TypeError, OSError, RecursionError):
    return "the file that was there"


def load_law(path: str | os.PathLike) -> dict[str, Any]:
  """The dict of a law.json, in memory as schema v2 (a v3 file's draws unpacked, a v1 file
upgraded: see `schema`)."""
  return json_checks.load(path, "law", "chinchax fit",
                          lambda doc: schema.read(law_pack.unpack(doc)))


def _no_loss(law: "ScalingLaw") -> UserError:
  return UserError(
      f"this law comes from Approach {law.approach} (N* ∝ C^a, D* ∝ C^b): it plans N and D "
      "but predicts no loss; refit with Approach 3 (`chinchax fit --approach=3`) for losses")


@dataclasses.dataclass(frozen=True, eq=False)
class ScalingLaw:
  """A validated law.json with the numerics a planner needs.

  `values` are the law's numbers in law_schema.COLUMNS[form] order; `samples` the (n, 5) or
  (n, 4) bootstrap draws in the same order, or None.
  """

  form: str
  values: np.ndarray
  samples: np.ndarray | None
  ci_level: float
  source: str
  doc: Mapping[str, Any]

  @classmethod
  def from_dict(cls, obj: Mapping[str, Any], source: str = "", *,
                copy: bool = True) -> "ScalingLaw":
    """The law of a law.json dict, validated. `copy=False` hands `obj` over (a dict just read
    or built, which its caller no longer changes): not copied, as a private deep copy of
    4,000 draws costs ten milliseconds."""
    doc = schema.read(law_pack.unpack(json.loads(json.dumps(obj)) if copy else obj))
    form = doc["law"]["form"]
    values = np.array([doc["law"][k] for k in schema.COLUMNS[form]], np.float64)
    boot, samples = doc["bootstrap"], None
    if boot is not None and boot["samples"]:
      samples = np.asarray(boot["samples"], np.float64).reshape(len(boot["samples"]), -1)
      samples.setflags(write=False)
    values.setflags(write=False)
    return cls(form=form, values=values, samples=samples,
               ci_level=doc["ci"]["level"] if doc["ci"] else 0.9, source=source, doc=doc)

  @classmethod
  def load(cls, path: str | os.PathLike) -> "ScalingLaw":
    return cls.from_dict(load_law(path), source=os.fspath(path), copy=False)

  def __repr__(self) -> str:
    from chinchax.scaling.law import text as law_text  # pylint: disable=g-import-not-at-top
    return law_text.short(self)

  def _repr_markdown_(self) -> str:
    from chinchax.scaling.law import text as law_text  # pylint: disable=g-import-not-at-top
    return law_text.markdown(self)

  def to_dict(self) -> dict[str, Any]:
    return json.loads(json.dumps(self.doc))

  def save(self, path: str | os.PathLike) -> None:
    save_law(path, self.doc)  # which copies what it changes

  # ------------------------------------------------------------------ what it holds

  @property
  def predicts_loss(self) -> bool:
    return self.form in schema.LOSS_FORMS

  @property
  def approach(self) -> str:
    return self.doc["law"].get("approach", "3")

  @property
  def theta(self) -> np.ndarray:
    """[E, A, B, alpha, beta] (and gamma for the nesting form); a UserError for an
    allocation law."""
    if not self.predicts_loss:
      raise _no_loss(self)
    return self.values

  E = property(lambda self: float(self.theta[0]))
  A = property(lambda self: float(self.theta[1]))
  B = property(lambda self: float(self.theta[2]))
  alpha = property(lambda self: float(self.theta[3]))
  beta = property(lambda self: float(self.theta[4]))
  gamma = property(lambda self: float(opt.gamma(self.theta)))

  @property
  def P(self) -> np.ndarray:
    """[a, b, log_kN, log_kD] (scaling.numerics.power)."""
    return power.from_theta(self.values) if self.predicts_loss else self.values

  @property
  def a(self) -> float:
    return float(self.P[0])

  @property
  def b(self) -> float:
    return float(self.P[1])

  @property
  def G(self) -> float:
    return float(opt.G(self.theta))

  @property
  def conventions(self) -> Mapping[str, str]:
    return self.doc["conventions"]

  @property
  def warnings(self) -> list[str]:
    return list(self.doc["warnings"])

  @property
  def notes(self) -> list[str]:
    return list(self.doc["notes"])

  @property
  def recommended(self) -> Mapping[str, str]:
    return self.doc["recommended"]

  @property
  def approaches(self) -> Mapping[str, Mapping[str, Any]]:
    return self.doc["approaches"]

  @property
  def data_constrained(self) -> Mapping[str, Any] | None:
    return self.doc["data_constrained"]

  @property
  def ranges(self) -> dict[str, tuple[float, float] | None]:
    """The fitted ranges of N, D and C (a preset: the paper's), None where unknown."""
    return {k: tuple(v) if v else None for k, v in
            ((k, self.doc["data"][k]) for k in ("N", "D", "C"))}

  @property
  def fitted_range(self) -> tuple[float, float] | None:
    return self.ranges["C"]

  # ------------------------------------------------------------------ point estimates

  def predict(self, N, D) -> np.ndarray | float:
    out = opt.loss(N, D, self.theta)
    return float(out) if out.ndim == 0 else out

  def optimum(self, C):
    """(N*(C), D*(C)): floats for a scalar C, arrays otherwise."""
    N, D = power.optimum(C, self.P)
    return (float(N), float(D)) if N.ndim == 0 else (N, D)

  def tokens_per_param(self, C):
    N, D = self.optimum(C)
    return D / N

  def optimal_loss(self, C):
    out = opt.optimal_loss(C, self.theta)
    return float(out) if out.ndim == 0 else out

  def budget_for_params(self, N) -> float:
    return float(power.budget_for_params(N, self.P))

  def budget_for_tokens(self, D) -> float:
    return float(power.budget_for_tokens(D, self.P))

  # ------------------------------------------------------------------ intervals

  def _P_samples(self) -> np.ndarray:
    return power.from_theta(self.samples) if self.predicts_loss else self.samples

  def interval(self, quantity: str, C, level: float | None = None):
    """Percentile bootstrap interval (lo, hi) of N, D, tokens_per_param or loss at C.

    None when the law has no bootstrap samples.
    """
    if quantity not in ("N", "D", "tokens_per_param", "loss"):
      raise ValueError(f"unknown quantity {quantity!r}; one of N, D, tokens_per_param, loss")
    if quantity == "loss" and not self.predicts_loss:
      raise _no_loss(self)
    if self.samples is None:
      return None
    if quantity == "loss":
      return self._band(opt.optimal_loss(C, self.samples), level)
    N_SxK, D_SxK = power.optimum(C, self._P_samples())
    values = {"N": N_SxK, "D": D_SxK, "tokens_per_param": D_SxK / N_SxK}[quantity]
    return self._band(values, level)

  def predict_interval(self, N, D, level: float | None = None):
    """Bootstrap interval (lo, hi) of L(N, D); None without samples."""
    if not self.predicts_loss:
      raise _no_loss(self)
    if self.samples is None:
      return None
    return self._band(opt.loss(N, D, self.samples), level)

  def _band(self, values_SxK: np.ndarray, level: float | None):
    level = self.ci_level if level is None else level
    lo, hi = intervals.quantiles(values_SxK, intervals.check_level(level, "level"), axis=0)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)
