"""Train-step throughput of the chinchax decoder, side by side with nanodo's.

    python bench/step_bench.py [--sizes 0.46e6,3.3e6] [--vocab 258] [--seq-len 256]
                               [--batch 16] [--dtype bfloat16] [--steps 10] [--rounds 5]
                               [--nanodo /work/ext/nanodo] [--remat none] [--mesh 1,-1,1]
                               [--K 16]

For each size: the recipe's shape (`models.config.shape_for_params`, tied embeddings), chinchax's sharded
train state and jitted step (`sweeps.train.step`, the trainer's AdamW and cosine schedule), then, if
`--nanodo` names a nanodo checkout (github.com/google-deepmind/nanodo, read from that path, never
copied), nanodo's `TransformerDo` and `Trainer.step_fn` on the same devices, batch, sequence
length, dtype, vocabulary, width, depth and heads. nanodo's MLP is plain GELU (two matrices), so
it gets d_ff x 3/2: the same MLP parameters and matmul FLOPs as chinchax's SwiGLU.

The two alternate: `--rounds` rounds, each timing `--steps` steps of one and then of the other
(the batch put on the device every step, as a training loop does), so load from other
processes hits both alike. Prints compile seconds, the median tokens/s of each and the ratio
chinchax / nanodo, the same for tokens per CPU-second of the process (all its threads: on a
shared machine the work each needs, whatever the share of the cores it got), then MFU where
the device has a known peak (not on CPU). nanodo's
`clu.metric_writers` and `clu.periodic_actions` (which pull in TensorFlow) are stubbed here;
without the checkout the nanodo columns are skipped with a line saying so. `--K 16` times
chinchax's steps as the trainer dispatches them, 16 to a chunk (`make_train_chunk`); the smoke
sweep's train step, 8 x 64 tokens in float32 on one core, is timed that way:

    taskset -c 0 python bench/step_bench.py --sizes 1e4,4.8e4,1.76e5 --seq-len 64 --batch 8 \
        --dtype float32 --K 16 --steps 64 --rounds 3 --nanodo ''
"""

import argparse
import functools
import json
import os
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's chinchax, not an installed one

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from chinchax.models import sharding, sharding as mesh_lib  # pylint: disable=wrong-import-position
from chinchax.models.config import ModelConfig  # pylint: disable=wrong-import-position
from chinchax.models.config import shape_for_params  # pylint: disable=wrong-import-position
from chinchax.scaling.numerics import fmt  # pylint: disable=wrong-import-position
from chinchax.scaling.runs import conventions  # pylint: disable=wrong-import-position
from chinchax.sweeps.chips import hardware  # pylint: disable=wrong-import-position
from chinchax.sweeps.train import optimizer
from chinchax.sweeps.train import step as step_lib  # pylint: disable=wrong-import-position


def chinchax_runner(shape, args, mesh):
  """(compile seconds, run(k, tokens) -> seconds for k steps)."""
  cfg = ModelConfig(shape, compute_dtype=args.dtype, remat=args.remat).validate()
  opt_cfg = optimizer.OptimizerConfig(warmup_steps=10)
  tx = optimizer.make(opt_cfg)  # the trainer's: the learning rate is a step argument
  lr = optimizer.lr_table(opt_cfg, 10_000)
  state = step_lib.init_train_state(cfg, tx, mesh, jax.random.key(0))
  step = step_lib.make_train_step(cfg, tx, mesh, global_batch_size=args.batch)
  batch_sharding = sharding.batch_sharding(mesh, sharding.RULES)
  put = lambda t: jax.device_put({"inputs": t[:, :-1], "targets": t[:, 1:]}, batch_sharding)
  box = {"state": state, "t": 0}

  if args.K > 1:  # the trainer's path: K steps per dispatch over K stacked batches
    return _chunk_runner(cfg, tx, lr, mesh, args, box)

  def compile_it(tokens):
    t = time.perf_counter()
    box["step"] = step.lower(box["state"], put(tokens[0]), lr[0]).compile()
    return time.perf_counter() - t

  def run(tokens) -> tuple[float, float]:
    t, cpu = time.perf_counter(), time.process_time()
    for x in tokens:
      box["state"], m = box["step"](box["state"], put(x), lr[box["t"] % len(lr)])
      box["t"] += 1
    jax.block_until_ready((box["state"], m))
    return time.perf_counter() - t, time.process_time() - cpu

  return compile_it, run


def _stub_clu() -> None:
  """nanodo.train imports clu's writers and periodic actions, which import TensorFlow."""
  if "clu" in sys.modules:
    return
  clu = types.ModuleType("clu")
  clu.metric_writers = types.ModuleType("clu.metric_writers")
  clu.periodic_actions = types.ModuleType("clu.periodic_actions")
  sys.modules.update({"clu": clu, "clu.metric_writers": clu.metric_writers,
                      "clu.periodic_actions": clu.periodic_actions})


def nanodo_runner(shape, args, mesh_devices, path):
  """nanodo's model, state and Trainer.step_fn for `shape` (its own 1-axis 'data' mesh)."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  from jax.experimental import mesh_utils  # pylint: disable=g-import-not-at-top
  from jax.sharding import Mesh, NamedSharding, PartitionSpec  # pylint: disable=g-import-not-at-top

  if path not in sys.path:
    sys.path.insert(0, path)
  _stub_clu()
  from nanodo import model as nd_model  # pylint: disable=g-import-not-at-top
  from nanodo import train as nd_train  # pylint: disable=g-import-not-at-top

  c = ml_collections.ConfigDict()
  c.model = ml_collections.ConfigDict(dict(
      D=shape.d_model, H=shape.n_heads, L=args.seq_len, N=shape.n_layers,
      F=shape.d_ff * 3 // 2, dtype=args.dtype, fsdp_enabled=True, remat=args.remat != "none"))
  c.opt = ml_collections.ConfigDict(dict(
      num_train_steps=10_000, peak_learning_rate=3e-3, init_learning_rate=0.0,
      final_learning_rate=3e-4, warmup_steps=10, decay_type="cosine", weight_decay=0.1,
      clip_by_global_norm=1.0, optimizer="adamw"))
  c.log_internal_metrics = False
  c.grad_accumulation_steps = 1
  module = nd_model.TransformerDo(nd_model.DoConfig(**c.model, V=args.vocab))
  mesh = Mesh(mesh_utils.create_device_mesh((len(mesh_devices),), devices=mesh_devices),
              ("data",))
  shardings, state = nd_train._init_train_state(  # pylint: disable=protected-access
      c, module, rng=jax.random.PRNGKey(0), mesh=mesh)
  trainer = nd_train.Trainer(c=c, state=state, mesh=mesh, shardings=shardings)
  n_params = sum(x.size for x in jax.tree.leaves(state.params))
  in_sharding = NamedSharding(mesh, PartitionSpec())
  put = lambda t: jax.device_put(jnp.asarray(t[:, :-1]), in_sharding)

  def compile_it(tokens):
    t = time.perf_counter()
    trainer.step_fn = trainer.step_fn.lower(trainer.state, put(tokens[0])).compile()
    return time.perf_counter() - t

  def run(tokens) -> tuple[float, float]:
    t, cpu = time.perf_counter(), time.process_time()
    for x in tokens:
      m = trainer.do_step(0, put(x))  # step 0: nanodo's own loop passes the step number
    jax.block_until_ready((trainer.state, m))
    return time.perf_counter() - t, time.process_time() - cpu

  return compile_it, run, n_params


def _chunk_runner(cfg, tx, lr, mesh, args, box):
  """`make_train_chunk`'s K steps per dispatch (sweeps/train/loop.py's), timed like the step."""
  K = args.K
  chunk = step_lib.make_train_chunk(cfg, tx, mesh, global_batch_size=args.batch, K=K)
  stack = lambda t: {"inputs": t[:, :, :-1], "targets": t[:, :, 1:]}  # K x B x S
  lrs = lambda: np.asarray([lr[(box["t"] + i) % len(lr)] for i in range(K)], np.float32)

  def compile_it(tokens):
    t = time.perf_counter()
    box["chunk"] = chunk.lower(box["state"], stack(tokens[:K]), lrs(), np.int32(K)).compile()
    return time.perf_counter() - t

  def run(tokens) -> tuple[float, float]:
    t, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(tokens) - K + 1, K):
      box["state"], m = box["chunk"](box["state"], stack(tokens[i:i + K]), lrs(), np.int32(K))
      box["t"] += K
    jax.block_until_ready((box["state"], m))
    return time.perf_counter() - t, time.process_time() - cpu

  return compile_it, run


def bench_size(N: float, args, mesh) -> dict:
  shape = shape_for_params(N, vocab_size=args.vocab, seq_len=args.seq_len, tied=True)
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, args.vocab, (args.steps, args.batch, args.seq_len + 1)).astype(np.int32)
  runners = {"chinchax": chinchax_runner(shape, args, mesh)}
  n_nanodo = None
  if args.nanodo_ok:
    compile_it, run, n_nanodo = nanodo_runner(shape, args, list(mesh.devices.flat), args.nanodo)
    runners["nanodo"] = (compile_it, run)
  out = {"shape": shape, "N": conventions.params(shape), "N_nanodo": n_nanodo}
  for name, (compile_it, run) in runners.items():
    out[name + "_compile"] = compile_it(tokens)
    run(tokens[:max(2, args.K)])  # warm-up: first dispatches (a whole chunk), allocator
  times = {name: [] for name in runners}
  for _ in range(args.rounds):
    for name, (_, run) in runners.items():
      times[name].append(run(tokens))
  n_tokens = args.steps * args.batch * args.seq_len
  for name in runners:
    wall, cpu = np.median(np.asarray(times[name]), axis=0)
    out[name + "_tok_s"], out[name + "_tok_cpu_s"] = n_tokens / wall, n_tokens / cpu
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--sizes", default="0.46e6,3.3e6", help="comma-separated N targets")
  p.add_argument("--vocab", type=int, default=258)
  p.add_argument("--seq-len", type=int, default=256)
  p.add_argument("--batch", type=int, default=16, help="global batch (sequences)")
  p.add_argument("--steps", type=int, default=10, help="steps per timed round")
  p.add_argument("--K", type=int, default=1, help="chinchax's steps per dispatch: above 1, the "
                 "trainer's chunk (make_train_chunk); --steps is rounded up to whole chunks")
  p.add_argument("--rounds", type=int, default=5, help="alternating rounds (median taken)")
  p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
  p.add_argument("--remat", default="none", choices=("none", "minimal", "full"))
  p.add_argument("--mesh", default="1,-1,1", help="data,fsdp,tensor sizes (-1 fills)")
  p.add_argument("--nanodo", default="/work/ext/nanodo", help="a nanodo checkout ('' to skip)")
  p.add_argument("--json", action="store_true", help="one JSON line per size instead of the "
                 "table: N_target, N, compile_s, tok_s (chinchax's), for other scripts")
  args = p.parse_args()
  args.steps = -(-args.steps // args.K) * args.K
  args.nanodo_ok = bool(args.nanodo) and os.path.isfile(
      os.path.join(args.nanodo, "nanodo", "model.py"))

  mesh = mesh_lib.make_mesh([int(x) for x in args.mesh.split(",")])
  kind = jax.devices()[0].device_kind
  peak = hardware.peak_flops(jax.devices()[0])
  if not args.json:
    print(f"# {jax.device_count()} x {kind}, {os.cpu_count()} CPU cores, batch {args.batch} x "
          f"{args.seq_len}, {args.dtype}, vocab {args.vocab}, remat {args.remat}, "
          f"{args.rounds} alternating rounds of {args.steps} steps (median)")
  if not args.nanodo_ok and not args.json:
    print(f"# nanodo skipped: no nanodo checkout at {args.nanodo!r} (pass --nanodo=PATH)")
  cols = ["N target", "N", "d_model x L", "heads", "d_ff", "compile s", "tokens/s", "tok/cpu-s"]
  if args.nanodo_ok:
    cols += ["N nanodo", "nanodo compile s", "nanodo tok/s", "nanodo tok/cpu-s", "ratio",
             "ratio cpu"]
  if peak:
    cols += ["MFU 6N"]
  w = 12
  if not args.json:
    print("  ".join(f"{c:>{w}}" for c in cols))
  for N in (float(x) for x in args.sizes.split(",")):
    r = bench_size(N, args, mesh)
    s = r["shape"]
    if args.json:
      print(json.dumps({"N_target": N, "N": r["N"], "compile_s": r["chinchax_compile"],
                        "tok_s": r["chinchax_tok_s"]}), flush=True)
      continue
    row = [f"{fmt.num(N)}", f"{r['N']:,}", f"{s.d_model} x {s.n_layers}", s.n_heads, s.d_ff,
           f"{r['chinchax_compile']:.2f}", f"{r['chinchax_tok_s']:,.0f}",
           f"{r['chinchax_tok_cpu_s']:,.0f}"]
    if args.nanodo_ok:
      row += [f"{r['N_nanodo']:,}", f"{r['nanodo_compile']:.2f}", f"{r['nanodo_tok_s']:,.0f}",
              f"{r['nanodo_tok_cpu_s']:,.0f}", f"{r['chinchax_tok_s'] / r['nanodo_tok_s']:.2f}",
              f"{r['chinchax_tok_cpu_s'] / r['nanodo_tok_cpu_s']:.2f}"]
    if peak:
      fpt = conventions.flops_per_token(s, "6ND")
      row += [f"{fpt * r['chinchax_tok_s'] / (jax.device_count() * peak):.1%}"]
    print("  ".join(f"{str(c):>{w}}" for c in row), flush=True)


if __name__ == "__main__":
  main()
