"""bench/gpu_bench.py runs as a CPU smoke (tiny sizes), so that the command a GPU will run
does not rot: the train step compiled and timed, its memory, and the deviceless prediction
for one H100 beside it where the gpu-compile extra is installed."""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.helpers import aot_util


@pytest.mark.slow  # a process that compiles and runs a train step (and, with the extra, a second)
def test_the_gpu_bench_smoke(tmp_path):
  env = {**os.environ, "PYTHONPATH": aot_util.ROOT, "JAX_PLATFORMS": "cpu",
         "CHINCHAX_COMPILE_CACHE": str(tmp_path / "cache")}
  done = subprocess.run([sys.executable, os.path.join(aot_util.ROOT, "bench", "gpu_bench.py"),
                         "--smoke", "--K=1,4"], env=env, capture_output=True, text=True,
                        timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  got = json.loads(done.stdout)
  assert got["config"] == "gpu_node" and got["peak_flops_per_device"] is None  # a CPU
  one, cell = got["cells"]  # the one-step program, then the trainer's chunk of 4 steps
  assert (one["K"], cell["K"]) == (1, 4) and one["N"] == cell["N"]
  # The chunk's arguments hold 3 more int32 batches (inputs and targets, B x 64 each) and
  # 3 more learning rates, plus its step count n: nothing else differs.
  extra = 3 * 2 * cell["batch"] * 64 * 4 + 3 * 4 + 4
  assert (cell["memory"]["on_device"]["argument_bytes"]
          - one["memory"]["on_device"]["argument_bytes"]) == extra
  assert abs(math.log(cell["N"] / 2e5)) < 0.2 and cell["seq_len"] == 64
  assert cell["batch"] == 2 * got["devices"] and cell["mfu"] is None
  assert cell["tokens_per_s"] == pytest.approx(cell["batch"] * 64 / cell["step_s"])
  # Four steps of an untrained model on uniform random tokens: the loss is near log V. The
  # chunks took 12 steps on that one batch (2 warm-up and 1 timed dispatch of 4): it is
  # memorised further.
  assert abs(one["loss"] - math.log(512)) < 0.5, one["loss"]
  assert cell["loss"] < one["loss"] - 0.2, (cell["loss"], one["loss"])
  m = cell["memory"]
  assert m["on_device"]["argument_bytes"] > 12 * cell["N"]  # f32 params + AdamW's moments
  if got["prediction_missing"]:
    assert "chinchax[gpu-compile]" in got["prediction_missing"] and m["ratio"] is None
  else:
    # The deviceless H100 compile lays parameters, optimizer state and batch out as the CPU's
    # compile does: the same argument bytes; its temporaries are the GPU program's own.
    assert got["prediction_target"] == f"h100:{got['devices']}"
    assert m["predicted"]["argument_bytes"] == m["on_device"]["argument_bytes"]
    assert m["ratio"] == m["on_device"]["hbm_bytes"] / m["predicted"]["hbm_bytes"]
