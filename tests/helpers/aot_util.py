"""Shared by the AOT tests: run tests/helpers/aot_check.py for a target, check what it saw."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(ROOT, "tests", "helpers", "aot_check.py")


def run_aot_check(*argv: str, env: dict | None = None) -> dict:
  return run_aot_check_script(HELPER, *argv, env=env)


def run_aot_check_script(path: str, *argv: str, env: dict | None = None) -> dict:
  """Runs a helper script in a process of its own; its last stdout line is JSON."""
  env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
  done = subprocess.run([sys.executable, path, *argv], env=env, capture_output=True,
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
  # Bytes per device, closed form: f32 parameters (4 N, split over the n devices by fsdp,
  # whole under shard_grad_op) and AdamW's two moments (8 N / n), a batch of 16 x 128 int32
  # inputs and targets split over every device, and three 4-byte scalars (the step, AdamW's
  # count, the learning rate): the program's arguments are these and nothing else.
  n, N = got["devices"], got["N"]
  params, batch = {"fsdp": 4 * N // n, "shard_grad_op": 4 * N}, 2 * 16 * 128 * 4 // n
  for name, mode in got["modes"].items():
    args = mode["arguments"]
    part = lambda key: sum(a["logical"] for a in args if key(a["path"]))
    assert len(args) == 3 * len(mode["params"]) + 2 + 2 + 1
    assert part(lambda p: "['params']" in p) == params[name]
    assert part(lambda p: ".mu[" in p or ".nu[" in p) == 8 * N // n
    assert part(lambda p: "['inputs']" in p or "['targets']" in p) == batch
    assert sum(a["logical"] for a in args) == params[name] + 8 * N // n + batch + 3 * 4
    # On the device each argument is padded to the tiles of its layout (a TPU's memory tiles:
    # T(4,128) for an f32[2,64,4,64] shard, T(128) for a scalar; a CPU has none), so the
    # program's argument bytes are the sum of the tiled sizes, exactly: no argument is missing
    # from the closed form, and none is there twice.
    padded = [(a["path"], a["shard"], a["tiling"], a["tiled"] - a["logical"]) for a in args
              if a["tiled"] != a["logical"]]
    assert mode["argument_bytes"] == sum(a["tiled"] for a in args), (name, padded)
  assert got["modes"]["fsdp"]["alias_bytes"] >= 12 * N // n  # the state is donated: in place
