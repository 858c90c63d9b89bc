"""sweeps/accel/aot.py, readiness.py and dry_run.py on this machine's CPU (no libtpu needed): the
compiled program's shardings and bytes, the fit check, the refusal and its remedy, the dry
run's flags.
tests/sweeps/test_readiness_tpu.py runs the same against TPU topologies where libtpu is."""

import dataclasses
import json
import os

import jax
import numpy as np
import pytest
from jax.experimental.layout import Layout

from chinchax.models.config import ModelConfig
from chinchax.scaling.runs.conventions import Shape
from chinchax.errors import UserError
from chinchax.sweeps.accel import aot, readiness
from chinchax.sweeps.chips import hardware
from chinchax import cli
from chinchax.cli import flags as cli_flags
from chinchax.sweeps import dry_run
from chinchax.sweeps.train import optimizer
from chinchax.sweeps import spec as spec_lib
from chinchax.sweeps.configs import gpu_node, tiny, tpu_v5p
from tests.helpers import aot_util

@pytest.mark.slow
def test_fsdp_and_shard_grad_op_as_compiled_on_8_cpu_devices():
  got = aot_util.run_aot_check(env={"XLA_FLAGS": "--xla_force_host_platform_device_count=8",
                           "JAX_PLATFORMS": "cpu"})
  assert got["devices"] == 8
  aot_util.check_fsdp_shardings(got)


def _setup(remat="none", mesh=(-1, 1, 1), mode="fsdp", grad_accum=1):
  s = Shape(d_model=64, n_layers=2, n_heads=4, d_ff=192, vocab_size=256, seq_len=64)
  return aot.Setup(ModelConfig(s, remat=remat), optimizer.OptimizerConfig(), 100, mesh, mode,
                   32, grad_accum)


def test_remedies_are_tried_cheapest_first():
  got = [flags for flags, _ in readiness.remedies(_setup(), n_devices=16)]
  fsdp = ("--config.train.mesh.data=1", "--config.train.mesh.fsdp=-1")
  minimal, full = ("--config.train.model.remat=minimal",), ("--config.train.model.remat=full",)
  assert got[:5] == [fsdp, minimal, fsdp + minimal, full, fsdp + full]
  assert got[5:] == [fsdp + full + (f"--config.train.grad_accum={k}",) for k in (2, 4, 8)]
  # Already FSDP over the whole slice, with full remat: only gradient accumulation is left.
  done = readiness.remedies(_setup("full", (1, -1, 1), grad_accum=2), n_devices=16)
  assert [f for f, _ in done] == [(f"--config.train.grad_accum={k}",) for k in (4, 8, 16)]
  # Several slices keep the data axis across them.
  assert readiness.remedies(_setup(), 32, slices=2)[0][1].mesh == (2, -1, 1)
  assert readiness.remedies(_setup(mode="shard_grad_op"), 8)[0][0][-1] == (
      "--config.train.sharding=fsdp")


def test_out_of_memory_messages_give_the_bytes():
  for text in ["RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for "
               "HLO temporaries (23.05G) exceeds available HBM (15.75G).",
               "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 23.05G of "
               "15.48G hbm. Exceeded hbm capacity by 7.5G."]:
    assert aot._required_temp(text) == int(23.05 * 2**30)
  assert aot._required_temp("RESOURCE_EXHAUSTED: something else") is None
  p = aot.Program(100, output_bytes=40, alias_bytes=30, temp_bytes=7, code_bytes=3)
  assert p.hbm_bytes == 100 + 40 - 30 + 7 + 3


def test_bytes_as_a_layout_tiles_them():
  f32 = np.float32
  # The last dimension (64) padded to the tile's 128: twice the logical bytes.
  assert aot.layout_bytes((2, 64, 4, 64), f32, Layout((0, 1, 2, 3), ((4, 128),))) == (
      2 * 64 * 4 * 128 * 4)
  # The same array with its 512 minor needs no padding; with 64 minor it does.
  assert aot.layout_bytes((512, 64), f32, Layout((1, 0), ((8, 128),))) == 512 * 64 * 4
  assert aot.layout_bytes((512, 64), f32, Layout((0, 1), ((8, 128),))) == 512 * 128 * 4
  assert aot.layout_bytes((2, 64), f32, Layout((0, 1), ((2, 128),))) == 2 * 128 * 4
  assert aot.layout_bytes((3, 5), f32, Layout((0, 1), ((8, 128),))) == 8 * 128 * 4
  assert aot.layout_bytes((), np.int32, Layout((), ((128,),))) == 128 * 4  # a scalar
  assert aot.layout_bytes((3, 5), f32, Layout((0, 1))) == 3 * 5 * 4  # no tiles: a CPU
  assert aot.layout_bytes((), f32, Layout(())) == 4


def test_flags_of_the_dry_run():
  rest, opts = cli_flags.split_dry_run_flags(["--dry-run", "--compile=v5e:4x4", "--json",
                                              "--headroom=0.2", "--config.seed=1"])
  assert rest == ["--dry-run", "--config.seed=1"]
  assert opts == cli_flags.DryRunFlags("v5e:4x4", True, 0.2)
  assert cli_flags.split_dry_run_flags(["--compile"])[1].compile == ""
  with pytest.raises(UserError, match="--headroom"):
    cli_flags.split_dry_run_flags(["--headroom=1.5"])


def test_dry_run_reads_no_data(tmp_path, monkeypatch, capsys):
  monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))  # empty: opening c4 would fail
  assert cli.run(["sweep", "--config=sweeps/configs/tpu_v5p.py", "--dry-run", "--json"]) == 0
  got = json.loads(capsys.readouterr().out)
  assert len(got["cells"]) == 35 and {"N", "hbm_bytes_per_chip", "fits"} <= set(got["cells"][0])
  assert os.listdir(tmp_path) == []


def _dry_run_prices_first_cell(module, path, peak_text, peak_flops, first_name, first_time,
                               tmp_path, monkeypatch, capsys):
  """The dry run of `path` names the target's peak and prices its first cell at 30% of it:
  `first_time` is written by hand, and checked here against 6·N·D / (0.3 · peak)."""
  monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
  assert cli.run(["sweep", f"--config={path}", "--dry-run"]) == 0
  out = capsys.readouterr().out
  assert peak_text in out
  first = spec_lib.resolve(module.get_config(), str(tmp_path)).cells[0]
  assert first.name == first_name
  seconds = 6.0 * first.N * first.D / (0.3 * peak_flops)
  assert abs(seconds - float(first_time.rstrip("s"))) <= 0.5, (seconds, first_time)
  row = next(l for l in out.splitlines() if l.startswith(first.name))
  assert row.split()[-1] == first_time, row


def test_dry_run_times_cells_on_the_target_slice(tmp_path, monkeypatch, capsys):
  # 1e17 FLOPs at 30% of 16 x 459 TFLOP/s: 45.4 s.
  _dry_run_prices_first_cell(tpu_v5p, "sweeps/configs/tpu_v5p.py",
                             "peak of the target v5p:2x2x4", 459e12 * 16, "C1e17-N8.84e6",
                             "45s", tmp_path, monkeypatch, capsys)


def test_dry_run_times_cells_on_a_gpu_node(tmp_path, monkeypatch, capsys):
  # 1e17 FLOPs at 30% of 8 x 989 TFLOP/s: 42.1 s.
  _dry_run_prices_first_cell(gpu_node, "sweeps/configs/gpu_node.py",
                             "8 x 9.89e14 FLOP/s peak of the target h100:8", 989e12 * 8,
                             "C1e17-N8.84e6", "42s", tmp_path, monkeypatch, capsys)
  # No XLA target config ships for an A100: it is priced, and compiled for on the node only.
  assert cli.run(["sweep", "--config=sweeps/configs/gpu_node.py", "--dry-run",
                  "--compile=a100:8"]) == 2
  assert "no XLA target config ships for a100" in capsys.readouterr().err
  assert cli.run(["sweep", "--config=sweeps/configs/gpu_node.py", "--dry-run",
                  "--config.target=b200:8"]) == 2
  assert "a GPU node is NAME:COUNT with NAME one of h100, h200, a100" in capsys.readouterr().err
  assert hardware.gpu_node("v5e:16") is None  # a TPU family is never read as a GPU node


def test_compile_needs_a_target(capsys):
  assert cli.run(["sweep", "--config=sweeps/configs/tiny.py", "--dry-run", "--compile"]) == 2
  assert "--compile needs a target" in capsys.readouterr().err


@pytest.mark.skipif(aot.has_libtpu(), reason="libtpu is installed here")
def test_a_tpu_target_without_libtpu_is_one_line(capsys):
  assert cli.run(["sweep", "--config=sweeps/configs/tpu_v5p.py", "--dry-run", "--compile"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "pip install 'chinchax[tpu]'" in err[0]


def test_the_largest_cell_of_each_budget_compiles_first():
  cells = spec_lib.resolve(tpu_v5p.get_config(), "unused").cells
  order = readiness.compile_order(cells)
  assert sorted(order) == list(range(len(cells)))
  budgets = sorted({x.budget for x in cells}, reverse=True)
  head = [cells[i] for i in order[:len(budgets)]]
  assert [x.budget for x in head] == budgets
  assert all(x.N == max(y.N for y in cells if y.budget == x.budget) for x in head)
  rest = [cells[i].N for i in order[len(budgets):]]
  assert rest == sorted(rest, reverse=True)


@pytest.mark.slow
def test_each_compile_says_its_cell_hbm_and_seconds(tmp_path, monkeypatch):
  """The progress line is a table row: a dry run cut short still leaves its table."""
  monkeypatch.setenv("CHINCHAX_COMPILE_CACHE", str(tmp_path))
  spec = spec_lib.resolve(tiny.get_config(), "unused")
  cell, lines = spec.cells[0], []
  (row,) = readiness.check([cell], spec.config, jax.devices()[:1], None, say=lines.append)
  seconds = row.train.compile_s + row.eval.compile_s
  assert len(lines) == 1 and lines[0].startswith("compiled 1/1 (")
  assert lines[0].endswith(f"{cell.name} {row.hbm / 2**30:.2f} GiB/chip, "
                           f"compiled in {seconds:.0f} s")
  (again,) = readiness.check([cell], spec.config, jax.devices()[:1], None, say=lines.append)
  assert again.hbm == row.hbm and lines[1].endswith(f"compiled in {seconds:.0f} s (read from "
                                                    "the cache)")


@pytest.mark.slow
def test_a_cell_that_does_not_fit_is_refused_with_the_setting_that_fits():
  """On this CPU, with a budget set between the cell's HBM with and without remat."""
  spec = spec_lib.resolve(tiny.get_config(), "unused")
  # remat saves activations between layers: the deepest cell shows it
  c, cell = spec.config, max(spec.cells, key=lambda x: (x.shape.n_layers, x.N))
  devices = jax.devices()[:1]
  (free,) = readiness.check([cell], c, devices, budget=None)
  assert free.fits is None and free.hbm > 0  # CPU: no capacity, nothing decided
  minimal = dataclasses.replace(free.setup, model=dataclasses.replace(free.setup.model,
                                                                      remat="minimal"))
  with_remat = max(p.hbm_bytes for p in aot.compile_setup(minimal, devices) if p)
  assert with_remat < free.hbm
  budget = (with_remat + free.hbm) // 2
  lines = []
  (row,) = readiness.check([cell], c, devices, budget=budget, say=lines.append)
  assert lines[0].startswith("compiled 1/1") and lines[0].endswith(", DOES NOT FIT")
  assert row.fits is False and row.remedy == ("--config.train.model.remat=minimal",)
  assert row.remedy_hbm <= budget
  line = dry_run.refusal(row)
  assert line.startswith(f"{cell.name}: refused: needs ") and "fits with" in line
  assert "\n" not in line
