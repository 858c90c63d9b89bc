"""Runs the sharded train step on 8 forced CPU devices; prints one JSON line of measurements.

Started by tests/test_sharding.py in a subprocess, because the device count must be fixed
(XLA_FLAGS=--xla_force_host_platform_device_count=8) before jax initialises. It measures;
the test file asserts.

Gradients are read from AdamW's first moment after one step: mu_1 = (1 - b1)·g exactly, so
equal mu_1 on two meshes means equal gradients.
"""

import json
import os
import sys
import tempfile

# Both sides of every comparison compile under the same flags; the cheap LLVM settings
# halve the compile time that dominates this check.
os.environ["XLA_FLAGS"] = os.environ.get(
    "XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0 "
    "--xla_llvm_disable_expensive_passes=true")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402

from chinchax.errors import UserError  # noqa: E402
from chinchax.models import sharding, sharding as mesh_lib  # noqa: E402
from chinchax.models.config import ModelConfig  # noqa: E402
from chinchax.scaling.runs.conventions import Shape  # noqa: E402
from chinchax.sweeps.train import step as step_lib  # noqa: E402

SHAPE = Shape(d_model=64, n_layers=2, n_heads=4, d_ff=192, vocab_size=256, seq_len=32)
CFG = ModelConfig(SHAPE, compute_dtype="float32")
OPT = optax.adamw(1e-2)
MESHES = [(8, 1, 1), (1, 8, 1), (2, 2, 2), (1, 2, 4)]


def rel(a, b) -> float:
  """max over leaves of |a - b| / |b| (Frobenius norms)."""
  errs = [np.linalg.norm(np.asarray(x, np.float64) - np.asarray(y, np.float64)) /
          max(np.linalg.norm(np.asarray(y, np.float64)), 1e-30)
          for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))]
  return float(max(errs))


def run(state, step_fn, batches):
  """(losses, mu after step 1, params after all steps) as host arrays."""
  losses, mu1 = [], None
  for i, b in enumerate(batches):
    state, metrics = step_fn(state, b, np.float32(0.0))  # OPT's own LR; the argument is unused
    losses.append(float(metrics["loss"]))
    if i == 0:
      mu1 = jax.device_get(state["opt_state"][0].mu)
  return losses, mu1, jax.device_get(state["params"]), state


def shard_shapes(tree) -> dict[str, list]:
  flat, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {jax.tree_util.keystr(p): list(x.addressable_shards[0].data.shape) for p, x in flat}


def expected_shapes(mesh, rules) -> dict[str, list]:
  boxed = jax.eval_shape(lambda: step_lib.decoder.init_params(CFG, jax.random.key(0)))
  flat, _ = jax.tree_util.tree_flatten_with_path(
      boxed, is_leaf=lambda x: isinstance(x, nn.Partitioned))
  return {jax.tree_util.keystr(p): list(sharding.shard_shape(x.value.shape, x.names, mesh, rules))
          for p, x in flat}


def per_device_elements(tree) -> int:
  return sum(int(np.prod(x.addressable_shards[0].data.shape)) for x in jax.tree.leaves(tree))


def refusals() -> dict[str, str]:
  out = {}
  cases = {
      "tensor_splits_heads_unevenly": lambda: step_lib.make_train_step(
          CFG, OPT, mesh_lib.make_mesh((1, 1, 8))),
      "batch_not_divisible": lambda: step_lib.make_train_step(
          CFG, OPT, mesh_lib.make_mesh((2, 4, 1)), global_batch_size=12),
      "mesh_of_7": lambda: mesh_lib.make_mesh((7, 1, 1)),
  }
  for name, f in cases.items():
    try:
      f()
      out[name] = "no error"
    except UserError as e:
      out[name] = str(e)
  return out


def main() -> None:
  assert jax.device_count() == 8, jax.devices()
  rng = np.random.default_rng(0)
  batches = [{"inputs": rng.integers(0, 256, (8, 32)).astype(np.int32),
              "targets": rng.integers(0, 256, (8, 32)).astype(np.int32)} for _ in range(3)]
  out = {"refusals": refusals(), "meshes": {}}

  one = mesh_lib.make_mesh((1, 1, 1), jax.devices()[:1])
  init0 = step_lib.init_train_state(CFG, OPT, one, jax.random.key(0))
  init0_host = jax.device_get(init0)
  ref_losses, ref_mu1, ref_params, _ = run(init0, step_lib.make_train_step(CFG, OPT, one), batches)
  out["n_params"] = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(ref_params))

  for shape in MESHES:
    mesh = mesh_lib.make_mesh(shape)
    if shape == (2, 2, 2):  # initialised on its shards: the same values as on one device
      state = step_lib.init_train_state(CFG, OPT, mesh, jax.random.key(0))
      out["sharded_init_rel"] = rel(jax.device_get(state["params"]), init0_host["params"])
    else:
      _, shard = step_lib.state_shardings(CFG, OPT, mesh)
      state = jax.device_put(init0_host, shard)
    if shape == (1, 2, 4):  # made on a host device outside the mesh, then put on its shards
      host = jax.devices()[0]
      mesh_4 = mesh_lib.make_mesh((1, 2, 2), jax.devices()[4:])
      _, shard_4 = step_lib.state_shardings(CFG, OPT, mesh_4)
      init = step_lib._init_fn(CFG, OPT, mesh_4, step_lib._hashable(sharding.RULES), "fsdp",
                               host=host)
      put = init(jax.random.key(0))
      out["host_init"] = {
          "jitted_onto_the_mesh": hasattr(init, "lower"),  # the other path: one jit
          "rel": rel(jax.device_get(put), init0_host),
          "shardings_match": all(a.sharding == s for a, s in
                                 zip(jax.tree.leaves(put), jax.tree.leaves(shard_4))),
          "devices": sorted({d.id for a in jax.tree.leaves(put) for d in a.devices()}),
          "mesh_devices": sorted(d.id for d in mesh_4.devices.flat)}
    losses, mu1, params, final = run(state, step_lib.make_train_step(CFG, OPT, mesh), batches)
    out["meshes"][str(shape)] = {
        "loss_rel": max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses)),
        "grad_rel": rel(mu1, ref_mu1),
        "params_rel": rel(params, ref_params),
        "moved": rel(params, init0_host["params"]),
        "shards": shard_shapes(final["params"]),
        "mu_shards": shard_shapes(final["opt_state"][0].mu),
        "expected": expected_shapes(mesh, sharding.RULES),
        "per_device_params": per_device_elements(final["params"]),
    }
    if shape == (1, 8, 1):
      saved = final

  # ZeRO-2: parameters replicated over fsdp, optimizer state sharded, same trajectory.
  mesh = mesh_lib.make_mesh((1, 8, 1))
  _, shard = step_lib.state_shardings(CFG, OPT, mesh, mode="shard_grad_op")
  step_fn = step_lib.make_train_step(CFG, OPT, mesh, mode="shard_grad_op")
  _, _, params, final = run(jax.device_put(init0_host, shard), step_fn, batches)
  out["zero2"] = {"params_rel": rel(params, ref_params),
                  "per_device_params": per_device_elements(final["params"]),
                  "per_device_mu": per_device_elements(final["opt_state"][0].mu)}

  # A state saved under (1, 8, 1) restores under (1, 2, 4) with equal values.
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "state")
    with ocp.StandardCheckpointer() as ckpt:
      ckpt.save(path, saved)
    target_mesh = mesh_lib.make_mesh((1, 2, 4))
    abstract, shard = step_lib.state_shardings(CFG, OPT, target_mesh)
    with ocp.StandardCheckpointer() as ckpt:
      restored = ckpt.restore(path, abstract)
  out["restore"] = {
      "max_abs": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in
                     zip(jax.tree.leaves(jax.device_get(restored)),
                         jax.tree.leaves(jax.device_get(saved)))),
      "step": int(restored["step"]),
      "shardings_match": all(
          a.sharding == s for a, s in zip(jax.tree.leaves(restored), jax.tree.leaves(shard))),
      "w_up_shard": list(restored["params"]["layers"]["mlp"]["w_up"]
                         .addressable_shards[0].data.shape),
  }
  print(json.dumps(out))


if __name__ == "__main__":
  sys.exit(main())
