"""Input-pipeline throughput per host process, against what a ~50M model consumes.

    PYTHONPATH=. python bench/data_bench.py [--batch=32] [--seq=1024] [--steps=100]
        [--tokenizer=bytes|spm --spm_model=PATH] [--data_dir=DIR] [--corpus=PATH]
        [--model_batch=1] [--model_steps=3] [--model_dtype=float32|bfloat16]

Prints (one figure per line):
  * open_dataset wall time, first call (build + tokenise, unless already cached) and second;
  * train_batch tokens/s: batch assembly from the memory-mapped packed stream (sample order +
    gather), numpy only: the per-host cost of a training step's input;
  * global_batch tokens/s: the same plus `make_array_from_process_local_data` onto this
    process's devices;
  * model tokens/s, measured: real train steps (`sweeps.train.step`, the training optimizer) of a
    ~50M decoder on this process's devices, `model_batch` x `seq` tokens of the dataset per
    step, input included; the median over `model_steps` steps after one compile-and-warm-up
    step. This is what one host's devices consume; the input pipeline must stay well above it;
  * alongside it, the matmul bound: this device's f32 matmul rate at the decoder's MLP shape
    divided by its training FLOPs per token (Chinchilla count from `scaling.runs.conventions`),
    i.e. what the model would consume with no attention, softmax or optimizer overhead.
"""

import argparse
import dataclasses
import os
import statistics
import shutil
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chinchax.models import sharding as mesh_lib
from chinchax.models import sharding as sharding_lib
from chinchax.models.config import ModelConfig
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.sweeps.data import multihost
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.train import optimizer
from chinchax.sweeps.train import step as step_lib

# ~50M parameters (total, byte vocabulary): 10 layers of d=640 with a SwiGLU MLP of 1728.
SHAPE_50M = dict(d_model=640, n_layers=10, n_heads=10, d_ff=1728, tied=False, gated=True)


def rate(fn, n_items: float, steps: int) -> float:
  fn(0)  # warm-up: page in the memmap, compile.
  t = time.perf_counter()
  for k in range(1, steps + 1):
    fn(k)
  return n_items * steps / (time.perf_counter() - t)


def matmul_flops_per_s(d: int, f: int, tokens: int, reps: int = 10) -> float:
  x = jnp.ones((tokens, d), jnp.float32)
  w = jnp.ones((d, f), jnp.float32)
  mm = jax.jit(lambda x, w: (x @ w) @ w.T)
  mm(x, w).block_until_ready()
  t = time.perf_counter()
  for _ in range(reps):
    y = mm(x, w)
  y.block_until_ready()
  return 2 * 2 * tokens * d * f * reps / (time.perf_counter() - t)


def train_tokens_per_s(shape: conventions.Shape, data_cfg: pipeline.DataConfig, batch: int,
                       steps: int, dtype: str) -> tuple[float, float]:
  """(compile + first step seconds, median tokens/s) of real train steps on the data's batches."""
  ds = pipeline.open_dataset(dataclasses.replace(data_cfg, batch_size=batch))  # cached tokens
  cfg = ModelConfig(shape, compute_dtype=dtype)
  mesh = mesh_lib.make_mesh((-1, 1, 1))
  tx = optimizer.make(optimizer.OptimizerConfig(), 1e-4)
  state = step_lib.init_train_state(cfg, tx, mesh, jax.random.key(0))
  train_step = step_lib.make_train_step(cfg, tx, mesh, global_batch_size=batch)
  batch_sharding = sharding_lib.batch_sharding(mesh, sharding_lib.RULES)
  times = []
  for k in range(steps + 1):
    t = time.perf_counter()
    state, m = train_step(state, multihost.global_batch(ds, k, batch_sharding), np.float32(1e-4))
    jax.block_until_ready(m)
    times.append(time.perf_counter() - t)
  return times[0], batch * shape.seq_len / statistics.median(times[1:])


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--seq", type=int, default=1024)
  p.add_argument("--steps", type=int, default=100)
  p.add_argument("--tokenizer", default="bytes")
  p.add_argument("--spm_model", default=None)
  p.add_argument("--corpus", default=None, help="default: the stdlib corpus")
  p.add_argument("--data_dir", default=None, help="default: a fresh temporary directory")
  p.add_argument("--model_batch", type=int, default=1, help="sequences per measured train step")
  p.add_argument("--model_steps", type=int, default=3, help="timed train steps")
  p.add_argument("--model_dtype", default="float32", choices=("float32", "bfloat16"))
  a = p.parse_args()
  data_dir = a.data_dir or tempfile.mkdtemp(prefix="chinchax-bench-")
  try:
    run(a, data_dir)
  finally:
    if not a.data_dir:
      shutil.rmtree(data_dir, ignore_errors=True)


def run(a, data_dir: str):
  cfg = pipeline.DataConfig(corpus=a.corpus, data_dir=data_dir, tokenizer=a.tokenizer,
                            spm_model=a.spm_model, seq_len=a.seq, batch_size=a.batch, seed=0)
  t = time.perf_counter()
  ds = pipeline.open_dataset(cfg)
  first = time.perf_counter() - t
  t = time.perf_counter()
  ds = pipeline.open_dataset(cfg)
  second = time.perf_counter() - t
  tokens = a.batch * a.seq
  print(f"dataset {ds.tfds_name}: {ds.unique_tokens:,} train tokens ({a.tokenizer}), "
        f"{ds.order.W:,} windows of {a.seq}")
  print(f"open_dataset: first {first:.2f} s (build + tokenise), second {second:.2f} s (cached)")
  print(f"host cores: {os.cpu_count()}, devices: {jax.device_count()} x "
        f"{jax.devices()[0].platform}")

  r_np = rate(lambda k: pipeline.train_batch(ds, k), tokens, a.steps)
  print(f"train_batch {a.batch}x{a.seq}: {r_np:,.0f} tokens/s per host process")
  sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), P("data"))

  def to_device(k):
    jax.block_until_ready(multihost.global_batch(ds, k, sharding))

  r_dev = rate(to_device, tokens, a.steps)
  print(f"global_batch {a.batch}x{a.seq}: {r_dev:,.0f} tokens/s per host process (to device)")

  shape = conventions.Shape(vocab_size=ds.vocab_size, seq_len=a.seq, **SHAPE_50M)
  N = conventions.params(shape)
  fpt = conventions.flops_per_token(shape, "chinchilla")
  fps = matmul_flops_per_s(shape.d_model, shape.d_ff, tokens=4096)
  bound = fps / fpt
  print(f"model ~{N / 1e6:.1f}M params, {fmt.num(fpt)} training FLOPs/token (chinchilla); "
        f"device f32 matmul {fmt.num(fps)} FLOP/s")
  first, model = train_tokens_per_s(shape, cfg, a.model_batch, a.model_steps, a.model_dtype)
  print(f"model tokens/s MEASURED ({a.model_steps} train steps of {a.model_batch}x{a.seq}, "
        f"{a.model_dtype}, after {first:.1f} s compile + first step): {model:,.0f}")
  print(f"model tokens/s matmul bound (no attention/softmax/optimizer): {bound:,.0f} "
        f"(measured is {model / bound:.0%} of it)")
  print(f"input pipeline headroom: {r_np / model:,.0f}x the measured model consumption "
        f"(train_batch), {r_dev / model:,.0f}x (global_batch)")


if __name__ == "__main__":
  main()
