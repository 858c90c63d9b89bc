"""The shape of law.json (schema `chinchax/law/v3`; a v2 file reads as it is) and its
validation. On disk the bootstrap draws are packed (scaling.law.pack).

A law is one of three forms, named by `law.form`:

* `PARAMETRIC`, L(N, D) = E + A/N^alpha + B/D^beta (Approach 3): it plans allocations and
  predicts losses; bootstrap rows are [E, A, B, alpha, beta].
* `NESTED`, L(N, D) = E + (A/N^alpha + B/D^beta)^gamma, 0 < gamma <= 1 (Approach 3 on a
  ladder or checkpoint suite whose runs reject the law's form: scaling.parametric.form): the
  same allocations (gamma does not move the optimum), its own losses; rows end in gamma.
* `POWER`, N*(C) = k_N·C^a and D*(C) = k_D·C^b (Approach 1 or 2): it plans allocations only;
  bootstrap rows are [a, b, log_kN, log_kD].

Top-level keys: `schema`, `law`, `ci`, `optimal`, `approaches` (each approach's results and
its own `warnings`), `recommended` ({approach, why}: the approach the tool read the answer
from), `warnings` (every caveat of the fit, approaches' included), `notes` (what was skipped
and why), `data_constrained` (R_D*, R_N* of Muennighoff et al. 2023, or null),
`conventions`, `fit`, `data`, `bootstrap`, `provenance`, and optionally `backtest` (each
approach refitted without the largest budgets, scored on them: scaling.judgement.backtest).

A `chinchax/law/v1` file (always parametric, no recommendation) is read by `upgrade_v1`,
which fills the new keys. `validate_law` raises a UserError naming the field.
"""

import copy
import math
from typing import Any

import numpy as np

from chinchax.scaling.judgement import backtest_doc
from chinchax.scaling.runs import conventions
from chinchax.scaling.numerics import fmt
from chinchax.scaling.numerics import optimum as opt
from chinchax.scaling.numerics import power
from chinchax.errors import UserError
from chinchax.json_checks import integer, interval, number, obj, shown, string, strings

SCHEMA = "chinchax/law/v3"  # v2 with the draws packed on disk (law_pack) and the flagged table
SCHEMA_V2 = "chinchax/law/v2"  # the same document in memory: read as it is
SCHEMA_V1 = "chinchax/law/v1"
PARAMETRIC = "E + A/N^alpha + B/D^beta"
NESTED = "E + (A/N^alpha + B/D^beta)^gamma"
LOSS_FORMS = (PARAMETRIC, NESTED)  # the forms that predict losses
POWER = "N* = k_N·C^a, D* = k_D·C^b"
FORM = PARAMETRIC  # the v1 name
POWER_NAMES: tuple[str, ...] = ("a", "b", "log_kN", "log_kD")
COLUMNS = {PARAMETRIC: opt.PARAM_NAMES, NESTED: opt.NESTED_NAMES, POWER: POWER_NAMES}
APPROACHES = ("1", "2", "3")

_TOP_KEYS = ("schema", "law", "ci", "optimal", "approaches", "recommended", "warnings", "notes",
             "data_constrained", "conventions", "fit", "data", "bootstrap", "provenance")
_V1_KEYS = ("schema", "law", "ci", "optimal", "approaches", "conventions", "fit", "data",
            "bootstrap", "provenance")


def _consistent(value: float, expected: float, where: str, how: str):
  if not math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-12):
    raise UserError(f"{where}: {value!r} does not match {how} = {expected!r} from `law`; "
                    "was the file edited by hand? Re-run `chinchax fit`, or make a law of "
                    "other coefficients with `chinchax law --E= --A= --B= --alpha= --beta=`")


def upgrade_v1(doc: dict) -> dict:
  """A v1 law.json as v2: the same law, with its fit warnings and a recommendation of 3."""
  missing = [k for k in _V1_KEYS if k not in doc]
  if missing:
    raise UserError(f"missing top-level key{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; expected a law.json written by `chinchax fit`")
  doc = copy.deepcopy(doc)
  doc["schema"] = SCHEMA
  if isinstance(doc["law"], dict):
    doc["law"].setdefault("approach", "3")
  fit_warnings = doc["fit"].get("warnings") if isinstance(doc["fit"], dict) else None
  fit_warnings = fit_warnings if isinstance(fit_warnings, list) else []  # damaged: none read
  doc["warnings"] = [f"Approach 3: {w}" for w in fit_warnings if isinstance(w, str)]
  doc["notes"] = [f"read from a {SCHEMA_V1} file; refit with `chinchax fit` for the "
                  "approaches' agreement and the recommendation"]
  doc["recommended"] = {"approach": "3", "why": f"a {SCHEMA_V1} file holds Approach 3's law"}
  doc["data_constrained"] = None
  if isinstance(doc["bootstrap"], dict):
    doc["bootstrap"].setdefault("columns", list(opt.PARAM_NAMES))
    doc["bootstrap"].setdefault("kind", "pairs")
  return doc


def _law(obj_: Any) -> tuple[str, np.ndarray]:
  law = obj(obj_, "law", ("form",))
  form = law["form"]
  if not isinstance(form, str) or form not in COLUMNS:
    raise UserError(f"law.form: expected {PARAMETRIC!r}, {NESTED!r} or {POWER!r}, "
                    f"got {shown(form)}")
  obj(law, "law", COLUMNS[form])
  if form in LOSS_FORMS:
    number(law["E"], "law.E", "nonnegative")
    for name in COLUMNS[form][1:]:
      number(law[name], f"law.{name}", "positive")
    if form == NESTED and not law["gamma"] <= 1:
      raise UserError(f"law.gamma: expected a value in (0, 1], got {shown(law['gamma'])}")
  else:
    for name in ("a", "b"):
      number(law[name], f"law.{name}", "positive")
    for name in ("log_kN", "log_kD"):
      number(law[name], f"law.{name}")
  if law.get("approach", "3") not in APPROACHES:
    raise UserError(f"law.approach: expected one of 1, 2, 3, got {shown(law['approach'])}")
  return form, np.array([law[k] for k in COLUMNS[form]], np.float64)


def _optimal(best: Any, form: str, values: np.ndarray):
  best = obj(best, "optimal", ("a", "b", "tokens_per_param"))
  for name in ("a", "b"):
    number(best[name], f"optimal.{name}", "positive")
  if form in LOSS_FORMS:
    a, b = opt.exponents(values)
    obj(best, "optimal", ("G",))
    number(best["G"], "optimal.G", "positive")
    _consistent(best["G"], float(opt.G(values)), "optimal.G",
                "(alpha·A/(beta·B))^(1/(alpha+beta))")
    how = ("beta/(alpha+beta)", "alpha/(alpha+beta)")
  else:
    a, b = values[0], values[1]
    how = ("law.a", "law.b")
  _consistent(best["a"], float(a), "optimal.a", how[0])
  _consistent(best["b"], float(b), "optimal.b", how[1])
  if not isinstance(best["tokens_per_param"], list):
    raise UserError(f"optimal.tokens_per_param: expected a list, "
                    f"got {shown(best['tokens_per_param'])}")
  for i, row in enumerate(best["tokens_per_param"]):
    where = f"optimal.tokens_per_param[{i}]"
    obj(row, where, ("C", "tokens_per_param"))
    number(row["C"], f"{where}.C", "positive")
    number(row["tokens_per_param"], f"{where}.tokens_per_param", "positive")
    # The rows are the law's own D*/N*, so a damaged k_N or k_D (which can put N* at 0 or
    # inf) shows up here as a mismatch rather than later as a division by zero.
    P = values if form == POWER else power.from_theta(values)
    with np.errstate(all="ignore"):
      N, D = power.optimum(float(row["C"]), P)
      expected = float(D / N)
    _consistent(row["tokens_per_param"], expected, f"{where}.tokens_per_param",
                f"D*/N* at C = {fmt.num(row['C'])}")


def _approaches(approaches: Any):
  approaches = obj(approaches, "approaches")
  for key, value in approaches.items():
    if key not in APPROACHES:
      raise UserError(f"approaches.{key}: unknown approach; expected keys among "
                      f"{', '.join(APPROACHES)}")
    obj(value, f"approaches.{key}")
    if "warnings" in value:
      strings(value["warnings"], f"approaches.{key}.warnings")
    for name in ("a", "b"):
      if name in value:
        number(value[name], f"approaches.{key}.{name}", nullable=True)
    ci = value.get("ci")
    if ci is not None:
      obj(ci, f"approaches.{key}.ci", ("level",))
      number(ci["level"], f"approaches.{key}.ci.level", "unit")
      for name, pair in ci.items():
        if name != "level":
          interval(pair, f"approaches.{key}.ci.{name}", nullable=True)


def _data_constrained(dc: Any):
  if dc is None:
    return
  dc = obj(dc, "data_constrained", ("R_D_star", "R_N_star", "ci", "base"))
  for name in ("R_D_star", "R_N_star"):  # null: the runs cannot tell it from 0 or ∞
    number(dc[name], f"data_constrained.{name}", "positive", nullable=True)
  if dc["ci"] is not None:
    ci = obj(dc["ci"], "data_constrained.ci", ("level", "R_D_star", "R_N_star"))
    number(ci["level"], "data_constrained.ci.level", "unit")
    for name in ("R_D_star", "R_N_star"):  # null: held at the published value, not fitted
      pair = ci[name]
      if isinstance(pair, list) and len(pair) == 2 and None in pair:  # one-sided
        for end in pair:
          number(end, f"data_constrained.ci.{name}", "positive", nullable=True)
      else:
        interval(pair, f"data_constrained.ci.{name}", "positive", nullable=True)
  base = obj(dc["base"], "data_constrained.base", opt.PARAM_NAMES)
  number(base["E"], "data_constrained.base.E", "nonnegative")
  for name in opt.PARAM_NAMES[1:]:
    number(base[name], f"data_constrained.base.{name}", "positive")


def _bootstrap(boot: Any, form: str):
  if boot is None:
    return
  boot = obj(boot, "bootstrap", ("n", "samples"))
  integer(boot["n"], "bootstrap.n", 0)
  columns = list(COLUMNS[form])
  if boot.get("columns", columns) != columns:
    raise UserError(f"bootstrap.columns: expected {columns} for a law of form {form!r}, "
                    f"got {shown(boot.get('columns'))}")
  samples = boot["samples"]
  if not isinstance(samples, list) or len(samples) != boot["n"]:
    got = f"{len(samples)} rows" if isinstance(samples, list) else shown(samples)
    raise UserError(f"bootstrap.samples: expected a list of bootstrap.n = {boot['n']} "
                    f"rows, got {got}")
  k = len(columns)
  if _samples_hold(samples, k, form):
    return
  for i, row in enumerate(samples):  # the first bad value, named
    where = f"bootstrap.samples[{i}]"
    if not (isinstance(row, list) and len(row) == k):
      raise UserError(f"{where}: expected {k} values [{', '.join(columns)}], got {shown(row)}")
    for j, name in enumerate(columns):
      number(row[j], f"{where}[{j}] ({name})",
             "positive" if _positive_column(form, j) else "finite")


def _samples_hold(samples: list, k: int, form: str) -> bool:
  """Whether every row is k JSON numbers with the signs `_bootstrap` asks, checked at once
  (thousands of rows: one call per value was a tenth of a second of every fit)."""
  if not all(type(row) is list and len(row) == k for row in samples):
    return False
  # Exactly int or float: a bool is not a number here, nor an int subclass.
  if not all(type(v) is float or type(v) is int for row in samples for v in row):
    return False
  try:
    X = np.array(samples, np.float64).reshape(len(samples), k)
  except OverflowError:  # an integer beyond any float
    return False
  positive = np.array([_positive_column(form, j) for j in range(k)])
  return bool(np.all(np.isfinite(X)) and np.all(X[:, positive] > 0))


def _positive_column(form: str, j: int) -> bool:
  """Whether column j of a bootstrap row must be positive (a loss law's A, B and exponents; a
  power law's k_N and k_D)."""
  return form in LOSS_FORMS and j > 0 or form == POWER and j < 2


def validate_law(doc: Any) -> dict[str, Any]:
  """Return `doc` if it is a valid v2 law.json dict; raise UserError naming the field.

  A v1 dict is refused here; `law.load_law` and `ScalingLaw.from_dict` upgrade it first.
  """
  if not isinstance(doc, dict):
    raise UserError(f"expected a law.json object, got {shown(doc)}")
  if doc.get("schema") == SCHEMA_V1:
    raise UserError(f"schema: {SCHEMA_V1} is read by load_law (upgraded to {SCHEMA}); "
                    "validate_law takes v3 (or v2) dicts")
  missing = [k for k in _TOP_KEYS if k not in doc]
  if missing and {"E", "A", "B", "alpha", "beta"} <= set(doc):
    raise UserError("a bare law's coefficients (E, A, B, alpha, beta), not a law.json: make "
                    "one with `chinchax law --E= --A= --B= --alpha= --beta= --out=law.json` "
                    "(its fitted range with --fitted-C=LO,HI)")
  if missing:
    raise UserError(f"missing top-level key{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; expected a law.json written by `chinchax fit`")
  if doc["schema"] not in (SCHEMA, SCHEMA_V2):
    raise UserError(f"schema: expected {SCHEMA!r} (or {SCHEMA_V2!r}, {SCHEMA_V1!r}), "
                    f"got {shown(doc['schema'])}")
  form, values = _law(doc["law"])
  if doc["ci"] is not None:
    ci = obj(doc["ci"], "ci", ("level", "a", "b"))
    number(ci["level"], "ci.level", "unit")
    for name in set(COLUMNS[form]) | {"a", "b"}:
      interval(ci.get(name), f"ci.{name}")
  _optimal(doc["optimal"], form, values)
  _approaches(doc["approaches"])
  rec = obj(doc["recommended"], "recommended", ("approach", "why"))
  if rec["approach"] not in APPROACHES:
    raise UserError(f"recommended.approach: expected one of 1, 2, 3, "
                    f"got {shown(rec['approach'])}")
  string(rec["why"], "recommended.why")
  strings(doc["warnings"], "warnings")
  strings(doc["notes"], "notes")
  _data_constrained(doc["data_constrained"])

  conv = obj(doc["conventions"], "conventions", ("params", "flops", "loss"))
  if conv["params"] not in conventions.PARAMS_CONVENTIONS:
    raise UserError(f"conventions.params: expected one of "
                    f"{', '.join(conventions.PARAMS_CONVENTIONS)}, got {shown(conv['params'])}")
  if conv["flops"] not in conventions.FLOPS_CONVENTIONS:
    raise UserError(f"conventions.flops: expected one of "
                    f"{', '.join(conventions.FLOPS_CONVENTIONS)}, got {shown(conv['flops'])}")
  string(conv["loss"], "conventions.loss")

  fit = obj(doc["fit"], "fit", ("delta", "starts", "objective", "starts_at_best", "points"))
  number(fit["delta"], "fit.delta", "positive", nullable=True)
  integer(fit["starts"], "fit.starts", 1, nullable=True)
  number(fit["objective"], "fit.objective", "nonnegative", nullable=True)
  integer(fit["starts_at_best"], "fit.starts_at_best", 0, nullable=True)
  if fit["starts"] is not None and (fit["starts_at_best"] or 0) > fit["starts"]:
    raise UserError(f"fit.starts_at_best: {fit['starts_at_best']} is more than "
                    f"fit.starts = {fit['starts']}")
  integer(fit["points"], "fit.points", 0, nullable=True)

  data = obj(doc["data"], "data", ("points", "N", "D", "C"))
  integer(data["points"], "data.points", 0, nullable=True)
  for name in ("N", "D", "C"):
    interval(data[name], f"data.{name}", "positive", nullable=True)
  _bootstrap(doc["bootstrap"], form)
  backtest_doc.validate(doc.get("backtest"))

  prov = obj(doc["provenance"], "provenance", ("chinchax", "created", "inputs"))
  string(prov["chinchax"], "provenance.chinchax")
  string(prov["created"], "provenance.created")
  if not (isinstance(prov["inputs"], list) and all(isinstance(p, str) for p in prov["inputs"])):
    raise UserError(f"provenance.inputs: expected a list of paths, got {shown(prov['inputs'])}")
  return doc


def read(doc: Any) -> dict[str, Any]:
  """A validated v2 dict from a v1 or v2 one (a v1 dict is upgraded, not modified)."""
  if isinstance(doc, dict) and doc.get("schema") == SCHEMA_V1:
    doc = upgrade_v1(doc)
  elif isinstance(doc, dict) and doc.get("schema") == SCHEMA_V2:
    doc = {**doc, "schema": SCHEMA}
  return validate_law(doc)
