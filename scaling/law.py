"""law.json (schema `chinchax/law/v1`) and the `ScalingLaw` object every planner reads.

A law is L(N, D) = E + A/N^alpha + B/D^beta in nats/token, N and C under the conventions the
file records. The file holds the point fit, percentile bootstrap intervals (`ci`), the derived
compute-optimal allocation (`optimal`, see scaling.optimum), whatever each of the three
approaches produced, fit settings, data ranges, provenance, and the bootstrap samples of
[E, A, B, alpha, beta] rounded to 7 significant digits so that an interval for N*(C), D*(C)
or the loss can be computed at *any* budget later (`bootstrap`, null without a bootstrap).

Validation (`validate_law`) happens on save and on load; its `UserError` names the field.
"""

import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from chinchax.scaling import atomic
from chinchax.scaling import optimum as opt
from chinchax.scaling import conventions
from chinchax.scaling.errors import UserError

__all__ = ["FORM", "SCHEMA", "ScalingLaw", "build_law", "load_law", "save_law", "validate_law"]

SCHEMA = "chinchax/law/v1"
FORM = "E + A/N^alpha + B/D^beta"

# Budgets at which `optimal.tokens_per_param` is tabulated (tokens/param drifts with C when
# a != b, so one number would mislead).
TABLE_BUDGETS: tuple[float, ...] = (1e18, 1e20, 1e22, 1e24)


def _round7(x: float) -> float:
  return float(f"{x:.7g}")


def _version() -> str:
  try:
    return importlib.metadata.version("chinchax")
  except importlib.metadata.PackageNotFoundError:
    return "unknown"


def _range(x) -> list[float] | None:
  if x is None:
    return None
  x = np.asarray(x, np.float64).ravel()
  return [float(x.min()), float(x.max())] if x.size else None


def _plain(x: Any) -> Any:
  """JSON-ready copy of free-form results: numpy → Python, non-finite floats → None."""
  if isinstance(x, Mapping):
    return {str(k): _plain(v) for k, v in x.items()}
  if isinstance(x, (list, tuple, np.ndarray)):
    return [_plain(v) for v in x]
  if isinstance(x, np.generic):
    x = x.item()
  if isinstance(x, float) and not math.isfinite(x):
    return None
  return x


def _quantiles(values_S: np.ndarray, level: float) -> list[float]:
  lo, hi = np.quantile(values_S, [(1 - level) / 2, (1 + level) / 2])
  return [float(lo), float(hi)]


# ------------------------------------------------------------------ validation

_TOP_KEYS = ("schema", "law", "ci", "optimal", "approaches", "conventions", "fit", "data",
             "bootstrap", "provenance")
_APPROACHES = ("1", "2", "3")


def _shown(x) -> str:
  text = repr(x) if isinstance(x, float) else json.dumps(x)
  return text if len(text) <= 60 else text[:57] + "..."


def _is_number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _number(x, where: str, kind: str = "finite", nullable: bool = False):
  """kind: 'finite', 'positive', 'nonnegative' or 'unit' (strictly inside (0, 1))."""
  if x is None and nullable:
    return
  tests = {"finite": lambda v: True, "positive": lambda v: v > 0,
           "nonnegative": lambda v: v >= 0, "unit": lambda v: 0 < v < 1}
  if not (_is_number(x) and tests[kind](x)):
    words = {"finite": "a finite number", "positive": "a positive finite number",
             "nonnegative": "a non-negative finite number",
             "unit": "a number strictly between 0 and 1"}[kind]
    raise UserError(f"{where}: expected {words}{' or null' if nullable else ''}, "
                    f"got {_shown(x)}")


def _integer(x, where: str, minimum: int = 0, nullable: bool = False):
  if x is None and nullable:
    return
  if not (isinstance(x, int) and not isinstance(x, bool) and x >= minimum):
    raise UserError(f"{where}: expected an integer >= {minimum}"
                    f"{' or null' if nullable else ''}, got {_shown(x)}")


def _object(x, where: str, keys: Sequence[str] = ()) -> dict:
  if not isinstance(x, dict):
    raise UserError(f"{where}: expected an object, got {_shown(x)}")
  missing = [k for k in keys if k not in x]
  if missing:
    raise UserError(f"{where}: missing key{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}")
  return x


def _interval(x, where: str, kind: str = "finite", nullable: bool = False):
  if x is None and nullable:
    return
  if not (isinstance(x, list) and len(x) == 2):
    raise UserError(f"{where}: expected an interval [lo, hi], got {_shown(x)}")
  _number(x[0], f"{where}[0]", kind)
  _number(x[1], f"{where}[1]", kind)
  if x[0] > x[1]:
    raise UserError(f"{where}: lower end {x[0]!r} is above upper end {x[1]!r}")


def _string(x, where: str):
  if not (isinstance(x, str) and x):
    raise UserError(f"{where}: expected a non-empty string, got {_shown(x)}")


def _consistent(value: float, expected: float, where: str, how: str):
  if not math.isclose(value, expected, rel_tol=1e-6):
    raise UserError(f"{where}: {value!r} does not match {how} = {expected!r} from `law`; "
                    "was the file edited by hand? Re-run `chinchax fit`")


def validate_law(obj: Any) -> dict[str, Any]:
  """Return `obj` unchanged if it is a valid law.json dict; raise UserError naming the field."""
  if not isinstance(obj, dict):
    raise UserError(f"expected a law.json object, got {_shown(obj)}")
  missing = [k for k in _TOP_KEYS if k not in obj]
  if missing:
    raise UserError(f"missing top-level key{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; expected a law.json written by `chinchax fit`")
  if obj["schema"] != SCHEMA:
    raise UserError(f"schema: expected {SCHEMA!r}, got {_shown(obj['schema'])}")

  law = _object(obj["law"], "law", ("form",) + opt.PARAM_NAMES)
  if law["form"] != FORM:
    raise UserError(f"law.form: expected {FORM!r}, got {_shown(law['form'])}")
  _number(law["E"], "law.E", "nonnegative")
  for name in opt.PARAM_NAMES[1:]:
    _number(law[name], f"law.{name}", "positive")
  theta = np.array([law[k] for k in opt.PARAM_NAMES], np.float64)

  if obj["ci"] is not None:
    ci = _object(obj["ci"], "ci", ("level",) + opt.PARAM_NAMES + ("a", "b"))
    _number(ci["level"], "ci.level", "unit")
    for name in opt.PARAM_NAMES + ("a", "b"):
      _interval(ci[name], f"ci.{name}")

  best = _object(obj["optimal"], "optimal", ("a", "b", "G", "tokens_per_param"))
  for name in ("a", "b"):
    _number(best[name], f"optimal.{name}", "unit")
  _number(best["G"], "optimal.G", "positive")
  a, b = opt.exponents(theta)
  _consistent(best["a"], float(a), "optimal.a", "beta/(alpha+beta)")
  _consistent(best["b"], float(b), "optimal.b", "alpha/(alpha+beta)")
  _consistent(best["G"], float(opt.G(theta)), "optimal.G", "(alpha·A/(beta·B))^(1/(alpha+beta))")
  if not isinstance(best["tokens_per_param"], list):
    raise UserError(f"optimal.tokens_per_param: expected a list, "
                    f"got {_shown(best['tokens_per_param'])}")
  for i, row in enumerate(best["tokens_per_param"]):
    where = f"optimal.tokens_per_param[{i}]"
    _object(row, where, ("C", "tokens_per_param"))
    _number(row["C"], f"{where}.C", "positive")
    _number(row["tokens_per_param"], f"{where}.tokens_per_param", "positive")

  approaches = _object(obj["approaches"], "approaches")
  for key, value in approaches.items():
    if key not in _APPROACHES:
      raise UserError(f"approaches.{key}: unknown approach; expected keys among "
                      f"{', '.join(_APPROACHES)}")
    _object(value, f"approaches.{key}")

  conv = _object(obj["conventions"], "conventions", ("params", "flops", "loss"))
  if conv["params"] not in conventions.PARAMS_CONVENTIONS:
    raise UserError(f"conventions.params: expected one of "
                    f"{', '.join(conventions.PARAMS_CONVENTIONS)}, got {_shown(conv['params'])}")
  if conv["flops"] not in conventions.FLOPS_CONVENTIONS:
    raise UserError(f"conventions.flops: expected one of "
                    f"{', '.join(conventions.FLOPS_CONVENTIONS)}, got {_shown(conv['flops'])}")
  _string(conv["loss"], "conventions.loss")

  fit = _object(obj["fit"], "fit", ("delta", "starts", "objective", "starts_at_best", "points"))
  _number(fit["delta"], "fit.delta", "positive", nullable=True)
  _integer(fit["starts"], "fit.starts", 1, nullable=True)
  _number(fit["objective"], "fit.objective", "nonnegative", nullable=True)
  _integer(fit["starts_at_best"], "fit.starts_at_best", 0, nullable=True)
  if fit["starts"] is not None and (fit["starts_at_best"] or 0) > fit["starts"]:
    raise UserError(f"fit.starts_at_best: {fit['starts_at_best']} is more than "
                    f"fit.starts = {fit['starts']}")
  _integer(fit["points"], "fit.points", 0, nullable=True)

  data = _object(obj["data"], "data", ("points", "N", "D", "C"))
  _integer(data["points"], "data.points", 0, nullable=True)
  for name in ("N", "D", "C"):
    _interval(data[name], f"data.{name}", "positive", nullable=True)

  if obj["bootstrap"] is not None:
    boot = _object(obj["bootstrap"], "bootstrap", ("n", "samples"))
    _integer(boot["n"], "bootstrap.n", 0)
    samples = boot["samples"]
    if not isinstance(samples, list) or len(samples) != boot["n"]:
      got = f"{len(samples)} rows" if isinstance(samples, list) else _shown(samples)
      raise UserError(f"bootstrap.samples: expected a list of bootstrap.n = {boot['n']} "
                      f"rows, got {got}")
    for i, row in enumerate(samples):
      where = f"bootstrap.samples[{i}]"
      if not (isinstance(row, list) and len(row) == 5):
        raise UserError(f"{where}: expected 5 values [E, A, B, alpha, beta], got {_shown(row)}")
      _number(row[0], f"{where}[0] (E)", "finite")
      for j, name in enumerate(opt.PARAM_NAMES[1:], start=1):
        _number(row[j], f"{where}[{j}] ({name})", "positive")

  prov = _object(obj["provenance"], "provenance", ("chinchax", "created", "inputs"))
  _string(prov["chinchax"], "provenance.chinchax")
  _string(prov["created"], "provenance.created")
  if not (isinstance(prov["inputs"], list) and all(isinstance(p, str) for p in prov["inputs"])):
    raise UserError(f"provenance.inputs: expected a list of paths, got {_shown(prov['inputs'])}")
  return obj


def build_law(
    *,
    E: float,
    A: float,
    B: float,
    alpha: float,
    beta: float,
    delta: float | None = None,
    n_starts: int | None = None,
    objective: float | None = None,
    n_at_best: int | None = None,
    n_points: int | None = None,
    fit_warnings: Sequence[str] = (),
    samples=None,
    seed: int | None = None,
    ci_level: float = 0.95,
    approaches: Mapping[str, Mapping[str, Any]] | None = None,
    params_convention: str = "total",
    flops_convention: str = "6ND",
    loss_unit: str = "nats/token",
    N=None,
    D=None,
    C=None,
    inputs: Sequence[str] = (),
    budgets: Sequence[float] = TABLE_BUDGETS,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
  """The law.json dict for an Approach-3 fit (validated).

  samples: bootstrap draws of [E, A, B, alpha, beta], shape (n, 5), or None. Rows that are no
    law (a non-finite value from a failed refit, or A, B, alpha or beta not positive: a
    resample whose points show no decrease in N or D) are dropped and counted in
    `bootstrap.dropped`; many dropped rows mean the data pin the law down poorly.
  N, D, C: the fitted points (C defaults to 6·N·D); only their count and ranges are stored.
  approaches: {"1": {...}, "2": {...}, "3": {...}}, free-form, any subset.
  extra: more top-level keys (e.g. a preset's `reference`).
  """
  theta = np.array([E, A, B, alpha, beta], np.float64)
  a, b = (float(v) for v in opt.exponents(theta))

  bootstrap, ci = None, None
  if samples is not None:
    samples_Sx5 = np.asarray(samples, np.float64)
    if samples_Sx5.ndim != 2 or samples_Sx5.shape[1] != 5:
      raise ValueError(f"samples must have shape (n, 5), got {samples_Sx5.shape}")
    keep = np.all(np.isfinite(samples_Sx5), axis=1) & np.all(samples_Sx5[:, 1:] > 0, axis=1)
    samples_Sx5 = samples_Sx5[keep]
    if len(samples_Sx5):
      samples_Sx5 = np.vectorize(_round7)(samples_Sx5)
      a_S, b_S = opt.exponents(samples_Sx5)
      ci = {"level": float(ci_level)}
      for i, name in enumerate(opt.PARAM_NAMES):
        ci[name] = _quantiles(samples_Sx5[:, i], ci_level)
      ci["a"], ci["b"] = _quantiles(a_S, ci_level), _quantiles(b_S, ci_level)
    bootstrap = {
        "n": int(len(samples_Sx5)),
        "dropped": int((~keep).sum()),
        "seed": _plain(seed),
        "samples": samples_Sx5.tolist(),
    }

  if N is not None and D is not None and C is None:
    C = 6.0 * np.asarray(N, np.float64) * np.asarray(D, np.float64)
  points = None
  for x in (N, D, C):
    if x is not None:
      points = int(np.asarray(x).size)

  table = []
  for c in budgets:
    n_opt, d_opt = opt.optimum(c, theta)
    table.append({
        "C": float(c),
        "N": float(n_opt),
        "D": float(d_opt),
        "tokens_per_param": float(d_opt / n_opt),
        "loss": float(opt.optimal_loss(c, theta)),
    })

  law = {
      "schema": SCHEMA,
      "law": {"form": FORM, "E": float(E), "A": float(A), "B": float(B),
              "alpha": float(alpha), "beta": float(beta)},
      "ci": ci,
      "optimal": {"a": a, "b": b, "G": float(opt.G(theta)), "tokens_per_param": table},
      "approaches": _plain(approaches or {}),
      "conventions": {"params": params_convention, "flops": flops_convention,
                      "loss": loss_unit},
      "fit": {"delta": _plain(delta), "starts": _plain(n_starts),
              "objective": _plain(objective), "starts_at_best": _plain(n_at_best),
              "points": _plain(n_points) if n_points is not None else points,
              "warnings": [str(w) for w in fit_warnings]},
      "data": {"points": points, "N": _range(N), "D": _range(D), "C": _range(C)},
      "bootstrap": bootstrap,
      "provenance": {
          "chinchax": _version(),
          "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
              timespec="seconds"),
          "inputs": [os.fspath(p) for p in inputs],
      },
  }
  law.update(_plain(extra or {}))
  return validate_law(law)


def save_law(path: str | os.PathLike, law: Mapping[str, Any]) -> None:
  """Validate, then write atomically: a refused law never reaches the disk."""
  atomic.write_json(path, validate_law(dict(law)))


def load_law(path: str | os.PathLike) -> dict[str, Any]:
  path = os.fspath(path)
  try:
    text = atomic.read_text(path)
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"cannot read law file {path}: {getattr(e, 'strerror', None) or e}") from None
  if text is None:
    raise UserError(f"cannot read law file {path}: No such file or directory")
  try:
    obj = json.loads(text)
  except json.JSONDecodeError as e:
    raise UserError(f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: "
                    f"{e.msg}); expected a law.json written by `chinchax fit`") from None
  try:
    return validate_law(obj)
  except UserError as e:
    raise UserError(f"{path}: {e}") from None


# Quantities with a bootstrap band at a budget C: f(C, theta) -> shape (*S, *K).
_QUANTITIES = {
    "N": lambda C, theta: opt.optimum(C, theta)[0],
    "D": lambda C, theta: opt.optimum(C, theta)[1],
    "tokens_per_param": opt.tokens_per_param,
    "loss": opt.optimal_loss,
}


@dataclasses.dataclass(frozen=True, eq=False)
class ScalingLaw:
  """A validated law.json, with the numerics a planner needs.

  `samples` is the (n, 5) bootstrap array or None; `fitted_range` is the (min, max) budget
  the law was fitted on (a preset: the paper's range), or None when unknown.
  """

  E: float
  A: float
  B: float
  alpha: float
  beta: float
  samples: np.ndarray | None
  ci_level: float
  fitted_range: tuple[float, float] | None
  source: str
  doc: Mapping[str, Any]

  @classmethod
  def from_dict(cls, obj: Mapping[str, Any], source: str = "") -> "ScalingLaw":
    doc = validate_law(json.loads(json.dumps(obj)))  # a private deep copy
    p = doc["law"]
    boot = doc["bootstrap"]
    samples = None
    if boot is not None and boot["samples"]:
      samples = np.asarray(boot["samples"], np.float64).reshape(-1, 5)
      samples.setflags(write=False)
    c_range = doc["data"]["C"]
    return cls(
        E=p["E"], A=p["A"], B=p["B"], alpha=p["alpha"], beta=p["beta"],
        samples=samples,
        ci_level=doc["ci"]["level"] if doc["ci"] else 0.95,
        fitted_range=tuple(c_range) if c_range else None,
        source=source,
        doc=doc,
    )

  @classmethod
  def load(cls, path: str | os.PathLike) -> "ScalingLaw":
    return cls.from_dict(load_law(path), source=os.fspath(path))

  def to_dict(self) -> dict[str, Any]:
    return json.loads(json.dumps(self.doc))

  def save(self, path: str | os.PathLike) -> None:
    save_law(path, self.to_dict())

  # ------------------------------------------------------------------ point estimates

  @property
  def theta(self) -> np.ndarray:
    return np.array([self.E, self.A, self.B, self.alpha, self.beta], np.float64)

  @property
  def conventions(self) -> Mapping[str, str]:
    return self.doc["conventions"]

  @property
  def a(self) -> float:
    return float(opt.exponents(self.theta)[0])

  @property
  def b(self) -> float:
    return float(opt.exponents(self.theta)[1])

  @property
  def G(self) -> float:
    return float(opt.G(self.theta))

  def predict(self, N, D) -> np.ndarray | float:
    out = opt.loss(N, D, self.theta)
    return float(out) if out.ndim == 0 else out

  def optimum(self, C):
    """(N*(C), D*(C)): floats for a scalar C, arrays otherwise."""
    N, D = opt.optimum(C, self.theta)
    return (float(N), float(D)) if N.ndim == 0 else (N, D)

  def tokens_per_param(self, C):
    out = opt.tokens_per_param(C, self.theta)
    return float(out) if out.ndim == 0 else out

  def optimal_loss(self, C):
    out = opt.optimal_loss(C, self.theta)
    return float(out) if out.ndim == 0 else out

  # ------------------------------------------------------------------ intervals

  def interval(self, quantity: str, C, level: float | None = None):
    """Percentile bootstrap interval (lo, hi) of N*, D*, tokens_per_param or loss at C.

    None when the law has no bootstrap samples.
    """
    if quantity not in _QUANTITIES:
      raise ValueError(f"unknown quantity {quantity!r}; one of {list(_QUANTITIES)}")
    if self.samples is None:
      return None
    values_SxK = _QUANTITIES[quantity](C, self.samples)
    return self._band(values_SxK, level)

  def predict_interval(self, N, D, level: float | None = None):
    """Bootstrap interval (lo, hi) of L(N, D); None without samples."""
    if self.samples is None:
      return None
    return self._band(opt.loss(N, D, self.samples), level)

  def _band(self, values_SxK: np.ndarray, level: float | None):
    level = self.ci_level if level is None else level
    lo, hi = np.quantile(values_SxK, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)
