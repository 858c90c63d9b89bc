"""The decoder: exact parameter accounting, a float64 reference forward pass, the loss."""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chinchax.models import decoder
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs import conventions
from chinchax.scaling.runs.conventions import Shape
from chinchax.errors import UserError

TINY = Shape(d_model=64, n_layers=2, n_heads=4, d_ff=192, vocab_size=256, seq_len=32)
# Cheap LLVM settings: compile time dominates these tests, and every comparison is against
# an independent reference rather than against another compilation.
FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _jit(f, *args):
  """f compiled for `args`' shapes with the cheap settings."""
  return jax.jit(f).lower(*args).compile(compiler_options=FAST)


def _params(cfg, seed=0):
  rng = jax.random.key(seed)
  return nn.unbox(_jit(lambda r: decoder.init_params(cfg, r), rng)(rng))


def _apply(cfg, params):
  tokens = jax.ShapeDtypeStruct((2, cfg.shape.seq_len), jnp.int32)
  return _jit(decoder.Decoder(cfg).apply, {"params": params}, tokens)


@pytest.fixture(scope="module")
def tiny():
  """f32 config, its params and a jitted apply, shared so each test compiles less."""
  cfg = ModelConfig(TINY, compute_dtype="float32")
  p = _params(cfg)
  return cfg, p, _apply(cfg, p)


def _n(tree) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


@pytest.mark.parametrize("shape", [
    TINY,
    Shape(64, 2, 4, 192, 256, 32, tied=True),
    Shape(96, 3, 3, 256, 1000, 16, tied=False),
    Shape(128, 1, 2, 344, 500, 8, tied=True),
    Shape(64, 2, 2, 256, 300, 8, gated=False),
])
def test_initialised_params_equal_conventions_count_exactly(shape):
  boxed = jax.eval_shape(lambda: decoder.init_params(ModelConfig(shape), jax.random.key(0)))
  tree = nn.unbox(boxed)
  assert _n(tree) == conventions.params(shape, "total")
  vocab_sized = _n(tree["embed"]) + (_n(tree["w_out"]) if "w_out" in tree else 0)
  assert ("w_out" in tree) == (not shape.tied)
  assert _n(tree) - vocab_sized == conventions.params(shape, "non_embedding")


def _reference_logits(p, tokens, s: Shape, rope_base: float) -> np.ndarray:
  """Float64 numpy forward pass written from the maths, not from the module."""
  f64 = lambda a: np.asarray(a, np.float64)

  def rms(x, scale):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * f64(scale)

  def rope(x):  # x: B L N H; rotate pairs (i, i + H/2) by angle pos / base^(2i/H)
    L, H = x.shape[1], x.shape[3]
    ang = np.arange(L)[:, None] / rope_base ** (np.arange(H // 2) * 2 / H)[None, :]
    c, s_ = np.cos(ang)[None, :, None, :], np.sin(ang)[None, :, None, :]
    a, b = x[..., :H // 2], x[..., H // 2:]
    return np.concatenate([a * c - b * s_, a * s_ + b * c], -1)

  x = f64(p["embed"]["embedding"])[tokens]
  L = tokens.shape[1]
  causal = np.tril(np.ones((L, L), bool))
  lay = jax.tree.map(f64, p["layers"])
  for l in range(s.n_layers):
    h = rms(x, lay["attn_norm"]["scale"][l])
    q, k, v = (np.einsum("bld,dnh->blnh", h, lay["attn"][w][l]) for w in ("w_q", "w_k", "w_v"))
    q, k = rope(q), rope(k)
    logits = np.einsum("bqnh,bknh->bnqk", q, k) / np.sqrt(s.head_dim)
    logits = np.where(causal, logits, -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = np.einsum("bnqk,bknh->bqnh", w, v)
    x = x + np.einsum("blnh,nhd->bld", o, lay["attn"]["w_o"][l])
    h = rms(x, lay["mlp_norm"]["scale"][l])
    g, u = h @ lay["mlp"]["w_gate"][l], h @ lay["mlp"]["w_up"][l]
    x = x + (g / (1 + np.exp(-g)) * u) @ lay["mlp"]["w_down"][l]
  x = rms(x, p["final_norm"]["scale"])
  w_out = f64(p["embed"]["embedding"]).T if s.tied else f64(p["w_out"])
  return x @ w_out


@pytest.mark.parametrize("tied", [False, True])
def test_forward_matches_float64_reference(tiny, tied):
  cfg, p, apply = tiny
  if tied:
    cfg = ModelConfig(Shape(64, 2, 4, 192, 256, 32, tied=True), compute_dtype="float32")
    p = _params(cfg)
    apply = _apply(cfg, p)
  tokens = np.random.default_rng(0).integers(0, 256, (2, 32)).astype(np.int32)
  got = np.asarray(apply({"params": p}, tokens))
  want = _reference_logits(p, tokens, cfg.shape, cfg.rope_base)
  np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("attn_block", [0, 8, 12])
def test_blocked_causal_attention_matches_float64_reference(tiny, attn_block):
  """Query blocks of 8 (4 blocks), 12 (12, 12, 8) and none: the same function as the maths."""
  cfg, p, _ = tiny
  cfg = dataclasses.replace(cfg, attn_block=attn_block)
  assert cfg.attention_block == attn_block
  tokens = np.random.default_rng(3).integers(0, 256, (2, 32)).astype(np.int32)
  got = np.asarray(_apply(cfg, p)({"params": p}, tokens))
  np.testing.assert_allclose(got, _reference_logits(p, tokens, cfg.shape, cfg.rope_base),
                             rtol=2e-4, atol=2e-4)


def _reference_loss(p, batch, s: Shape, rope_base: float) -> float:
  logits = _reference_logits(p, batch["inputs"], s, rope_base)
  top = logits.max(-1, keepdims=True)
  log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
  return float(np.mean(log_z - np.take_along_axis(logits, batch["targets"][..., None], -1)[..., 0]))


@pytest.mark.parametrize("attn_block", [0, 12])
@pytest.mark.parametrize("leaves", [("w_q",), ("w_k",), ("w_v",), None])
def test_gradient_matches_float64_reference_derivatives(tiny, attn_block, leaves):
  """The train step's gradient (the attention's own backward, `_attend_bwd`) against central
  differences of the float64 reference loss, along random directions in q's, k's or v's
  weights alone (each a different term of that backward) and in every parameter."""
  cfg, p, _ = tiny
  cfg = dataclasses.replace(cfg, attn_block=attn_block)
  rng = np.random.default_rng(5)
  batch = {"inputs": rng.integers(0, 256, (2, 32)).astype(np.int32),
           "targets": rng.integers(0, 256, (2, 32)).astype(np.int32)}
  g = _jit(jax.grad(lambda p: decoder.loss_fn(cfg, p, batch)[0]), p)(p)
  flat, tree = jax.tree_util.tree_flatten_with_path(p)
  paths = [jax.tree_util.keystr(k) for k, _ in flat]
  chosen = [leaves is None or any(f"'{w}'" in path for w in leaves) for path in paths]
  for trial in range(2):
    u = [rng.standard_normal(x.shape) * c for (_, x), c in zip(flat, chosen)]
    u = [d / np.sqrt(sum(np.sum(e * e) for e in u)) for d in u]
    eps = 1e-4
    shifted = lambda sign: jax.tree_util.tree_unflatten(
        tree, [np.asarray(x, np.float64) + sign * eps * d for (_, x), d in zip(flat, u)])
    want = (_reference_loss(shifted(1), batch, cfg.shape, cfg.rope_base)
            - _reference_loss(shifted(-1), batch, cfg.shape, cfg.rope_base)) / (2 * eps)
    got = sum(float(np.sum(np.asarray(a, np.float64) * d))
              for a, d in zip(jax.tree.leaves(g), u))
    assert abs(got - want) <= 2e-3 * abs(want) + 1e-6, (paths, trial, got, want)


def test_scanned_and_unrolled_layers_compute_the_same_function(tiny):
  """The same stacked parameters give the same logits whether the layers loop or unroll."""
  cfg, p, apply = tiny
  assert cfg.shape.n_layers <= cfg.unroll_layers  # the fixture's model is unrolled
  scanned = dataclasses.replace(cfg, unroll_layers=0)
  tokens = np.random.default_rng(2).integers(0, 256, (2, 32)).astype(np.int32)
  np.testing.assert_allclose(np.asarray(_apply(scanned, p)({"params": p}, tokens)),
                             np.asarray(apply({"params": p}, tokens)), rtol=1e-5, atol=1e-5)


def test_bfloat16_compute_close_to_float32_and_params_stay_float32(tiny):
  _, p32, apply32 = tiny
  assert {x.dtype for x in jax.tree.leaves(p32)} == {jnp.dtype(jnp.float32)}
  tokens = np.random.default_rng(1).integers(0, 256, (2, 32)).astype(np.int32)
  bf16 = _apply(ModelConfig(TINY, compute_dtype="bfloat16"), p32)({"params": p32}, tokens)
  f32 = apply32({"params": p32}, tokens)
  assert bf16.dtype == jnp.float32  # logits are upcast for the loss
  assert not np.array_equal(bf16, f32)  # bf16 really was used...
  # ...and stays close: bf16 has an 8-bit mantissa, so about 1% error in norm.
  assert np.linalg.norm(bf16 - f32) <= 0.02 * np.linalg.norm(f32)


def test_bfloat16_gradient_close_to_float32(tiny):
  """The attention's backward in bfloat16 (its products in bf16, the softmax's terms in f32)
  stays within bf16's error of the float32 gradient, leaf by leaf."""
  cfg32, p, _ = tiny
  rng = np.random.default_rng(6)
  batch = {"inputs": rng.integers(0, 256, (2, 32)).astype(np.int32),
           "targets": rng.integers(0, 256, (2, 32)).astype(np.int32)}
  grad = lambda cfg: _jit(jax.grad(lambda p: decoder.loss_fn(cfg, p, batch)[0]), p)(p)
  g32, g16 = grad(cfg32), grad(ModelConfig(TINY, compute_dtype="bfloat16"))
  for a, b in zip(jax.tree.leaves(g32), jax.tree.leaves(g16)):
    assert b.dtype == jnp.float32 and not np.array_equal(a, b)
    assert np.linalg.norm(a - b) <= 0.05 * np.linalg.norm(a)


def test_causal_future_tokens_do_not_change_past_logits(tiny):
  _, p, apply = tiny
  a = np.random.default_rng(2).integers(0, 256, (2, 32)).astype(np.int32)
  b = a.copy()
  b[:, 20:] = (b[:, 20:] + 7) % 256
  la, lb = apply({"params": p}, a), apply({"params": p}, b)
  np.testing.assert_array_equal(la[:, :20], lb[:, :20])
  assert not np.allclose(la[:, 20:], lb[:, 20:])


def test_loss_is_masked_mean_cross_entropy_plus_z_loss(tiny):
  _, p, apply = tiny
  cfg = ModelConfig(TINY, compute_dtype="float32", z_loss=1e-2)
  rng = np.random.default_rng(3)
  batch = {"inputs": rng.integers(0, 256, (2, 32)).astype(np.int32),
           "targets": rng.integers(0, 256, (2, 32)).astype(np.int32),
           "mask": (rng.random((2, 32)) < 0.6).astype(np.float32)}
  loss, metrics = _jit(lambda p, b: decoder.loss_fn(cfg, p, b), p, batch)(p, batch)
  logits = np.asarray(apply({"params": p}, batch["inputs"]), np.float64)
  log_z = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
  ce = log_z - np.take_along_axis(logits, batch["targets"][..., None], -1)[..., 0]
  m = batch["mask"]
  want_ce = (ce * m).sum() / m.sum()
  np.testing.assert_allclose(metrics["loss"], want_ce, rtol=1e-5)
  np.testing.assert_allclose(loss, want_ce + 1e-2 * (log_z ** 2 * m).sum() / m.sum(), rtol=1e-5)
  assert metrics["tokens"] == m.sum()


def test_remat_policies_do_not_change_gradients(tiny):
  base, p, _ = tiny
  rng = np.random.default_rng(4)
  batch = {"inputs": rng.integers(0, 256, (2, 32)).astype(np.int32),
           "targets": rng.integers(0, 256, (2, 32)).astype(np.int32)}
  grad = lambda cfg: _jit(jax.grad(lambda p: decoder.loss_fn(cfg, p, batch)[0]), p)(p)
  g0 = grad(base)
  jaxpr = lambda cfg: str(jax.make_jaxpr(jax.grad(lambda p: decoder.loss_fn(cfg, p, batch)[0]))(p))
  assert "remat" not in jaxpr(base)
  for remat in ("minimal", "full"):
    cfg = ModelConfig(TINY, compute_dtype="float32", remat=remat)
    assert "remat" in jaxpr(cfg)  # jax.checkpoint: the policy really wraps the scanned block
    g1 = grad(cfg)
    for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
      assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(a)


@pytest.mark.parametrize("kwargs, match", [
    ({"shape": Shape(64, 2, 3, 192, 256, 32)}, "does not divide"),
    ({"shape": Shape(64, 2, 64, 192, 256, 32)}, "head_dim=1 is odd"),
    ({"shape": TINY, "remat": "some"}, "remat='some'"),
    ({"shape": TINY, "compute_dtype": "float16"}, "compute_dtype='float16'"),
    ({"shape": TINY, "z_loss": -1.0}, "z_loss"),
])
def test_bad_config_is_refused_with_one_line(kwargs, match):
  with pytest.raises(UserError, match=match) as e:
    ModelConfig(**kwargs).validate()
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("shape, unroll_layers", [
    (Shape(128, 2, 2, 384, 256, 256), 8),
    (Shape(256, 1, 4, 704, 1024, 128, tied=True), 8),
    (Shape(512, 3, 8, 1408, 512, 512), 8),
    (Shape(512, 3, 8, 1408, 512, 512), 0),
])
def test_analytic_forward_flops_match_xla_cost_analysis(shape, unroll_layers):
  """`chinchilla_forward_terms` against XLA's count of the compiled forward pass (batch 1).

  Like with like: XLA's embedding lookup is a gather (no FLOPs), so the one-hot `embeddings`
  term is left out; unrolled layers are counted each, but XLA's HloCostAnalysis counts a
  while-loop body once, not once per trip, so a scanned stack (unroll_layers=0) contributes
  one layer: the comparison is then final_logits + (layer terms) / L. XLA also counts
  elementwise work (norms, rotary, SiLU, the causal mask's select, softmax) at ~1 FLOP per
  element; the paper's `attn_softmax` (3·h·S²) stands in for it, and the rest is O(d) per
  token against O(d²) matmuls: ~1% at these shapes. The paper counts the whole S x S score
  matrix, so the CPU's blocked attention (which skips the masked triangle) is off here.
  """
  cfg = ModelConfig(shape, compute_dtype="float32", unroll_layers=unroll_layers, attn_block=0)
  params = jax.eval_shape(lambda: nn.unbox(decoder.init_params(cfg, jax.random.key(0))))
  tokens = jax.ShapeDtypeStruct((1, shape.seq_len), jnp.int32)
  compiled = jax.jit(decoder.Decoder(cfg).apply).lower({"params": params}, tokens).compile()
  cost = compiled.cost_analysis()
  xla = (cost[0] if isinstance(cost, list) else cost)["flops"]
  terms = conventions.chinchilla_forward_terms(shape)
  layers = sum(v for k, v in terms.items() if k not in ("embeddings", "final_logits"))
  scanned = shape.n_layers > unroll_layers
  analytic = terms["final_logits"] + (layers / shape.n_layers if scanned else layers)
  assert xla == pytest.approx(analytic, rel=0.05)


def test_the_attention_kernel_is_cudnn_only_where_it_can_run():
  bf16 = ModelConfig(TINY, compute_dtype="bfloat16")  # head_dim 16
  assert bf16.attention == "auto"
  assert bf16.attention_kernel("gpu") == "cudnn" and bf16.attention_kernel("cuda") == "cudnn"
  assert bf16.attention_kernel("cpu") == "xla" and bf16.attention_kernel("tpu") == "xla"
  assert jax.default_backend() == "cpu" and bf16.attention_kernel() == "xla"
  f32 = dataclasses.replace(bf16, compute_dtype="float32")
  assert f32.attention_kernel("gpu") == "xla"  # cuDNN's fused attention: bf16 here
  odd = dataclasses.replace(bf16, shape=dataclasses.replace(TINY, d_model=48, n_heads=4))
  assert odd.shape.head_dim == 12 and odd.attention_kernel("gpu") == "xla"
  assert dataclasses.replace(bf16, attention="xla").attention_kernel("gpu") == "xla"
  with pytest.raises(UserError) as e:
    dataclasses.replace(f32, attention="cudnn").attention_kernel("cpu")
  assert str(e.value) == (
      "model: attention=cudnn needs a GPU (this backend is cpu) and compute_dtype bfloat16 "
      "(not float32): use --config.model.attention=auto (or xla)")
  with pytest.raises(UserError, match=r"attention='flash' is not one of auto, xla, cudnn"):
    dataclasses.replace(bf16, attention="flash").validate()


def test_an_explicit_xla_kernel_is_the_default_on_cpu(tiny):
  cfg, params, apply = tiny
  tokens = jax.random.randint(jax.random.key(3), (2, cfg.shape.seq_len), 0, 256, jnp.int32)
  explicit = _apply(dataclasses.replace(cfg, attention="xla"), params)
  np.testing.assert_array_equal(np.asarray(explicit({"params": params}, tokens)),
                                np.asarray(apply({"params": params}, tokens)))
