"""Shared fixtures and the test tiers.

Two tiers: `pytest -m "not slow" -n 2` (the fast tier: numerics, configs, parsers) and the
whole suite. A test is `@pytest.mark.slow` when it trains a model or spawns a process.
"""

from tests.helpers.fake_gcs import fake_gcs  # noqa: F401  (a fixture: gs:// on a local folder)
