"""The chinchax decoder: a pre-norm, rotary, SwiGLU, bias-free decoder-only transformer.

    h_0     = E[tokens]                                    E: V x d (gather, not a matmul)
    h_l+1/2 = h_l + Attn(RMSNorm(h_l))                     causal, rotary q and k
    h_l+1   = h_l+1/2 + MLP(RMSNorm(h_l+1/2))              SwiGLU: W_d (silu(x W_g) * x W_u)
    logits  = RMSNorm(h_L) W_out                           W_out = E^T when tied

Its parameters are exactly those `scaling.conventions.params` counts (tests check it leaf by
leaf): per layer W_q, W_k, W_v (d x h x k), W_o (h x k x d), the MLP matrices (d x f, f x d),
two RMSNorm scales; then the final RMSNorm scale, E and (untied) W_out. Its forward FLOPs
match `chinchilla_forward_terms` against XLA's cost analysis within ~1%, except the
embedding, which is a gather here and a one-hot matmul in the paper's count.

Flax linen rather than NNX: `nn.scan` over layers (compile time flat in depth),
`nn.remat` policies, `nn.with_logical_partitioning` and `nn.logical_to_mesh_sharding` are
the mature path MaxText and nanodo use, and linen's parameters are a plain pytree that jit
in/out shardings, optax and orbax take as is. NNX (flax >= 0.10) offers the same pieces
but through mutable objects that must be split/merged around every transform.

Every parameter carries logical axis names (`vocab`, `embed`, `heads`, `kv`, `mlp`,
`layers`) and activations are constrained with `act_*` names; `models.sharding.RULES` maps
both to mesh axes. Outside a mesh/rules context the constraints are no-ops.

Parameters are stored in `param_dtype` and cast to `compute_dtype` at use; norms, softmax,
rotary phases and the loss are computed in float32.
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from chinchax.models.config import REMAT_POLICIES, ModelConfig

Array = jax.Array


def _fan_in(in_axes: tuple[int, ...], out_axes: tuple[int, ...], scale: float = 1.0):
  return nn.initializers.variance_scaling(
      scale, "fan_in", "truncated_normal", in_axis=in_axes, out_axis=out_axes)


def _param(module: nn.Module, name: str, init, shape, names, cfg: ModelConfig) -> Array:
  """A logically partitioned parameter, cast to the compute dtype."""
  w = module.param(name, nn.with_logical_partitioning(init, names), shape, cfg.pdtype)
  return w.astype(cfg.dtype)


def _norm(cfg: ModelConfig, name: str) -> nn.RMSNorm:
  return nn.RMSNorm(
      epsilon=1e-6, dtype=cfg.dtype, param_dtype=cfg.pdtype, name=name,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("embed",)))


def rotary(x_BxLxNxH: Array, base: float) -> Array:
  """Rotary position embedding (Su et al. 2021), rotate-half form, phases in float32."""
  L, H = x_BxLxNxH.shape[1], x_BxLxNxH.shape[3]
  inv_freq_K = base ** (-jnp.arange(0, H, 2, dtype=jnp.float32) / H)
  phase_LxK = jnp.arange(L, dtype=jnp.float32)[:, None] * inv_freq_K[None, :]
  cos_LxH = jnp.concatenate([jnp.cos(phase_LxK)] * 2, axis=-1)[None, :, None, :]
  sin_LxH = jnp.concatenate([jnp.sin(phase_LxK)] * 2, axis=-1)[None, :, None, :]
  x = x_BxLxNxH.astype(jnp.float32)
  x1, x2 = jnp.split(x, 2, axis=-1)
  rotated = jnp.concatenate([-x2, x1], axis=-1)
  return (x * cos_LxH + rotated * sin_LxH).astype(x_BxLxNxH.dtype)


class Attention(nn.Module):
  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_BxLxD: Array) -> Array:
    cfg, s = self.cfg, self.cfg.shape
    D, N, H = s.d_model, s.n_heads, s.head_dim
    qkv_init = _fan_in((0,), (1, 2))
    names = ("embed", "heads", "kv")
    q_BxLxNxH, k_BxLxNxH, v_BxLxNxH = (
        jnp.einsum("BLD,DNH->BLNH", x_BxLxD, _param(self, w, qkv_init, (D, N, H), names, cfg))
        for w in ("w_q", "w_k", "w_v"))
    q_BxLxNxH = rotary(q_BxLxNxH, cfg.rope_base)
    k_BxLxNxH = rotary(k_BxLxNxH, cfg.rope_base)
    act = ("act_batch", "act_len", "act_heads", "act_kv")
    q_BxLxNxH, k_BxLxNxH, v_BxLxNxH = (
        nn.with_logical_constraint(t, act) for t in (q_BxLxNxH, k_BxLxNxH, v_BxLxNxH))
    # implementation=None: cuDNN's fused kernel on GPU where it applies, XLA elsewhere.
    o_BxLxNxH = jax.nn.dot_product_attention(
        q_BxLxNxH, k_BxLxNxH, v_BxLxNxH, is_causal=True, implementation=None)
    # GPT-2's 1/sqrt(2 L) on residual-stream outputs keeps the stream's variance depth-free.
    out_init = _fan_in((0, 1), (2,), scale=1.0 / (2 * s.n_layers))
    w_o = _param(self, "w_o", out_init, (N, H, D), ("heads", "kv", "embed"), cfg)
    return jnp.einsum("BLNH,NHD->BLD", o_BxLxNxH, w_o)


class Mlp(nn.Module):
  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_BxLxD: Array) -> Array:
    cfg, s = self.cfg, self.cfg.shape
    D, F = s.d_model, s.d_ff
    w_up = _param(self, "w_up", _fan_in((0,), (1,)), (D, F), ("embed", "mlp"), cfg)
    h_BxLxF = jnp.einsum("BLD,DF->BLF", x_BxLxD, w_up)
    if s.gated:
      w_gate = _param(self, "w_gate", _fan_in((0,), (1,)), (D, F), ("embed", "mlp"), cfg)
      h_BxLxF = nn.silu(jnp.einsum("BLD,DF->BLF", x_BxLxD, w_gate)) * h_BxLxF
    else:
      h_BxLxF = nn.gelu(h_BxLxF)
    h_BxLxF = nn.with_logical_constraint(h_BxLxF, ("act_batch", "act_len", "act_mlp"))
    down_init = _fan_in((0,), (1,), scale=1.0 / (2 * s.n_layers))
    w_down = _param(self, "w_down", down_init, (F, D), ("mlp", "embed"), cfg)
    return jnp.einsum("BLF,FD->BLD", h_BxLxF, w_down)


class Block(nn.Module):
  """One pre-norm layer; `(carry, None) -> (carry, None)` so that `nn.scan` can stack it."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_BxLxD: Array, _: Any) -> tuple[Array, None]:
    act = ("act_batch", "act_len", "act_embed")
    x_BxLxD = x_BxLxD + Attention(self.cfg, name="attn")(_norm(self.cfg, "attn_norm")(x_BxLxD))
    x_BxLxD = nn.with_logical_constraint(x_BxLxD, act)
    x_BxLxD = x_BxLxD + Mlp(self.cfg, name="mlp")(_norm(self.cfg, "mlp_norm")(x_BxLxD))
    return nn.with_logical_constraint(x_BxLxD, act), None


class Embed(nn.Module):
  """Token embedding E (V x d): a gather in, and `attend` (x E^T) out when tied."""

  cfg: ModelConfig

  def setup(self):
    init = nn.with_logical_partitioning(nn.initializers.normal(self.cfg.init_std),
                                        ("vocab", "embed"))
    s = self.cfg.shape
    self.embedding = self.param("embedding", init, (s.vocab_size, s.d_model), self.cfg.pdtype)

  def __call__(self, tokens_BxL: Array) -> Array:
    # Gather from a table all-gathered over `embed` (FSDP's just-in-time gather): a gather
    # whose operand is split along the gathered features cannot be partitioned well.
    table_VxD = nn.with_logical_constraint(self.embedding, ("vocab", None))
    return jnp.take(table_VxD, tokens_BxL, axis=0).astype(self.cfg.dtype)

  def attend(self, x_BxLxD: Array) -> Array:
    return jnp.einsum("BLD,VD->BLV", x_BxLxD, self.embedding.astype(self.cfg.dtype))


class Decoder(nn.Module):
  """tokens BxL (int) -> logits BxLxV (float32)."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, tokens_BxL: Array) -> Array:
    cfg, s = self.cfg, self.cfg.shape
    embed = Embed(cfg, name="embed")
    x_BxLxD = embed(tokens_BxL)
    x_BxLxD = nn.with_logical_constraint(x_BxLxD, ("act_batch", "act_len", "act_embed"))

    block = Block
    if cfg.remat != "none":
      # prevent_cse=False is safe (and faster) inside scan, which already blocks CSE.
      block = nn.remat(Block, policy=REMAT_POLICIES[cfg.remat], prevent_cse=False)
    layers = nn.scan(
        block, variable_axes={"params": 0}, split_rngs={"params": True},
        length=s.n_layers, metadata_params={nn.PARTITION_NAME: "layers"})
    x_BxLxD, _ = layers(cfg, name="layers")(x_BxLxD, None)

    x_BxLxD = _norm(cfg, "final_norm")(x_BxLxD)
    if s.tied:
      logits_BxLxV = embed.attend(x_BxLxD)
    else:
      w_out = _param(self, "w_out", _fan_in((0,), (1,)), (s.d_model, s.vocab_size),
                     ("embed", "vocab"), cfg)
      logits_BxLxV = jnp.einsum("BLD,DV->BLV", x_BxLxD, w_out)
    logits_BxLxV = nn.with_logical_constraint(logits_BxLxV, ("act_batch", "act_len", "act_vocab"))
    return logits_BxLxV.astype(jnp.float32)


def loss_fn(
    cfg: ModelConfig, params: Any, batch: dict[str, Array]
) -> tuple[Array, dict[str, Array]]:
  """Mean next-token cross-entropy (nats/token, float32) + z_loss · mean log(Z)^2.

  `batch` holds `inputs` and `targets` (BxL int) and optionally `mask` (BxL, 1 = count the
  token). Returns (loss to differentiate, metrics with the plain cross-entropy).
  """
  logits_BxLxV = Decoder(cfg).apply({"params": params}, batch["inputs"])
  ce_BxL = optax.softmax_cross_entropy_with_integer_labels(logits_BxLxV, batch["targets"])
  mask_BxL = batch.get("mask")
  if mask_BxL is None:
    mask_BxL = jnp.ones_like(ce_BxL)
  mask_BxL = mask_BxL.astype(jnp.float32)
  n_tokens = jnp.maximum(mask_BxL.sum(), 1.0)
  ce = (ce_BxL * mask_BxL).sum() / n_tokens
  loss = ce
  if cfg.z_loss:
    log_z_BxL = jax.nn.logsumexp(logits_BxLxV, axis=-1)
    loss = loss + cfg.z_loss * (jnp.square(log_z_BxL) * mask_BxL).sum() / n_tokens
  return loss, {"loss": ce, "tokens": mask_BxL.sum()}


def init_params(cfg: ModelConfig, rng: Array, batch_size: int = 1) -> Any:
  """Boxed (logically partitioned) parameters; `nn.unbox` gives the plain arrays."""
  tokens_BxL = jnp.zeros((batch_size, cfg.shape.seq_len), jnp.int32)
  return Decoder(cfg).init(rng, tokens_BxL)["params"]
