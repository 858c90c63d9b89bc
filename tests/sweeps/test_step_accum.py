"""Gradient accumulation: one step over k microbatches equals one step over the whole batch."""

import json
import subprocess
import sys

import jax
import pytest

from tests.helpers import accum_check
from tests.helpers import train_util as tu
from chinchax.models import sharding as mesh_lib


def check(m: dict) -> None:
  assert m["grad_rel"] <= 1e-5  # the gradients themselves
  assert m["params_rel"] <= 1e-6  # after one AdamW step of the training optimizer
  assert m["adamw_moved"] > 1e-3  # ... which really moved them
  assert m["tokens_k"] == m["tokens_1"]
  assert m["loss_k"] == pytest.approx(m["loss_1"], rel=1e-6)
  assert m["grad_norm_k"] == pytest.approx(m["grad_norm_1"], rel=1e-5)


def test_grad_accum_4_equals_whole_batch_one_device():
  m = accum_check.measure(mesh_lib.make_mesh((1, 1, 1), jax.devices()[:1]))
  check(m)


@pytest.mark.slow
def test_grad_accum_4_equals_whole_batch_8_devices(tmp_path):
  env = tu.child_env(str(tmp_path / "xla_cache"), devices=8)
  p = subprocess.run([sys.executable, "tests/helpers/accum_check.py", "2,2,2"], cwd=tu.ROOT, env=env,
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  m = json.loads(p.stdout.strip().splitlines()[-1])
  assert m["devices"] == 8 and m["rows"] == 32
  check(m)
