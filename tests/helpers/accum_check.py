"""One train step with gradient accumulation against the same step on the whole batch.

    python tests/accum_check.py MESH   # e.g. 2,2,2; prints one JSON line of measurements

`measure` is also called in-process by tests/test_step_accum.py (one device); run as a script
it is started in a subprocess with forced CPU devices. It measures; the test file asserts.

The gradients are compared as such (an optax.trace(decay=0) in front of the optimizer keeps
them in its state): the Adam step alone (about -lr·sign(g) at step one) would hide a wrongly
scaled gradient. The parameters are compared after that one step of the training optimizer,
all of them as one vector. The batch carries a mask that gives each microbatch a different
number of counted tokens, so a plain mean over microbatches (instead of the token-weighted
one) would show.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from chinchax.models import sharding, sharding as mesh_lib  # noqa: E402
from chinchax.models.config import ModelConfig  # noqa: E402
from chinchax.scaling.runs.conventions import Shape  # noqa: E402
from chinchax.sweeps.train import optimizer  # noqa: E402
from chinchax.sweeps.train import step as step_lib  # noqa: E402

SHAPE = Shape(d_model=32, n_layers=2, n_heads=2, d_ff=96, vocab_size=64, seq_len=16)
CFG = ModelConfig(SHAPE, compute_dtype="float32")
# The training optimizer (clipping, AdamW, decay mask) at a constant LR, behind
# trace(decay=0), which passes the gradient on unchanged and keeps it in its state.
OPT = optax.chain(optax.trace(decay=0.0), optimizer.make(optimizer.OptimizerConfig(), 3e-3))
K = 4  # microbatches
FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def batch(rows: int) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, SHAPE.vocab_size, (rows, SHAPE.seq_len + 1)).astype(np.int32)
  # Row r counts its first 2 + 3·(r mod K) targets: microbatch i (rows i, i+K, ...) has
  # fewer tokens than microbatch i+1.
  counted = 2 + 3 * (np.arange(rows) % K)
  mask = (np.arange(SHAPE.seq_len)[None, :] < counted[:, None]).astype(np.int32)
  return {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "mask": mask}


def rel(a, b) -> float:
  """max over leaves of |a - b| / |b| (Frobenius norms, float64)."""
  return float(max(
      np.linalg.norm(np.asarray(x, np.float64) - np.asarray(y, np.float64)) /
      max(np.linalg.norm(np.asarray(y, np.float64)), 1e-30)
      for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))))


def flat(tree) -> np.ndarray:
  return np.concatenate([np.ravel(x) for x in jax.tree.leaves(tree)])


def steps(mesh, opt: optax.GradientTransformation, init: dict, b: dict) -> dict:
  """Params and metrics after one step, whole batch (1) and in K microbatches (K)."""
  _, shard = step_lib.state_shardings(CFG, opt, mesh)
  # Host arrays: device_put then makes a fresh device copy for each (donating) step.
  host = jax.device_get(
      {"params": init["params"], "opt_state": opt.init(init["params"]), "step": init["step"]})
  b = jax.device_put(b, sharding.batch_sharding(mesh, sharding.RULES))
  out = {}
  for k in (1, K):
    fn = step_lib.make_train_step(CFG, opt, mesh, global_batch_size=b["inputs"].shape[0],
                                  grad_accum=k)
    state = jax.device_put(host, shard)
    lr = np.float32(0.0)  # the step's learning rate argument: OPT has its own constant LR
    state, metrics = fn.lower(state, b, lr).compile(compiler_options=FAST)(state, b, lr)
    out[k] = jax.device_get(state), jax.device_get(metrics)
  return out


def random_state(mesh) -> dict:
  """Parameters of the model's shapes drawn on the host: no init program to compile."""
  abstract, _ = step_lib.state_shardings(CFG, OPT, mesh)
  rng = np.random.default_rng(1)
  params = jax.tree.map(lambda x: rng.normal(0, 0.1, x.shape).astype(x.dtype),
                        abstract["params"])
  return {"params": params, "step": np.zeros((), np.int32)}


def measure(mesh) -> dict:
  rows = 2 * K * sharding.batch_divisor(mesh, sharding.RULES)
  b = batch(rows)
  init = random_state(mesh)
  out = steps(mesh, OPT, init, b)
  (s1, m1), (sk, mk) = out[1], out[K]
  p1, pk = s1["params"], sk["params"]
  return {"rows": rows, "devices": int(mesh.size),
          "grad_rel": rel(sk["opt_state"][0].trace, s1["opt_state"][0].trace),
          "params_rel": rel(flat(pk), flat(p1)),
          "adamw_moved": rel(p1, init["params"]),
          "loss_1": float(m1["loss"]), "loss_k": float(mk["loss"]),
          "tokens_1": float(m1["tokens"]), "tokens_k": float(mk["tokens"]),
          "grad_norm_1": float(m1["grad_norm"]), "grad_norm_k": float(mk["grad_norm"])}


if __name__ == "__main__":
  shape = tuple(int(n) for n in sys.argv[1].split(","))
  print(json.dumps(measure(mesh_lib.make_mesh(shape))))
