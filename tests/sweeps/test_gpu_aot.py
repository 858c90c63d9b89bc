"""Compiling for GPU nodes on this CPU (deviceless). The compiles need jax's CUDA plugin and
ptxas (`pip install 'chinchax[gpu-compile]'`) and are skipped with that reason without them;
the GPU table, the budget and the missing-plugin message are checked everywhere."""

import importlib.util
import os
import re

import pytest

from chinchax.errors import UserError
from chinchax import cli
from chinchax.sweeps.accel import gpu_aot
from chinchax.sweeps.chips import hardware
from tests.helpers import aot_util

ROOT = aot_util.ROOT
needs_plugin = pytest.mark.skipif(
    gpu_aot.missing() is not None,
    reason="needs jax's CUDA plugin and ptxas to compile for a GPU without one: "
           "pip install 'chinchax[gpu-compile]'")


def test_gpu_nodes_are_parsed_into_nodes_of_eight():
  one = hardware.gpu_node("h100:1")
  assert (one.nodes, one.gpus_per_node, one.topology) == (1, 1, "1x1x1")
  two = hardware.gpu_node("H100:16")
  assert (two.nodes, two.gpus_per_node, two.topology, two.name) == (2, 8, "1x2x8", "h100:16")
  assert hardware.gpu_node("h200:8").gpu.hbm_bytes > hardware.gpu_node("h100:8").gpu.hbm_bytes
  with pytest.raises(UserError, match="whole nodes of 8"):
    hardware.gpu_node("h100:12")
  assert hardware.gpu_node("v5p:2x2x4") is None
  with pytest.raises(UserError, match="a GPU node is NAME:COUNT, e.g. h100:8"):
    hardware.parse_target("h100:2x4")  # not a count: read as a topology, named as a GPU's


def test_the_gpu_table_agrees_with_the_shipped_specs():
  """Each card's memory in the table is its XLA spec's device_memory_size, read here from the
  file that ships with chinchax (package data)."""
  shipped = [g for g in hardware.GPUS.values() if g.target_config]
  assert {g.name for g in shipped} == {"h100", "h200"}
  for g in shipped:
    text = gpu_aot.target_config(g)
    size = int(re.search(r"device_memory_size: (\d+)", text).group(1))
    assert size == g.hbm_bytes, g.name
    assert "collective_memory_granularity" not in text  # jaxlib 0.10.2's proto lacks it
  with pytest.raises(UserError, match="no XLA target config ships for a100"):
    gpu_aot.target_config(hardware.GPUS["a100"])


def test_the_pool_is_the_fraction_jax_may_preallocate(monkeypatch):
  h100 = hardware.GPUS["h100"]
  monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
  assert gpu_aot.pool_bytes(h100) == int(0.75 * 84_942_979_072)
  monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")  # what launch/gpu.py sets
  assert gpu_aot.pool_bytes(h100) == int(0.9 * 84_942_979_072)
  for bad in ("lots", "1.5", "0"):
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", bad)
    with pytest.raises(UserError, match="XLA_PYTHON_CLIENT_MEM_FRACTION"):
      gpu_aot.mem_fraction()


def test_a_missing_plugin_or_ptxas_is_one_line_naming_the_extra(monkeypatch, capsys):
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec",
                      lambda name, *a: None if name.startswith("jax_plugins") else real(name, *a))
  assert cli.run(["sweep", "--config=tiny", "--dry-run", "--compile=h100:8"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "pip install 'chinchax[gpu-compile]'" in err, err
  assert "CUDA plugin" in err
  monkeypatch.setattr(importlib.util, "find_spec",
                      lambda name, *a: object() if name.startswith("jax_plugins") else (
                          None if name == "nvidia" else real(name, *a)))
  monkeypatch.setenv("PATH", "/nonexistent")
  assert gpu_aot.missing() == ("ptxas (the CUDA compiler) is not installed or on PATH: "
                               "pip install 'chinchax[gpu-compile]'")


@pytest.fixture(scope="module")
def compiled() -> dict:
  return aot_util.run_aot_check_script(
      os.path.join(ROOT, "tests", "helpers", "gpu_aot_check.py"),
      env={"JAX_PLATFORMS": "cpu"})


@needs_plugin
@pytest.mark.slow  # a process that compiles five programs for H100s (about 25 s of CPU)
def test_arguments_per_gpu_shard_under_fsdp(compiled):
  """A small cell on 1 x H100 and on a 2 x 4 (data x fsdp) mesh of 8: the program's argument
  bytes per GPU are, exactly, f32 parameters and AdamW's two moments (12 N) split over fsdp,
  the int32 inputs and targets split over all 8, and three 4-byte scalars (step, AdamW's
  count, learning rate); a GPU lays them out without tiles."""
  assert compiled["device_kind"] == "NVIDIA H100 80GB HBM3"
  N, batch = compiled["N"], 2 * compiled["batch"] * compiled["seq_len"] * 4
  one, mesh = compiled["small"]["1"], compiled["small"]["2x4"]
  assert one["train"]["argument_bytes"] == 12 * N + batch + 12
  assert mesh["train"]["argument_bytes"] == 12 * N // 4 + batch // 8 + 12
  for got in (one, mesh):
    assert got["train"]["error"] is None and got["train"]["temp_bytes"] > 0
    # the eval step runs beside the resident train state: its peak counts the whole state
    assert got["eval"]["argument_bytes"] == got["train"]["argument_bytes"]
    # FLOPs from the HLO text (cost_analysis() is None for a deviceless executable), against
    # the analytic Chinchilla count: matmuls dominate, the embedding is a gather.
    assert 0.85 < got["train"]["flops"] / compiled["analytic_flops"] < 1.1
  assert one["train"]["temp_bytes"] > mesh["train"]["temp_bytes"]  # 16 sequences vs 2 a GPU


@needs_plugin
@pytest.mark.slow
def test_a_cell_past_the_budget_is_refused_with_the_remedy(compiled):
  """6.4e9 parameters data-parallel on 8 H100s: XLA compiles it (a GPU compiler refuses
  nothing), and the dry run refuses it against the pool (75% of 79.1 GiB, 10% kept free),
  naming FSDP over the node, which fits."""
  big = compiled["large"]
  assert compiled["capacity"] == int(0.75 * hardware.GPUS["h100"].hbm_bytes)
  assert big["train"]["error"] is None
  assert big["train"]["argument_bytes"] >= 12 * compiled["N_large"] > big["budget"]
  assert big["fits"] is False and big["hbm"] > big["budget"]
  assert big["remedy"] == ["--config.train.mesh.data=1", "--config.train.mesh.fsdp=-1"]
  assert big["remedy_hbm"] <= big["budget"]
  assert big["refusal"].startswith("C1-Nlarge: refused: needs 110 GiB of HBM per chip > 53.4")
  assert big["refusal"].endswith(f"({big['remedy_hbm'] / 2**30:.3g} GiB/chip)")


@needs_plugin
@pytest.mark.slow
def test_two_nodes_cross_on_the_outer_axis(compiled):
  """h100:16 is two processes of 8 GPUs; a mesh's data axis (outermost) crosses them, unless
  it is 1 and fsdp spans all 16."""
  assert compiled["processes"] == [0, 1]
  assert compiled["cross_node"] == {"2x8x1": ["data"], "1x16x1": ["fsdp"],
                                    "16x1x1": ["data"], "2x4x2": ["data"]}


def test_attention_compiled_without_cudnn_is_said(monkeypatch):
  """A bf16 cell runs cuDNN's fused attention on a GPU; where cuDNN does not load, the
  deviceless compile writes attention out, and the dry run's text and JSON say so."""
  import types  # pylint: disable=g-import-not-at-top
  from chinchax.models.config import ModelConfig  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.runs.conventions import Shape  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.accel import gpu_budget  # pylint: disable=g-import-not-at-top
  shape = Shape(d_model=256, n_layers=2, n_heads=4, d_ff=688, vocab_size=512, seq_len=512)
  row = lambda dtype: types.SimpleNamespace(setup=types.SimpleNamespace(
      model=ModelConfig(shape, compute_dtype=dtype)))
  gpu = [types.SimpleNamespace(platform="gpu")]
  monkeypatch.setattr(gpu_aot, "cudnn_loads", lambda: False)
  assert gpu_budget._attention_written_out([row("float32"), row("bfloat16")], gpu)
  assert not gpu_budget._attention_written_out([row("float32")], gpu)  # xla there anyway
  assert not gpu_budget._attention_written_out([row("bfloat16")],
                                               [types.SimpleNamespace(platform="tpu")])
  monkeypatch.setattr(gpu_aot, "cudnn_loads", lambda: True)
  assert not gpu_budget._attention_written_out([row("bfloat16")], gpu)
  assert "pip install nvidia-cudnn-cu12" in gpu_aot.NO_CUDNN
