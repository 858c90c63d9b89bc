"""sweeps/accel/aot.py compiles the program the trainer runs: the train chunk of K steps
(sweeps/train/step.py `make_train_chunk`) with its K batches, per-step FLOPs against the
closed-form count, and the one-step program where the trainer keeps one step per dispatch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chinchax.models.config import ModelConfig
from chinchax.scaling.runs import conventions
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps import spec as spec_lib
from chinchax.sweeps.accel import aot, hlo_flops, readiness
from chinchax.sweeps.configs import tiny
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import optimizer
from chinchax.sweeps.train import setup as setup_lib


def test_a_loop_to_an_argument_counts_the_trips_it_is_given():
  """A fori_loop to a traced n (the chunk's) holds no trip count: once by default, unknown;
  `entry_trips` times when the caller knows them."""
  m, k = 16, 32
  x = jax.ShapeDtypeStruct((m, k), jnp.float32)
  w = jax.ShapeDtypeStruct((k, k), jnp.float32)
  f = lambda x, w, n: jax.lax.fori_loop(0, n, lambda i, h: jnp.tanh(h @ w), x)
  text = jax.jit(f).lower(x, w, jax.ShapeDtypeStruct((), jnp.int32)).compile().as_text()
  matmul = 2 * m * k * k
  once = hlo_flops.count(text)
  assert once.unknown_loops == 1 and once.flops == pytest.approx(matmul, rel=0.05)
  five = hlo_flops.count(text, entry_trips=5)
  assert five.unknown_loops == 0 and five.flops == pytest.approx(5 * matmul, rel=0.05)


def _tiny_cell(overrides: dict):
  c = tiny.get_config()
  for key, value in overrides.items():
    c.train[key] = value
  spec = spec_lib.resolve(c, "unused")
  return spec.cells[0], spec.config


@pytest.mark.slow  # traces the tiny model's chunk twice (no compile)
def test_the_dry_run_lowers_the_trainers_chunk():
  cell, c = _tiny_cell({"steps_per_dispatch": 4})
  s = readiness.setup_for(cell, c)
  assert s.K == 4
  devices = jax.devices()[:1]
  got = aot.lower(s, devices, with_eval=False)
  # The program the trainer dispatches (sweeps/train/loop.py `compiled`), lowered on the
  # arrays it passes: the state, K stacked batches, K learning rates (np.float32), n.
  t = cell.train_config(c)
  mesh = setup_lib.make_mesh(t, devices)
  model = setup_lib.make_model(t, run_config.model_config(t, cell.shape.vocab_size), mesh)
  B, S = cell.batch_size, cell.seq_len
  batches = {k: jax.device_put(np.zeros((4, B, S), np.int32), model.chunk_sharding)
             for k in ("inputs", "targets")}
  trainer = model.train_chunk.lower(model.abstract, batches, np.zeros(4, np.float32),
                                    np.int32(3))
  assert got.train.as_text() == trainer.as_text()
  assert "module @jit_train_chunk" in got.train.as_text()
  # With a sequence-length warmup the trainer keeps one step per dispatch: so does the dry run.
  cell, c = _tiny_cell({"steps_per_dispatch": 4, "seq_len_start": cell.seq_len // 2})
  s = readiness.setup_for(cell, c)
  assert s.K == 1
  assert "module @jit_train_step" in aot.lower(s, devices, with_eval=False).train.as_text()


@pytest.mark.slow  # one compile of a 2-layer chunk
def test_a_chunk_reports_flops_per_step_and_holds_its_k_batches():
  K, B = 4, 4
  shape = Shape(d_model=64, n_layers=2, n_heads=4, d_ff=192, vocab_size=256, seq_len=32)
  # Rolled layers and the full S x S attention the paper counts, in float32.
  cfg = ModelConfig(shape, compute_dtype="float32", unroll_layers=0, attn_block=0)
  setup = aot.Setup(cfg, optimizer.OptimizerConfig(), 100, (1, 1, 1), "fsdp", B, 1, K)
  train, _ = aot.compile_setup(setup, jax.devices()[:1], with_eval=False)
  terms = conventions.chinchilla_forward_terms(shape)
  # 3 x forward (forward and backward) per sequence; the embedding is a gather, no matmul.
  analytic = 3 * B * (sum(terms.values()) - terms["embeddings"])
  # Matmuls are the count; softmax, norms, the loss and AdamW add a few percent at this size.
  # The chunk's K steps not divided by K would be 4.2; its loop once, divided, 0.26.
  assert 1.0 <= train.flops / analytic <= 1.10, train.flops / analytic
  # Arguments, closed form: f32 parameters and AdamW's two moments (12 N), K batches of
  # B x S int32 inputs and targets, K learning rates, and the step, AdamW's count and n.
  N = conventions.params(shape)
  assert train.argument_bytes == 12 * N + K * 2 * B * shape.seq_len * 4 + 4 * K + 3 * 4
