r"""FSDP shown, not claimed: HBM per chip of one ~1B-parameter train step compiled ahead of time
for v5p slices of 8, 16 and 32 chips, under `fsdp` and `shard_grad_op`.

    pip install "chinchax[tpu]"            # libtpu: compiles for a TPU topology on this CPU
    python bench/aot_fsdp_bench.py [--n=1e9] [--batch=32] [--seq=2048] [--remat=full]
                                   [--slices=v5p:2x2x2,v5p:2x2x4,v5p:2x4x4]

Mesh (1, chips, 1): every chip on the `fsdp` axis. Per chip it prints the bytes of the
parameters and of the optimizer state as the compiled program holds them (each shard padded to
the memory tiles of the layout the compiler chose for it: `aot.layout_bytes`), the program's
arguments, temporaries and peak HBM (`memory_analysis()`), and the compile time. Under `fsdp`
parameters, gradients and AdamW's two moments are split over the chips, so the state per chip
falls as 1/chips; under `shard_grad_op` the parameters stay whole on every chip and only the
optimizer state (and the gradients' reduce-scatter) is split. The global batch is fixed, so the
activations per chip fall with the slice too.

Measured with libtpu 0.0.42 (jax 0.10.2) on one shared CPU core (compile seconds under load):

    N = 992,630,912 (d_model 1664 x 26 layers, d_ff 4608), batch 32 x 2048, remat full
    slice      chips mode           params/chip  opt/chip    args   temps  HBM/chip compile s (GiB)
    v5p:2x2x2      8 fsdp                  0.46      0.92    1.39    4.34      5.76       177
    v5p:2x2x2      8 shard_grad_op         3.70      0.92    4.62    5.43     10.08       187
    v5p:2x2x4     16 fsdp                  0.23      0.46    0.69    2.25      2.98       171
    v5p:2x2x4     16 shard_grad_op         3.70      0.46    4.16    4.07      8.26       155
    v5p:2x4x4     32 fsdp                  0.12      0.25    0.37    1.33      1.74       173
    v5p:2x4x4     32 shard_grad_op         3.70      0.25    3.95    1.25      5.23       182

The parameters are 4N bytes = 3.70 GiB: whole under shard_grad_op, 3.70/chips under fsdp; the
two AdamW moments are 8N/chips under both (0.92, 0.46, 0.23 GiB). On 32 chips the tiles show:
the moments take 0.25 GiB, not 0.23, as the compiled layouts pad shards to whole tiles (1/32 of
d_model 1664 is 52 columns, of d_ff 4608 144: neither a multiple of 128).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chinchax.models import config  # noqa: E402
from chinchax.models.config import ModelConfig  # noqa: E402
from chinchax.scaling.runs import conventions  # noqa: E402
from chinchax.sweeps.accel import aot  # noqa: E402
from chinchax.sweeps.chips import hardware  # noqa: E402
from chinchax.sweeps.train import optimizer

GiB = hardware.GiB


def per_chip_bytes(tree, formats) -> int:
  """Bytes one chip holds of `tree` as the compiled program lays it out: each leaf's shard,
  padded to its layout's memory tiles (`aot.layout_bytes`)."""
  import jax  # pylint: disable=g-import-not-at-top
  fmts = jax.tree.leaves(formats, is_leaf=lambda f: hasattr(f, "layout"))
  return sum(aot.layout_bytes(f.sharding.shard_shape(x.shape), x.dtype, f.layout)
             for x, f in zip(jax.tree.leaves(tree), fmts, strict=True))


def measure(setup: aot.Setup, devices) -> dict:
  low = aot.lower(setup, devices, with_eval=False)
  t = time.perf_counter()
  compiled = low.train.compile()
  seconds = time.perf_counter() - t
  state_in = compiled.input_formats[0][0]
  m = compiled.memory_analysis()
  return {
      "params": per_chip_bytes(low.state["params"], state_in["params"]),
      "opt": per_chip_bytes(low.state["opt_state"], state_in["opt_state"]),
      "args": m.argument_size_in_bytes, "temps": m.temp_size_in_bytes,
      "hbm": (m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
              + m.temp_size_in_bytes + m.generated_code_size_in_bytes),
      "compile_s": seconds}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--n", type=float, default=1e9)
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--seq", type=int, default=2048)
  p.add_argument("--remat", default="full")
  p.add_argument("--slices", default="v5p:2x2x2,v5p:2x2x4,v5p:2x4x4")
  args = p.parse_args()
  shape = config.shape_for_params(args.n, vocab_size=32000, seq_len=args.seq)
  N = conventions.params(shape)
  print(f"N = {N:,} (d_model {shape.d_model} x {shape.n_layers} layers, d_ff {shape.d_ff}), "
        f"batch {args.batch} x {args.seq}, bf16 compute, f32 parameters and AdamW moments, "
        f"remat {args.remat}; whole state 12 N = {12 * N / GiB:.2f} GiB")
  print(f"{'slice':<10} {'chips':>5} {'mode':<14} {'params/chip':>11} {'opt/chip':>9} "
        f"{'args':>7} {'temps':>7} {'HBM/chip':>9} {'compile s':>9}   (GiB)")
  model = ModelConfig(shape, compute_dtype="bfloat16", remat=args.remat)
  for spec in args.slices.split(","):
    target = hardware.parse_target(spec)
    devices = aot.target_devices(target)
    for mode in ("fsdp", "shard_grad_op"):
      setup = aot.Setup(model, optimizer.OptimizerConfig(), 1000, (1, -1, 1), mode, args.batch)
      r = measure(setup, devices)
      print(f"{target.name:<10} {target.chips:>5} {mode:<14} {r['params'] / GiB:>11.2f} "
            f"{r['opt'] / GiB:>9.2f} {r['args'] / GiB:>7.2f} {r['temps'] / GiB:>7.2f} "
            f"{r['hbm'] / GiB:>9.2f} {r['compile_s']:>9.0f}", flush=True)


if __name__ == "__main__":
  main()
