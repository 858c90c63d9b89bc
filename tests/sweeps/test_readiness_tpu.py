"""Ahead-of-time compilation for small TPU topologies on this CPU. Needs libtpu
(`pip install "chinchax[tpu]"`); skipped with that reason where it is not installed."""

import dataclasses
import json
import os
import subprocess
import sys

import ml_collections
import pytest

from chinchax.models.config import ModelConfig
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps.accel import aot, readiness
from chinchax.sweeps.chips import hardware
from chinchax.sweeps import grid
from chinchax.sweeps.train import optimizer
from chinchax.sweeps.configs import tiny
from tests.helpers import aot_util

pytestmark = [
    pytest.mark.skipif(not aot.has_libtpu(),
                       reason="needs libtpu to compile for a TPU topology: "
                              "pip install 'chinchax[tpu]'"),
    pytest.mark.slow,  # each compile for a TPU takes tens of seconds of CPU
]
ROOT = aot_util.ROOT
# libtpu's machine-wide lock is for chips; compile-only workers in parallel need none.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


def test_fsdp_and_shard_grad_op_as_compiled_for_a_v5p_slice():
  got = aot_util.run_aot_check("v5p:2x2x1")  # 4 chips
  assert got["devices"] == 4
  aot_util.check_fsdp_shardings(got)


def _dry_run(env: dict) -> dict:
  done = subprocess.run(
      [sys.executable, "-m", "chinchax.cli", "sweep", "--config=sweeps/configs/tiny.py",
       "--dry-run", "--compile=v5e:2x2", "--json", "--config.recipe.batch_multiple=4"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout)


def test_the_dry_run_compiles_every_cell_for_the_target(tmp_path):
  env = {**os.environ, "PYTHONPATH": ROOT, "TFDS_DATA_DIR": str(tmp_path / "data"),
         "CHINCHAX_COMPILE_CACHE": str(tmp_path / "cache")}
  got = _dry_run(env)
  assert got["target"] == "v5e:2x2" and got["chips"] == 4
  assert got["hbm_capacity_bytes"] == hardware.TPU_CHIPS["v5e"].hbm_bytes
  assert got["hbm_budget_bytes"] == int(got["hbm_capacity_bytes"] * 0.9)
  c = tiny.get_config()
  c.recipe.batch_multiple = 4
  cells, _ = grid.make_grid(ml_collections.ConfigDict(c))
  assert [x["name"] for x in got["cells"]] == [x.name for x in cells]
  for x in got["cells"]:
    t = x["train"]
    assert x["fits"] is True and x["hbm_bytes_per_chip"] >= t["hbm_bytes"] > 0
    # No HBM temporaries is right for these steps: memory_analysis() counts HBM only, and
    # libtpu places a small step's temporaries in the chip's on-chip VMEM (a tiny cell at
    # batch 24 takes 5 MiB of it), so temp_bytes is 0 until they outgrow it (next test).
    assert t["argument_bytes"] > 0 and t["temp_bytes"] >= 0 and x["eval"]["hbm_bytes"] > 0
    # Matmuls dominate even here; the embedding gather and the norms make up the rest.
    assert 0.7 < x["flops_ratio"] < 1.3, x["flops_ratio"]
  # At one budget a larger N holds more parameters and optimizer state on every chip.
  for budget in {x["budget"] for x in got["cells"]}:
    row = sorted((x["N"], x["train"]["argument_bytes"]) for x in got["cells"]
                 if x["budget"] == budget)
    assert [a for _, a in row] == sorted(a for _, a in row)
  # Run again: every cell is read back from what the first run's compiles reported.
  again = _dry_run(env)
  assert not any(x["cached"] for x in got["cells"]) and all(x["cached"] for x in again["cells"])
  drop = lambda x: {k: v for k, v in x.items() if k not in ("cached", "train", "eval")}
  assert [drop(x) for x in again["cells"]] == [drop(x) for x in got["cells"]]


def test_temporaries_that_outgrow_vmem_are_counted_in_hbm():
  """The tiny config's first cell at its own batch and at 64 times it, on v5e:2x2. The XLA
  dump of these steps (--xla_dump_to, libtpu 0.0.42) puts 5 MiB of temporaries in VMEM and
  none in HBM at batch 24 (memory_analysis: temp 0), 111 MiB in VMEM and 140 MB in HBM at
  batch 1536 (temp 147 MB): the program reports its HBM temporaries, which the dry run adds
  to the chip's HBM."""
  c = tiny.get_config()
  c.recipe.batch_multiple = 4
  cells, _ = grid.make_grid(ml_collections.ConfigDict(c))
  small = readiness.setup_for(cells[0], ml_collections.ConfigDict(c))
  assert small.batch_size == 24
  devices = aot.target_devices(hardware.parse_target("v5e:2x2"))
  big = dataclasses.replace(small, batch_size=64 * small.batch_size)
  (few, _), (many, _) = (aot.compile_setup(s, devices, with_eval=False) for s in (small, big))
  assert few.temp_bytes < 2**20 and many.temp_bytes > 100 * 2**20
  assert many.hbm_bytes - few.hbm_bytes >= many.temp_bytes - few.temp_bytes


def test_out_of_hbm_is_refused_and_remat_makes_it_fit():
  target = hardware.parse_target("v5e:1x1")  # one 16 GiB chip
  devices = aot.target_devices(target)
  s = Shape(d_model=512, n_layers=4, n_heads=4, d_ff=1408, vocab_size=32000, seq_len=1024)
  # Layers in a loop, as deep models run: unrolled, XLA rematerialises on its own to fit.
  model = ModelConfig(s, unroll_layers=0)
  setup = aot.Setup(model, optimizer.OptimizerConfig(), 100, (1, 1, 1), "fsdp", 48)
  train, ev = aot.compile_setup(setup, devices)
  assert train.error and "RESOURCE_EXHAUSTED" in train.error and ev is None
  budget = int(target.chip.hbm_bytes * 0.9)
  assert train.hbm_bytes > budget  # the arguments plus the temporaries the compiler names
  cell = grid.Cell("C1-N1", 1.0, 1, s, 1.0, 1.0, 100, 48, 1024, 1e-3, 10, 1.0, 1.0)
  row = readiness._remedy(readiness.Row(cell, setup, train, ev, budget, 1), devices, 1,
                          lambda m: None)
  assert row.remedy and row.remedy[-1].startswith("--config.train.model.remat=")
  assert row.remedy_hbm <= budget
