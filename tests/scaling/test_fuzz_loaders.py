"""Fuzzing the loaders (Hypothesis): arbitrary bytes, arbitrary JSON and mutations of valid
files give a valid result or a one-line UserError, never another exception.

Example counts are modest (EXAMPLES each) so the fast tier stays fast; `test_*_long` run ten
times as many and are marked slow.
"""

import json
import math
import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from chinchax.scaling import api
from chinchax.scaling.law import presets
from chinchax.scaling.runs import table as runs_lib
from chinchax.errors import UserError
from chinchax.scaling.law.artifact import ScalingLaw
from tests.helpers import synthetic_law as syn

EXAMPLES = 150
FAST = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
LONG = settings(max_examples=10 * EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FOLDER = tempfile.mkdtemp(prefix="chinchax-fuzz-")

numbers_text = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**30, 10**30).map(str),
    st.sampled_from(["", " ", "nan", "-inf", "1e400", "1e-400", "0", "-0", "1,5", "0x10",
                     "１２", "1_000", "\x00", '"3"', "done", "failed", "running"]),
    st.text(max_size=8))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**400, 10**400) |
    st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
COLUMNS = ["N", "D", "C", "loss", "budget", "U", "run", "status", "schedule", "x"]


def _file(name: str, data: bytes) -> str:
  path = os.path.join(FOLDER, name)
  with open(path, "wb") as f:
    f.write(data)
  return path


def _is_valid(runs: runs_lib.Runs) -> None:
  """What a loaded Runs promises its users: positive finite N, D, C and losses."""
  assert len(runs) > 0 and len(runs.name) == len(runs) == len(set(runs.name))
  for x in (runs.N, runs.D, runs.C, runs.loss):
    assert x.dtype == np.float64 and np.all(np.isfinite(x)) and np.all(x > 0)


def _load_runs(path: str) -> None:
  try:
    runs = runs_lib.load_runs([path])
  except UserError as e:
    assert "\n" not in str(e) and len(str(e)) < 600, str(e)
    return
  _is_valid(runs)


def _load_law(path: str) -> None:
  try:
    law = ScalingLaw.load(path)
  except UserError as e:
    assert "\n" not in str(e) and len(str(e)) < 600, str(e)
    return
  # A law that loads plans: the result is a plan or a UserError, too.
  try:
    plan = api.plan(law, flops=1e21)
  except UserError:
    return
  json.dumps(plan.to_dict())


# ------------------------------------------------------------------------- CSV


@FAST
@given(st.binary(max_size=300))
def test_csv_of_arbitrary_bytes(data):
  _load_runs(_file("bytes.csv", data))


@st.composite
def csv_tables(draw) -> bytes:
  header = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=6))
  rows = draw(st.lists(st.lists(numbers_text, min_size=len(header) - 1,
                                max_size=len(header) + 1), max_size=6))
  sep = draw(st.sampled_from([",", ",", ",", ";", "\t"]))
  lines = [sep.join(header)] + [sep.join(r) for r in rows]
  return "\n".join(lines).encode("utf-8", "surrogatepass")


@FAST
@given(csv_tables())
def test_csv_of_plausible_tables(data):
  _load_runs(_file("table.csv", data))


@pytest.mark.slow
@LONG
@given(csv_tables())
def test_csv_of_plausible_tables_long(data):
  _load_runs(_file("table.csv", data))


# ------------------------------------------------------------------------- runs.jsonl

RECORD = {"schema": "chinchax/run/v1", "name": "a", "status": "done", "N_total": 1e6,
          "N_non_embedding": 9e5, "D": 2e7, "eval_loss": 3.0, "flops_chinchilla": 1.3e14,
          "budget": 1.2e14, "unique_tokens": None, "schedule": "cosine", "curve": None}


@FAST
@given(st.binary(max_size=300))
def test_runs_jsonl_of_arbitrary_bytes(data):
  _load_runs(_file("bytes.jsonl", data))


@FAST
@given(st.lists(json_values, min_size=1, max_size=4))
def test_runs_jsonl_of_arbitrary_json(lines):
  _load_runs(_file("json.jsonl", "\n".join(json.dumps(x) for x in lines).encode()))


@st.composite
def mutated_records(draw) -> bytes:
  records = []
  for i in range(draw(st.integers(1, 4))):
    rec = dict(RECORD, name=f"r{i}")
    for key in draw(st.lists(st.sampled_from(sorted(RECORD) + ["extra"]), max_size=3)):
      if draw(st.booleans()):
        rec[key] = draw(json_values)
      else:
        rec.pop(key, None)
    records.append(rec)
  return "\n".join(json.dumps(r) for r in records).encode()


@FAST
@given(mutated_records())
@example(json.dumps(dict(RECORD, status=[-10**300, 10**80])).encode())  # found: a long line
@example(json.dumps(dict(RECORD, curve=5)).encode())  # found: a curve that is no file name
@example(json.dumps(RECORD).replace("20000000.0", "9" * 400).encode())  # beyond a float
def test_runs_jsonl_of_mutated_records(data):
  _load_runs(_file("mutated.jsonl", data))


@pytest.mark.slow
@LONG
@given(mutated_records())
def test_runs_jsonl_of_mutated_records_long(data):
  _load_runs(_file("mutated.jsonl", data))


# ------------------------------------------------------------------------- law.json

def _seed_laws() -> list[dict]:
  """Valid files to mutate: the presets, fitted laws of both forms with bootstrap draws, and
  a v1 file (upgraded on load)."""
  r = syn.isoflop(budgets=(1e18, 1e19, 1e20), sizes=5, noise=0.003)
  runs = {k: r[k] for k in ("N", "D", "loss", "budget")}
  fitted = [api.fit(runs, bootstrap=4, approaches=a).to_dict() for a in ("3", "2")]
  v1 = {k: fitted[0][k] for k in ("law", "ci", "optimal", "approaches", "conventions", "fit",
                                  "data", "bootstrap", "provenance")}
  v1["schema"] = "chinchax/law/v1"
  return [*(presets.preset_dict(name) for name in presets.names()), *fitted, v1]


LAWS = _seed_laws()
POWER_LAW = LAWS[-2]  # Approach 2's fitted law


@FAST
@given(st.binary(max_size=300))
def test_law_of_arbitrary_bytes(data):
  _load_law(_file("bytes.json", data))


@FAST
@given(json_values)
def test_law_of_arbitrary_json(value):
  _load_law(_file("value.json", json.dumps(value).encode()))


def _paths(node, prefix=()):
  yield prefix
  if isinstance(node, dict):
    for k, v in node.items():
      yield from _paths(v, prefix + (k,))
  elif isinstance(node, list):
    for i, v in enumerate(node):
      yield from _paths(v, prefix + (i,))


def mutate(draw, doc: dict) -> bytes:
  """A copy of `doc` with 1-3 of its values replaced by arbitrary JSON or keys deleted."""
  doc = json.loads(json.dumps(doc))
  for _ in range(draw(st.integers(1, 3))):
    paths = [p for p in _paths(doc) if p]
    path = draw(st.sampled_from(paths))
    node = doc
    for key in path[:-1]:
      node = node[key]
    if draw(st.booleans()) and isinstance(node, dict):
      del node[path[-1]]
    else:
      node[path[-1]] = draw(json_values)
  return json.dumps(doc).encode()


@st.composite
def mutated_laws(draw) -> bytes:
  return mutate(draw, draw(st.sampled_from(LAWS)))


def edit(doc: dict, path: tuple, value) -> bytes:
  """`doc` with the value at `path` replaced: a found input kept as an @example."""
  doc = json.loads(json.dumps(doc))
  node = doc
  for key in path[:-1]:
    node = node[key]
  node[path[-1]] = value
  return json.dumps(doc).encode()


@FAST
@given(mutated_laws())
@example(edit(LAWS[0], ("law", "form"), {}))  # found: an unhashable form
@example(edit(LAWS[-3], ("data", "N"), [1, 10**400]))  # found: an integer beyond a float
@example(edit(LAWS[-1], ("fit", "warnings"), None))  # found: a v1 file's warnings null
@example(b"[" * 100000)  # nesting deeper than Python's recursion limit
@example(edit(POWER_LAW, ("law", "log_kN"), -768.0))  # found: N* underflows to 0
@example(edit(json.loads(edit(POWER_LAW, ("optimal", "tokens_per_param"), [])),
               ("law", "log_kN"), -768.0))  # the same with no rows to check it against
def test_law_of_mutated_valid_laws(data):
  _load_law(_file("mutated.json", data))


@pytest.mark.slow
@LONG
@given(mutated_laws())
def test_law_of_mutated_valid_laws_long(data):
  _load_law(_file("mutated.json", data))


def test_the_fuzzed_law_strategy_reaches_valid_laws():
  """The mutations start from valid files: unmutated, each loads and plans."""
  for doc in LAWS:
    law = ScalingLaw.load(_file("valid.json", json.dumps(doc).encode()))
    assert math.isfinite(api.plan(law, flops=1e21).N)
