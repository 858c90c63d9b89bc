"""Compiles a small train step ahead of time for a target (8 forced CPU devices, or a TPU
topology given as argv[1]) under fsdp and shard_grad_op; prints one JSON line of what the
compiled programs say. Started by tests/sweeps/test_aot.py and test_readiness_tpu.py, which
assert; the device count must be fixed before jax starts."""

import json
import math
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402

from chinchax.models.config import ModelConfig  # noqa: E402
from chinchax.scaling.runs import conventions  # noqa: E402
from chinchax.scaling.runs.conventions import Shape  # noqa: E402
from chinchax.sweeps.accel import aot  # noqa: E402
from chinchax.sweeps.chips import hardware  # noqa: E402
from chinchax.sweeps.train import optimizer

SHAPE = Shape(d_model=256, n_layers=2, n_heads=4, d_ff=512, vocab_size=512, seq_len=128)


def specs(tree) -> dict:
  flat, _ = jax.tree_util.tree_flatten_with_path(
      tree, is_leaf=lambda s: isinstance(s, jax.sharding.Sharding))
  return {jax.tree_util.keystr(p): [list(a) if isinstance(a, tuple) else a for a in s.spec]
          for p, s in flat if isinstance(s, jax.sharding.NamedSharding)}


def arguments(compiled) -> list[dict]:
  """Each argument of the program (state, batch, lr) as one device holds it: its shard's
  shape and its bytes, logical and as the compiled layout tiles it (`aot.layout_bytes`)."""
  formats = jax.tree_util.tree_flatten_with_path(
      compiled.input_formats, is_leaf=lambda f: isinstance(f, jax.sharding.Sharding))[0]
  avals = jax.tree.leaves(compiled.in_avals)
  assert len(formats) == len(avals), (len(formats), len(avals))
  out = []
  for (path, f), a in zip(formats, avals):
    shard = f.sharding.shard_shape(a.shape)
    out.append({"path": jax.tree_util.keystr(path), "shard": list(shard), "dtype": str(a.dtype),
                "tiling": [list(t) for t in f.layout.tiling or ()],
                "logical": math.prod(shard) * a.dtype.itemsize,
                "tiled": aot.layout_bytes(shard, a.dtype, f.layout)})
  return out


def main() -> None:
  target = hardware.parse_target(sys.argv[1]) if len(sys.argv) > 1 else None
  devices = aot.target_devices(target)
  out = {"devices": len(devices), "N": conventions.params(SHAPE), "modes": {}}
  model = ModelConfig(SHAPE, compute_dtype="bfloat16")
  for mode in ("fsdp", "shard_grad_op"):
    setup = aot.Setup(model, optimizer.OptimizerConfig(), 100, (1, -1, 1), mode, 16)
    low = aot.lower(setup, devices, with_eval=False)
    compiled = low.train.compile()
    state_in, state_out = compiled.input_shardings[0][0], compiled.output_shardings[0]
    m = compiled.memory_analysis()
    out["modes"][mode] = {
        "params": specs(state_in["params"]), "opt": specs(state_in["opt_state"]),
        "params_out": specs(state_out["params"]), "opt_out": specs(state_out["opt_state"]),
        "arguments": arguments(compiled),
        "argument_bytes": m.argument_size_in_bytes, "alias_bytes": m.alias_size_in_bytes}
  print(json.dumps(out))


if __name__ == "__main__":
  main()
