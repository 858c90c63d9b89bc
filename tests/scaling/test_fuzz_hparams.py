"""hparams.json's loader fuzzed: arbitrary bytes and JSON, and mutated valid files, are either
refused in one line or load into a document whose laws predict (hparams_plan) without error."""

import json
import os

import numpy as np
from hypothesis import example, given, strategies as st

from chinchax.errors import UserError
from chinchax.scaling.hparams import file as hparams_file
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax.scaling.hparams import plan as hparams_plan
from tests.scaling import hparams_synthetic as S
from tests.scaling.test_fuzz_loaders import FAST, FOLDER, edit, mutate

GOOD = json.loads(json.dumps(hparams_fit.fit(S.runs(np.random.default_rng(0)), bootstrap=3)))


def _load(data: bytes) -> None:
  path = os.path.join(FOLDER, "hparams.json")
  with open(path, "wb") as f:
    f.write(data)
  try:
    doc = hparams_file.load(path)
  except UserError as e:
    assert "\n" not in str(e) and len(str(e)) < 600, str(e)
    return
  try:
    hp = hparams_plan.at(doc, 1e8, 2e9)
  except UserError:
    return
  hparams_plan.text(hp, 64)


@st.composite
def mutated(draw) -> bytes:
  return mutate(draw, GOOD)


def _edit(path: tuple, value) -> bytes:
  return edit(GOOD, path, value)


@FAST
@given(st.binary(max_size=300))
def test_arbitrary_bytes(data):
  _load(data)


@FAST
@given(mutated())
@example(_edit(("lr", "exponents", "N"), 1e300))  # the prediction overflows a float
@example(_edit(("lr", "coef"), 1e-320))           # a subnormal coefficient
@example(_edit(("lr", "draws"), [[1e300, 1.0, 1.0]]))
@example(_edit(("lr", "draws"), [[0.6, -0.7, 10**400]]))  # found: an integer beyond a float
@example(_edit(("settings", "ci"), "x"))
@example(_edit(("conventions", "seq_len"), 0))
def test_mutated_valid_files(data):
  _load(data)
