"""Train-step MFU and tokens/s of the gpu_node config's decoders on this machine's GPUs, and
their compiled memory against what a deviceless compile predicted for the same cells.

    python bench/gpu_bench.py                 # on one H100/H200: ~50M, ~350M, ~1B, context 2048
    python bench/gpu_bench.py --smoke         # tiny sizes on a CPU (tests/sweeps/test_gpu_bench.py)
    python bench/gpu_bench.py --sizes=1e9 --batch=8 --steps=20
    python bench/gpu_bench.py --gemm-margin   # no GPU: Triton GEMMs against cuBLAS, temporaries
    python bench/gpu_bench.py --K=1,16        # the one-step program beside the trainer's chunk
    python bench/gpu_bench.py --attention=xla # the written-out attention, not cuDNN's fused one

Each size is the recipe's shape (`models.config.shape_for_params`, vocabulary 32000) with sweeps/configs/
gpu_node.py's numerics (bf16 compute, f32 parameters), remat, sharding and mesh over every
local device (its fsdp capped at their count: one GPU holds the whole state); the batch is `--batch` sequences per device. The train step is the one a run
jits (`sweeps.accel.aot.lower`: with `--K` above 1, `sweeps.train.step.make_train_chunk`'s K
steps per dispatch over K stacked batches, as the trainer runs it with gpu_node.py's
`steps_per_dispatch`; with K = 1, `make_train_step`'s one step), compiled here, then timed over
`--steps` steps (rounded up to whole chunks) after `--warmup` dispatches. MFU is the
analytic Chinchilla FLOPs per step (`scaling.runs.conventions`, attention included) over the step
time times the dense bf16 peak (`sweeps.chips.hardware`); `mfu_6nd` counts 6N per token.

Beside it a process with JAX_PLATFORMS=cpu compiles the same steps for the card from its XLA
spec, with no GPU (`sweeps.accel.gpu_aot`, the dry run's path), and `memory.ratio` is the
on-device peak (arguments + outputs - aliased + temporaries + code) over that prediction. On
a CPU (`--smoke`) the prediction is for one H100 (the gpu-compile extra), so only its argument
bytes are comparable: parameters, optimizer state and batch are laid out alike.
`--gemm-margin` needs no GPU: the same cells compiled for one H100 with GEMMs as Triton fusions
(what XLA does without a GPU to autotune on) and with cuBLAS forced; on a shared 2-core
machine (165 s) their temporaries differed by +0.5%, +0.3%, -0.2% (11.5, 10.8, 12.8 GiB
with Triton), and the predicted peaks, 12.1, 14.8 and 23.9 GiB, fit an H100's 53.4 GiB budget.
Prints one JSON object. Goals on one H100: MFU >= 25% at 50M, >= 45% at 350M, the deviceless
memory within 10% of the on-device figure.

Measured on one H200 (2026-11-27, jax 0.11.2, cuDNN in the machine's image; the prediction for
h200:1 compiled on that machine's CPU), batch 16/8/4 x 2048, K = 16 unless said:

    attention        50M: ms/step  MFU    350M: ms/step  MFU    1B: ms/step  MFU    memory vs predicted
    cudnn (default)        33.0   38.6%         92.9   46.8%        126.1   46.2%   +0.0%, +0.0%, +0.2%
    xla (written out)     144.4    8.8%        182.8   23.8%        213.2   27.3%   +0.2%, +0.3%, +0.1%

(xla: 350M and 1B at K = 1; K = 16 was within 1.5% of K = 1 at every size, dispatch being
negligible at these step times. MFU counts Chinchilla FLOPs, attention included.)
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's chinchax, not an installed one
if "--predict" in sys.argv:
  os.environ["JAX_PLATFORMS"] = "cpu"  # the CUDA plugin starts without a GPU only so

import jax  # noqa: E402  pylint: disable=wrong-import-position
import jax.numpy as jnp  # noqa: E402  pylint: disable=wrong-import-position
import numpy as np  # noqa: E402  pylint: disable=wrong-import-position

from chinchax.models import sharding  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.models import sharding as mesh_lib  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.models.config import ModelConfig  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.models.config import shape_for_params  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.scaling.runs import conventions  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.sweeps.accel import aot, gpu_aot  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.sweeps.chips import hardware  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.sweeps.configs import gpu_node  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.sweeps.train import optimizer  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.sweeps.train import step as step_lib  # noqa: E402  pylint: disable=wrong-import-position

FULL = dict(sizes="50e6,350e6,1e9", batch="16,8,4", seq_len=2048, vocab=32000, steps=10)
SMOKE = dict(sizes="2e5", batch="2", seq_len=64, vocab=512, steps=2)


def parse(argv) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--smoke", action="store_true", help="tiny sizes, runs on a CPU in seconds")
  p.add_argument("--sizes", help=f"parameter counts (default {FULL['sizes']})")
  p.add_argument("--batch", help="sequences per device, one per size or one for all "
                                 f"(default {FULL['batch']})")
  p.add_argument("--seq-len", type=int)
  p.add_argument("--vocab", type=int)
  p.add_argument("--steps", type=int, help="timed steps per size (default 10)")
  p.add_argument("--warmup", type=int, default=2, help="untimed dispatches first")
  p.add_argument("--attention", help="the model's attention kernel: auto | xla | cudnn "
                                     "(default: gpu_node.py's)")
  p.add_argument("--K", help="train steps per dispatch, one or more (default: gpu_node.py's "
                             "steps_per_dispatch, the trainer's chunk; 1: the one-step program)")
  p.add_argument("--gemm-margin", action="store_true",
                 help="no GPU needed: temporaries of the deviceless compile for one H100 with "
                      "GEMMs as Triton fusions against cuBLAS forced")
  p.add_argument("--predict", help=argparse.SUPPRESS)  # internal: TARGET, deviceless only
  args = p.parse_args(argv)
  for k, v in (SMOKE if args.smoke else FULL).items():
    if getattr(args, k) is None:
      setattr(args, k, v)
  if args.attention is None:
    args.attention = gpu_node.get_config().train.model.attention
  if args.K is None:
    args.K = str(gpu_node.get_config().train.steps_per_dispatch)
  try:
    args.Ks = [int(k) for k in args.K.split(",")]
  except ValueError:
    p.error(f"--K={args.K!r}: give whole numbers of steps per dispatch, e.g. 1,16")
  if any(k < 1 for k in args.Ks):
    p.error(f"--K={args.K!r}: each must be at least 1")
  return args


def setups(args, n_devices: int) -> list[aot.Setup]:
  """One setup per size and K: the recipe's shape with gpu_node.py's numerics and sharding."""
  t = gpu_node.get_config().train
  sizes = [float(x) for x in args.sizes.split(",")]
  batch = [int(x) for x in args.batch.split(",")]
  batch = batch * len(sizes) if len(batch) == 1 else batch
  if len(batch) != len(sizes):
    raise SystemExit(f"--batch: give one per size ({len(sizes)}) or one for all")
  out = []
  for N, b in zip(sizes, batch):
    shape = shape_for_params(N, vocab_size=args.vocab, seq_len=args.seq_len)
    model = ModelConfig(shape, compute_dtype=t.model.compute_dtype,
                        param_dtype=t.model.param_dtype, remat=t.model.remat, z_loss=t.model.z_loss,
                        attention=args.attention)
    for K in args.Ks:
      out.append(aot.Setup(model, optimizer.OptimizerConfig(**t.optimizer.to_dict()), 1000,
                           mesh_for(t.mesh, n_devices), t.sharding, b * n_devices, K=K))
  return out


def mesh_for(m, n_devices: int) -> tuple[int, int, int]:
  """The config's mesh on the devices present: its fsdp (8, a node) capped at their count."""
  fsdp = math.gcd(m.fsdp, n_devices) if m.fsdp > 0 else m.fsdp
  return (-1, fsdp, 1) if m.data == -1 else (m.data, fsdp, m.tensor)


def memory(p: aot.Program) -> dict:
  return {"hbm_bytes": p.hbm_bytes, "argument_bytes": p.argument_bytes,
          "output_bytes": p.output_bytes, "alias_bytes": p.alias_bytes,
          "temp_bytes": p.temp_bytes, "code_bytes": p.code_bytes}


def predict(args) -> None:
  """The deviceless compile of every size for args.predict (`h100:1`): one JSON line."""
  devices = aot.target_devices(hardware.gpu_node(args.predict))
  out = []
  for s in setups(args, len(devices)):
    train, _ = aot.compile_lowered(aot.lower(s, devices, with_eval=False))
    out.append({**memory(train), "compile_s": train.compile_s})
  print(json.dumps(out))


def _predict_argv(args, target: str) -> list[str]:
  return [sys.executable, os.path.abspath(__file__), f"--predict={target}",
          f"--sizes={args.sizes}", f"--batch={args.batch}", f"--seq-len={args.seq_len}",
          f"--vocab={args.vocab}", f"--K={args.K}", f"--attention={args.attention}"]


def gemm_margin(args) -> None:
  """Deviceless compiles for one H100 as XLA compiles without a GPU (GEMMs as Triton
  fusions) and with cuBLAS forced (--xla_gpu_enable_triton_gemm=false): what a GPU's
  autotuner choosing cuBLAS may add to the temporaries. Prints one JSON object."""
  why = gpu_aot.missing()
  if why:
    raise SystemExit(why)
  got = {}
  for name, flags in (("triton", ""), ("cublas", "--xla_gpu_enable_triton_gemm=false")):
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""), flags]).strip()}
    done = subprocess.run(_predict_argv(args, "h100:1"), env=env, capture_output=True,
                          text=True, check=True)
    got[name] = json.loads(done.stdout.strip().splitlines()[-1])
  cells = [{"N": conventions.params(s.model.shape), "batch": s.batch_size, "triton": t,
            "cublas": c, "temp_ratio": c["temp_bytes"] / t["temp_bytes"],
            "hbm_ratio": c["hbm_bytes"] / t["hbm_bytes"]}
           for s, t, c in zip(setups(args, 1), got["triton"], got["cublas"])]
  print(json.dumps({"target": "h100:1", "cells": cells}, indent=1))


def start_prediction(args, devices) -> tuple[subprocess.Popen | None, str, str | None]:
  """(process, target, why not) of the deviceless compile, run beside the timing."""
  gpu = hardware.gpu_for_kind(devices[0].device_kind)
  if devices[0].platform == "cpu":
    gpu = hardware.GPUS["h100"]
  if gpu is None or gpu.target_config is None:
    return None, "", f"no XLA target config ships for {devices[0].device_kind!r}"
  why = gpu_aot.missing()
  if why:
    return None, "", why
  target = f"{gpu.name}:{len(devices)}"
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  return subprocess.Popen(_predict_argv(args, target), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True), target, None


def measure(s: aot.Setup, devices, args) -> dict:
  """Compiles the train step on these devices and times it."""
  low = aot.lower(s, devices, with_eval=False)
  t0 = time.perf_counter()
  compiled = low.train.compile()
  compile_s = time.perf_counter() - t0
  m = compiled.memory_analysis()
  on_device = aot.Program(int(m.argument_size_in_bytes), int(m.output_size_in_bytes),
                          int(m.alias_size_in_bytes), int(m.temp_size_in_bytes),
                          int(m.generated_code_size_in_bytes))
  # The state as a run makes it, on the shardings the step was lowered for (same mesh).
  mesh = mesh_lib.make_mesh(s.mesh, devices)
  state = step_lib.init_train_state(s.model.validate(), optimizer.make(s.optimizer), mesh,
                                    jax.random.key(0), mode=s.mode)
  seq = s.model.shape.seq_len
  tokens = jax.random.randint(jax.random.key(1), (s.batch_size, seq + 1), 0,
                              s.model.shape.vocab_size, jnp.int32)
  batch = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:]}
  bs = sharding.batch_sharding(mesh, sharding.RULES)
  if s.K == 1:
    step_args = (jax.device_put(batch, bs), np.float32(1e-4))
  else:  # the trainer's chunk: K stacked batches (one batch repeated), K rates, n = K steps
    chunk = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, *bs.spec))
    step_args = (jax.device_put({k: jnp.broadcast_to(x, (s.K, *x.shape)) for k, x in batch.items()},
                                chunk),
                 np.full(s.K, 1e-4, np.float32), np.int32(s.K))
  for _ in range(args.warmup):
    state, metrics = compiled(state, *step_args)
  jax.block_until_ready((state, metrics))
  dispatches = -(-args.steps // s.K)
  t0 = time.perf_counter()
  for _ in range(dispatches):
    state, metrics = compiled(state, *step_args)
  jax.block_until_ready((state, metrics))
  step_s = (time.perf_counter() - t0) / (dispatches * s.K)
  shape = s.model.shape
  per_step = lambda convention: conventions.flops_per_token(shape, convention) * s.batch_size * seq
  peak = hardware.peak_flops(devices[0])
  mfu = lambda convention: (per_step(convention) / (step_s * peak * len(devices))
                            if peak else None)
  return {"N": conventions.params(shape), "shape": [shape.d_model, shape.n_layers,
                                                    shape.n_heads, shape.d_ff],
          "batch": s.batch_size, "seq_len": seq, "K": s.K,
          "attention": s.model.attention_kernel(devices[0].platform), "compile_s": compile_s,
          "step_s": step_s,
          "tokens_per_s": s.batch_size * seq / step_s, "mfu": mfu("chinchilla"),
          "mfu_6nd": mfu("6ND"), "loss": float(metrics["loss"]),
          "memory": {"on_device": memory(on_device)}}


def main(argv=None) -> None:
  args = parse(argv)
  if args.predict:
    predict(args)
    return
  if args.gemm_margin:
    gemm_margin(args)
    return
  devices = jax.local_devices()
  proc, target, why = start_prediction(args, devices)
  cells = [measure(s, devices, args) for s in setups(args, len(devices))]
  predicted = None
  if proc:
    out, err = proc.communicate()
    if proc.returncode == 0:
      predicted = json.loads(out.strip().splitlines()[-1])
    else:  # the timing stands; say why the prediction is missing
      why = f"the deviceless compile failed: {(err.strip().splitlines() or ['?'])[-1][:300]}"
  for cell, p in zip(cells, predicted or [None] * len(cells)):
    m = cell["memory"]
    m["predicted"] = p
    m["ratio"] = m["on_device"]["hbm_bytes"] / p["hbm_bytes"] if p else None
  t = gpu_node.get_config().train
  print(json.dumps({
      "device": devices[0].device_kind, "devices": len(devices),
      "peak_flops_per_device": hardware.peak_flops(devices[0]),
      "config": "gpu_node", "remat": t.model.remat, "sharding": t.sharding,
      "mesh": list(mesh_lib.resolve_shape(mesh_for(t.mesh, len(devices)), len(devices))),
      "prediction_target": target or None, "prediction_missing": why, "cells": cells,
  }, indent=1))


if __name__ == "__main__":
  main()
