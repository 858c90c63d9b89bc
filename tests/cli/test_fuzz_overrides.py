"""Fuzzing `--config.KEY=VALUE` (Hypothesis): any override of the train or sweep config is
parsed and checked to a config or a one-line UserError, never another exception.

The keys are the configs' own (so the values reach the checks) plus near misses; the values
are arbitrary text and literals of every type. A train config is checked as `chinchax train`
checks it before opening data (sweeps/train/config.py); a sweep config is resolved into its
grid as `chinchax sweep` does (sweeps/spec.py).
"""

import os

import ml_collections
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from chinchax.errors import UserError
from chinchax.sweeps import spec as spec_lib
from chinchax.cli import flags
from chinchax.cli import sweep as sweep_cli
from chinchax.cli import train as train_cli
from chinchax.sweeps.train import config as run_config

EXAMPLES = 100
FAST = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=10 * EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def _leaves(c: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
  out = []
  for key, value in c.items():
    if isinstance(value, ml_collections.ConfigDict):
      out += _leaves(value, f"{prefix}{key}.")
    else:
      out.append(prefix + key)
  return out


def _config(path: str) -> ml_collections.ConfigDict:
  return flags.parse_config_flags([], "t", path).config


TRAIN_KEYS = _leaves(_config(train_cli.DEFAULT_CONFIG))
SWEEP_KEYS = _leaves(_config(sweep_cli.DEFAULT_CONFIG))

values = st.one_of(
    st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**20, 10**20).map(str),
    st.sampled_from(["", "0", "-1", "1e400", "nan", "-inf", "True", "None", "()", "(0,)",
                     "(1e11, -1)", "((1e4,), (2e4,))", "[1, 2]", "{'a': 1}", "'x'", "3.5",
                     "0.0", "1e-30", "(nan,)", "(1e11, 1e11)", "1j", "b'x'", "lambda: 1"]))


def keys(real: list[str]):
  near = st.sampled_from(real).map(lambda k: k[:-1] + "z")  # a misspelling
  return st.one_of(st.sampled_from(real), st.sampled_from(real), near,
                   st.from_regex(r"\A[a-z_]{1,8}(\.[a-z_]{1,8})?\Z"))


def _accept_or_refuse(argv: list[str], default: str, check) -> None:
  try:
    config = flags.parse_config_flags(argv, "chinchax", default).config
    check(config)
  except UserError as e:
    assert "\n" not in str(e) and len(str(e)) < 600, str(e)


def _check_train(config):
  run_config.check(config)


def _resolve_sweep(config):
  spec_lib.resolve(config, os.path.join("/nonexistent", "wd"))


@FAST
@given(st.lists(st.tuples(keys(TRAIN_KEYS), values), min_size=1, max_size=3))
def test_train_overrides(pairs):
  _accept_or_refuse([f"--config.{k}={v}" for k, v in pairs], train_cli.DEFAULT_CONFIG,
                    _check_train)


@FAST
@given(st.lists(st.tuples(keys(SWEEP_KEYS), values), min_size=1, max_size=2))
@example([("recipe.lr_exponent", "75")])  # found: the LR rule overflowed a float
@example([("budgetz", "1")])
@example([("sizes", "5.599782390715612e-175")])  # found: a math domain error in the recipe
@example([("sizes", "1.872597015481579e+306")])  # found: an infinite number of layers
@example([("vocab_size", "68719476729")])  # found: a width that cancelled to 0 in the recipe
@example([("hparams.batch_factors", "[1e300]")])  # found: a 300-digit batch in the refusal
def test_sweep_overrides(pairs):
  _accept_or_refuse([f"--config.{k}={v}" for k, v in pairs], sweep_cli.DEFAULT_CONFIG,
                    _resolve_sweep)


@FAST
@given(st.lists(st.text(max_size=20), max_size=3))
def test_arbitrary_arguments(argv):
  _accept_or_refuse(argv, train_cli.DEFAULT_CONFIG, _check_train)


@pytest.mark.slow
@LONG
@given(st.lists(st.tuples(keys(TRAIN_KEYS), values), min_size=1, max_size=3))
def test_train_overrides_long(pairs):
  _accept_or_refuse([f"--config.{k}={v}" for k, v in pairs], train_cli.DEFAULT_CONFIG,
                    _check_train)


@pytest.mark.slow
@LONG
@given(st.lists(st.tuples(keys(SWEEP_KEYS), values), min_size=1, max_size=2))
def test_sweep_overrides_long(pairs):
  _accept_or_refuse([f"--config.{k}={v}" for k, v in pairs], sweep_cli.DEFAULT_CONFIG,
                    _resolve_sweep)


def test_the_keys_reach_the_checks():
  """The strategies draw the configs' real keys: a valid override passes."""
  assert "optimizer.peak_lr" in TRAIN_KEYS and "train.optimizer.peak_lr" in SWEEP_KEYS
  config = flags.parse_config_flags(["--config.optimizer.peak_lr=1e-3"], "t",
                                    train_cli.DEFAULT_CONFIG).config
  run_config.check(config)
  assert config.optimizer.peak_lr == 1e-3
