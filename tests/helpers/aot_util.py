"""Shared by the AOT tests: run tests/helpers/aot_check.py for a target, check what it saw."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(ROOT, "tests", "helpers", "aot_check.py")


def run_aot_check(*argv: str, env: dict | None = None) -> dict:
  env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
  done = subprocess.run([sys.executable, HELPER, *argv], env=env, capture_output=True,
                        text=True, timeout=1200)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


def check_fsdp_shardings(got: dict) -> None:
  """The compiled program's own in/out shardings: fsdp splits parameters and optimizer state
  over `fsdp`; shard_grad_op keeps the parameters whole and splits the optimizer state."""
  fsdp, zero2 = got["modes"]["fsdp"], got["modes"]["shard_grad_op"]
  on_fsdp = lambda spec: any(a == "fsdp" or (isinstance(a, list) and "fsdp" in a) for a in spec)
  assert fsdp["params"] and all(on_fsdp(s) for s in fsdp["params"].values())
  assert not any(on_fsdp(s) for s in zero2["params"].values())
  for mode in (fsdp, zero2):
    moments = {k: s for k, s in mode["opt"].items() if ".mu[" in k or ".nu[" in k}
    assert len(moments) == 2 * len(mode["params"]) and all(map(on_fsdp, moments.values()))
    assert mode["params_out"] == mode["params"] and mode["opt_out"] == mode["opt"]
  # Bytes per device, closed form: f32 parameters and AdamW's two moments (12 N), a batch of
  # 16 x 128 int32 inputs and targets split over every device, and a few int32 scalars.
  n, N = got["devices"], got["N"]
  batch = 2 * 16 * 128 * 4 // n
  assert abs(fsdp["argument_bytes"] - (12 * N // n + batch)) < 64
  assert abs(zero2["argument_bytes"] - (4 * N + 8 * N // n + batch)) < 64
  assert fsdp["alias_bytes"] >= 12 * N // n  # the state is donated: updated in place
