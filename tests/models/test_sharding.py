"""Sharded training equals single-device training; shards have the shapes the rules imply.

The multi-device measurements run in a subprocess on 8 forced CPU devices
(tests/sharding_check.py); the refusals that need only one device run here.
"""

import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import optax
import pytest

from chinchax.errors import UserError
from chinchax.models import sharding, sharding as mesh_lib
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps.train import step as step_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = Shape(d_model=64, n_layers=2, n_heads=4, d_ff=192, vocab_size=256, seq_len=32)
N_TINY = 139_584  # scaling.runs.conventions.params(TINY): 2·256·64 + 2·(4·64² + 3·64·192 + 128) + 64


@pytest.fixture(scope="module")
def measured():
  env = {**os.environ, "PYTHONPATH": ROOT, "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
         "JAX_PLATFORMS": "cpu"}
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "helpers", "sharding_check.py")],
                        env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


MESHES = ["(8, 1, 1)", "(1, 8, 1)", "(2, 2, 2)", "(1, 2, 4)"]


@pytest.mark.slow
@pytest.mark.parametrize("mesh", MESHES)
def test_loss_gradients_and_three_steps_equal_single_device(measured, mesh):
  m = measured["meshes"][mesh]
  assert m["loss_rel"] <= 1e-5
  assert m["grad_rel"] <= 1e-5
  assert m["params_rel"] <= 1e-5
  assert m["moved"] > 0.1  # the three steps really changed the parameters


@pytest.mark.slow
@pytest.mark.parametrize("mesh", MESHES)
def test_every_shard_has_the_shape_the_rules_imply(measured, mesh):
  m = measured["meshes"][mesh]
  assert m["shards"] == m["expected"]
  assert m["mu_shards"] == m["expected"]  # optimizer state follows the parameters


@pytest.mark.slow
def test_fsdp_and_tensor_parallel_really_split(measured):
  meshes = measured["meshes"]
  assert measured["n_params"] == N_TINY
  assert meshes["(8, 1, 1)"]["per_device_params"] == N_TINY  # pure data parallel: replicas
  assert meshes["(1, 8, 1)"]["per_device_params"] == N_TINY // 8  # every matrix split on d
  # Hand-derived shards: w_up is layers x d x f = 2 x 64 x 192.
  assert meshes["(1, 8, 1)"]["shards"]["['layers']['mlp']['w_up']"] == [2, 8, 192]
  assert meshes["(1, 2, 4)"]["shards"]["['layers']['mlp']['w_up']"] == [2, 32, 48]
  assert meshes["(2, 2, 2)"]["shards"]["['layers']['attn']['w_o']"] == [2, 2, 16, 32]
  assert meshes["(1, 2, 4)"]["shards"]["['embed']['embedding']"] == [64, 32]
  assert meshes["(1, 2, 4)"]["shards"]["['w_out']"] == [32, 64]


@pytest.mark.slow
def test_init_directly_on_shards_gives_the_single_device_values(measured):
  # (2, 2, 2) started from this sharded init; its trajectory matched above as well.
  assert measured["sharded_init_rel"] == 0.0


def test_only_a_small_state_is_initialised_on_the_host():
  cpu = jax.local_devices(backend="cpu")[0]
  f32 = lambda n: {"w": jax.ShapeDtypeStruct((n,), jnp.float32)}
  assert step_lib.host_for_init(f32(2**28)) == cpu  # 1 GiB exactly: the host makes it
  assert step_lib.host_for_init(f32(2**28 + 1)) is None  # 4 bytes more: on the devices


def test_several_processes_initialise_on_the_devices(monkeypatch):
  # Each process would need the whole state on its host: the devices make their shards.
  f32 = {"w": jax.ShapeDtypeStruct((8,), jnp.float32)}
  assert step_lib.host_for_init(f32) is not None
  monkeypatch.setattr(jax, "process_count", lambda: 2)
  assert step_lib.host_for_init(f32) is None


@pytest.mark.slow
def test_init_on_the_host_then_put_on_the_shards_gives_the_same_state(measured):
  # The accelerator's path for a small state (step._init_fn with a host device), run here
  # with the host device outside a 4-device mesh: every leaf, optimizer state and step too.
  h = measured["host_init"]
  assert not h["jitted_onto_the_mesh"]
  assert h["rel"] == 0.0
  assert h["shardings_match"]
  assert h["devices"] == h["mesh_devices"] == [4, 5, 6, 7]


@pytest.mark.slow
def test_shard_grad_op_replicates_params_shards_state_and_matches(measured):
  z = measured["zero2"]
  assert z["params_rel"] <= 1e-5
  assert z["per_device_params"] == N_TINY
  assert z["per_device_mu"] == N_TINY // 8


@pytest.mark.slow
def test_state_saved_under_one_mesh_restores_under_another(measured):
  r = measured["restore"]
  assert r["max_abs"] == 0.0 and r["step"] == 3
  assert r["shardings_match"]
  assert r["w_up_shard"] == [2, 32, 48]  # laid out for (1, 2, 4), saved from (1, 8, 1)


@pytest.mark.parametrize("case, match", [
    ("tensor_splits_heads_unevenly", r"params\['layers'\]\['attn'\]\['w_k'\] has a dimension of 4 that mesh axes \('tensor',\) \(8 devices\)"),
    ("batch_not_divisible", "batch 12 does not split over 8 data-parallel shards"),
    ("mesh_of_7", "has 7 devices but the job has 8"),
])
@pytest.mark.slow
def test_multi_device_refusals(measured, case, match):
  assert re.search(match, measured["refusals"][case]), measured["refusals"][case]


# ---------------------------------------------------------------- one-device refusals


@pytest.fixture
def no_compile(monkeypatch):
  """Refusals must come before anything is traced or compiled."""
  def boom(*a, **k):
    raise AssertionError("jit reached before the refusal")
  monkeypatch.setattr(jax, "jit", boom)
  monkeypatch.setattr(jax, "eval_shape", boom)


def test_mesh_that_does_not_match_the_devices_is_refused():
  with pytest.raises(UserError, match="has 2 devices but the job has 1"):
    mesh_lib.make_mesh((2, 1, 1), jax.devices()[:1])
  with pytest.raises(UserError, match="at most one -1"):
    mesh_lib.make_mesh((-1, -1, 1))
  with pytest.raises(UserError, match="one size per axis"):
    mesh_lib.make_mesh((1, 1))
  assert mesh_lib.resolve_shape((2, -1, 2), 16) == (2, 4, 2)


def test_heads_that_do_not_divide_d_model_are_refused(no_compile):
  mesh = mesh_lib.make_mesh((1, 1, 1), jax.devices()[:1])
  cfg = ModelConfig(Shape(64, 2, 3, 192, 256, 32))
  with pytest.raises(UserError, match="n_heads=3 does not divide d_model=64"):
    step_lib.make_train_step(cfg, optax.adamw(1e-3), mesh)


def test_rules_naming_an_unknown_mesh_axis_are_refused(no_compile):
  mesh = mesh_lib.make_mesh((1, 1, 1), jax.devices()[:1])
  rules = tuple(("mlp", "model") if name == "mlp" else (name, t) for name, t in sharding.RULES)
  with pytest.raises(UserError, match="'mlp' -> 'model' names a mesh axis that does not exist"):
    step_lib.make_train_step(ModelConfig(TINY), optax.adamw(1e-3), mesh, rules=rules)
  with pytest.raises(UserError, match="mode 'zero9'"):
    step_lib.make_train_step(ModelConfig(TINY), optax.adamw(1e-3), mesh, mode="zero9")


def test_shard_grad_op_rules_drop_fsdp_from_parameters_only():
  r = dict(sharding.param_rules(sharding.RULES, "shard_grad_op"))
  assert r["embed"] is None and r["mlp"] == "tensor"
  assert r["batch"] == ("data", "fsdp") and r["act_batch"] == ("data", "fsdp")


def test_multi_slice_mesh_puts_slices_on_the_data_axis():
  import dataclasses

  @dataclasses.dataclass(frozen=True)
  class FakeTpu:  # what mesh_utils reads from a device; no TPU needed
    id: int
    slice_index: int
    platform: str = "cpu"
    device_kind: str = "cpu"
    process_index: int = 0

  devices = [FakeTpu(i, i // 4) for i in range(8)]
  grid = mesh_lib.make_mesh((4, 2, 1), devices).devices
  assert grid.shape == (4, 2, 1)
  slice_of = [[d.slice_index for d in grid[i].flat] for i in range(4)]
  assert slice_of == [[0, 0], [0, 0], [1, 1], [1, 1]]  # fsdp/tensor never cross a slice
  with pytest.raises(UserError, match="2 TPU slices need data=1 to be a multiple of 2"):
    mesh_lib.make_mesh((1, 4, 2), devices)
