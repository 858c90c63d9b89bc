"""Train-step throughput of the chinchax decoder over a list of model sizes.

    python bench/step_bench.py [--sizes 1e5,1e6,3e6] [--vocab 256] [--seq-len 128]
                               [--batch 8] [--steps 5] [--dtype bfloat16] [--remat none]
                               [--mesh 1,-1,1] [--mode fsdp]

For each size: the recipe's shape (`models.shapes`), the sharded train state and step
(`sweeps.step`, AdamW) on every device, then compile time, median step time, tokens/s and
model FLOPs utilisation

    MFU = (training FLOPs per token) x tokens/s / (devices x dense bf16 peak per device)

with FLOPs per token from `scaling.conventions` in both conventions (6N and Chinchilla's
App. F). Devices without a known peak (CPU) print tokens/s only. Peaks: H100/H200 989,
TPU v4 275, v5e 197, v5p 459 TFLOP/s.
"""

import argparse
import time

import jax
import numpy as np
import optax

from chinchax.models import mesh as mesh_lib, sharding
from chinchax.models.config import ModelConfig
from chinchax.models.shapes import shape_for_params
from chinchax.scaling import conventions
from chinchax.sweeps import step as step_lib

# device_kind substring -> dense bf16 FLOP/s per device; first match wins.
PEAKS = (("H100", 989e12), ("H200", 989e12), ("v5 lite", 197e12), ("v5e", 197e12),
         ("v5p", 459e12), ("TPU v5", 459e12), ("TPU v4", 275e12))


def peak_flops(kind: str) -> float | None:
  return next((p for k, p in PEAKS if k in kind), None)


def bench_one(N: float, args, mesh) -> dict:
  shape = shape_for_params(N, vocab_size=args.vocab, seq_len=args.seq_len)
  cfg = ModelConfig(shape, compute_dtype=args.dtype, remat=args.remat)
  opt = optax.adamw(1e-3)
  state = step_lib.init_train_state(cfg, opt, mesh, jax.random.key(0), mode=args.mode)
  step = step_lib.make_train_step(cfg, opt, mesh, mode=args.mode, global_batch_size=args.batch)
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, args.vocab, (args.batch, args.seq_len + 1)).astype(np.int32)
  batch = jax.device_put({"inputs": tokens[:, :-1], "targets": tokens[:, 1:]},
                         sharding.batch_sharding(mesh, sharding.RULES))
  t = time.perf_counter()
  compiled = step.lower(state, batch).compile()
  compile_s = time.perf_counter() - t
  state, metrics = compiled(state, batch)  # warm-up
  jax.block_until_ready(metrics)
  times = []
  for _ in range(args.steps):
    t = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready(metrics)
    times.append(time.perf_counter() - t)
  step_s = float(np.median(times))
  tok_s = args.batch * args.seq_len / step_s
  return {"shape": shape, "compile_s": compile_s, "step_s": step_s, "tok_s": tok_s,
          "fpt_6nd": conventions.flops_per_token(shape, "6ND"),
          "fpt_chin": conventions.flops_per_token(shape, "chinchilla")}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--sizes", default="1e5,1e6,3e6", help="comma-separated N targets")
  p.add_argument("--vocab", type=int, default=256)
  p.add_argument("--seq-len", type=int, default=128)
  p.add_argument("--batch", type=int, default=8, help="global batch (sequences)")
  p.add_argument("--steps", type=int, default=5)
  p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
  p.add_argument("--remat", default="none", choices=("none", "minimal", "full"))
  p.add_argument("--mesh", default="1,-1,1", help="data,fsdp,tensor sizes (-1 fills)")
  p.add_argument("--mode", default="fsdp", choices=sharding.MODES)
  args = p.parse_args()

  mesh = mesh_lib.make_mesh([int(x) for x in args.mesh.split(",")])
  kind = jax.devices()[0].device_kind
  peak = peak_flops(kind)
  n_dev = jax.device_count()
  print(f"# {n_dev} x {kind}, mesh {dict(mesh.shape)}, mode {args.mode}, batch {args.batch} x "
        f"{args.seq_len}, {args.dtype}, remat {args.remat}, peak "
        f"{'n/a' if peak is None else f'{peak / 1e12:.0f} TFLOP/s'}")
  cols = ["N total", "d_model", "layers", "d_ff", "compile s", "step ms", "tokens/s"]
  if peak:
    cols += ["MFU 6N", "MFU chinchilla"]
  print("  ".join(f"{c:>14}" for c in cols))
  for N in (float(x) for x in args.sizes.split(",")):
    r = bench_one(N, args, mesh)
    s = r["shape"]
    row = [f"{conventions.params(s):,}", s.d_model, s.n_layers, s.d_ff, f"{r['compile_s']:.2f}",
           f"{1e3 * r['step_s']:.1f}", f"{r['tok_s']:,.0f}"]
    if peak:
      row += [f"{r['fpt_6nd'] * r['tok_s'] / (n_dev * peak):.1%}",
              f"{r['fpt_chin'] * r['tok_s'] / (n_dev * peak):.1%}"]
    print("  ".join(f"{str(c):>14}" for c in row), flush=True)


if __name__ == "__main__":
  main()
