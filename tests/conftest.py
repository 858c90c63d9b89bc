"""Shared fixtures and the test tiers.

Two tiers: `pytest -m "not slow" -n 2` (the fast tier: numerics, configs, parsers, the
pipeline on stand-in runs) and the whole suite. A test is `@pytest.mark.slow` when it trains
a model or spawns a process.

The Hypothesis fuzz tests replay the same examples on every run, so a run fails only for
what it changed; `CHINCHAX_FUZZ_EXPLORE=1 pytest tests/scaling/test_fuzz_*.py
tests/cli/test_fuzz_overrides.py` draws new examples to look for new bad inputs (each one
found becomes an `@example` of the fast tests).
"""

import os
import shutil
import tempfile

from hypothesis import settings
import jax
import pytest

from tests.helpers import sweep_helper
from tests.helpers.fake_gcs import fake_gcs  # noqa: F401  (a fixture: gs:// on a local folder)


settings.register_profile("replay", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("CHINCHAX_FUZZ_EXPLORE") else "replay")


def pytest_configure(config):
  """Compiles are kept in a cache of this test session's own (`sweeps.accel.compile_cache`,
  `sweeps.accel.aot_cache`): a test that compiles then compiles, whatever an earlier run left."""
  if "CHINCHAX_COMPILE_CACHE" not in os.environ:
    path = tempfile.mkdtemp(prefix="chinchax-test-cache-")
    os.environ["CHINCHAX_COMPILE_CACHE"] = path
    config.stash[_CACHE] = path


def pytest_unconfigure(config):
  if _CACHE in config.stash:
    shutil.rmtree(config.stash[_CACHE], ignore_errors=True)


_CACHE = pytest.StashKey[str]()


# jax starts here, in every test process, with the devices the environment gives it: a sweep
# config with `cpu_devices` (the smoke's) run in-process then cannot split the CPU for the
# tests after it (`executors.split_cpu` warns instead). Tests of the split use subprocesses.
jax.devices()


@pytest.fixture
def tiny_config():
  """A fresh copy of the train config's `tiny` preset: 24 steps of 8 x 32 tokens of the
  default corpus, an eval and a checkpoint every 8 steps."""
  from chinchax.sweeps.configs import train  # pylint: disable=g-import-not-at-top
  return train.get_config("tiny")


@pytest.fixture
def tiny_sweep_argv():
  """argv(workdir, *more): `chinchax sweep` flags of the two-cell grid of
  tests/helpers/sweep_helper.py (~10 steps per cell), with more flags appended."""
  return sweep_helper.argv
