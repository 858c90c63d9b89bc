"""Compiles cells for H100 nodes on this CPU (jax's CUDA plugin, no GPU) and prints one JSON
line of what the compiled programs say. Started by tests/sweeps/test_gpu_aot.py, which
asserts; JAX_PLATFORMS=cpu must be set before jax starts (the plugin cannot start otherwise)."""

import json
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"

from chinchax.models import sharding as mesh_lib  # noqa: E402
from chinchax.models.config import ModelConfig  # noqa: E402
from chinchax.scaling.runs import conventions  # noqa: E402
from chinchax.scaling.runs.conventions import Shape  # noqa: E402
from chinchax.sweeps import dry_run, grid  # noqa: E402
from chinchax.sweeps.accel import aot, gpu_aot, readiness  # noqa: E402
from chinchax.sweeps.chips import hardware  # noqa: E402
from chinchax.sweeps.train import optimizer  # noqa: E402

SMALL = Shape(d_model=256, n_layers=2, n_heads=4, d_ff=512, vocab_size=512, seq_len=128)
# 6.4e9 parameters: f32 weights and AdamW's two moments, 12 N = 77 GB, outgrow one H100's pool.
LARGE = Shape(d_model=4096, n_layers=24, n_heads=32, d_ff=16384, vocab_size=512, seq_len=128)
BATCH = 16


def program(p: aot.Program | None) -> dict | None:
  return None if p is None else {"argument_bytes": p.argument_bytes, "temp_bytes": p.temp_bytes,
                                 "hbm_bytes": p.hbm_bytes, "flops": p.flops, "error": p.error}


def main() -> None:
  out = {"N": conventions.params(SMALL), "N_large": conventions.params(LARGE), "batch": BATCH,
         "seq_len": SMALL.seq_len, "small": {}}
  small = ModelConfig(SMALL, compute_dtype="bfloat16")
  one = aot.target_devices(hardware.gpu_node("h100:1"))
  eight = aot.target_devices(hardware.gpu_node("h100:8"))
  out["device_kind"] = one[0].device_kind
  out["capacity"] = aot.hbm_capacity(one)
  for name, devices, mesh in (("1", one, (1, 1, 1)), ("2x4", eight, (2, 4, 1))):
    setup = aot.Setup(small, optimizer.OptimizerConfig(), 100, mesh, "fsdp", BATCH)
    train, ev = aot.compile_setup(setup, devices)
    out["small"][name] = {"devices": len(devices), "train": program(train), "eval": program(ev)}
  out["analytic_flops"] = conventions.flops_per_token(SMALL, "chinchilla") * BATCH * SMALL.seq_len

  # Data parallel over 8 GPUs (mesh data 8): every GPU holds the whole state.
  setup = aot.Setup(ModelConfig(LARGE, compute_dtype="bfloat16"), optimizer.OptimizerConfig(),
                    100, (8, 1, 1), "fsdp", 16)
  cell = grid.Cell("C1-Nlarge", 1.0, out["N_large"], LARGE, 1.0, 1.0, 100, 16, 128, 1e-3, 10,
                   1.0, 1.0)
  budget = int(out["capacity"] * 0.9)
  train, ev = aot.compile_setup(setup, eight)
  row = readiness._remedy(readiness.Row(cell, setup, train, ev, budget, 8), eight, 1,  # pylint: disable=protected-access
                          lambda m: print(m, file=sys.stderr))
  out["large"] = {"budget": budget, "train": program(train), "eval": program(ev),
                  "hbm": row.hbm, "fits": row.fits, "remedy": list(row.remedy or []),
                  "remedy_hbm": row.remedy_hbm, "refusal": dry_run.refusal(row)}

  # Two nodes of 8: which mesh axes cross between them (no compile).
  sixteen = aot.target_devices(hardware.gpu_node("h100:16"))
  out["processes"] = sorted({d.process_index for d in sixteen})
  out["cross_node"] = {
      "x".join(map(str, m)): gpu_aot.cross_node_axes(mesh_lib.make_mesh(m, sixteen))
      for m in ((2, 8, 1), (1, 16, 1), (16, 1, 1), (2, 4, 2))}
  print(json.dumps(out))


if __name__ == "__main__":
  main()
