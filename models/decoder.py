"""The chinchax decoder: a pre-norm, rotary, SwiGLU, bias-free decoder-only transformer.

Tensors are named with their shapes, one letter per axis, the letters of
`scaling/runs/conventions.py` (where N is a parameter count and L a number of layers):

    B  batch (sequences)          S  sequence position (seq_len)   T  attended-to position
    D  d_model                    H  attention heads (n_heads)      K  head_dim
    F  d_ff (MLP width)           V  vocabulary                     L  layers (stacked params)

    h_0     = E[tokens]                                    E: V x d (gather, not a matmul)
    h_l+1/2 = h_l + Attn(RMSNorm(h_l))                     causal, rotary q and k
    h_l+1   = h_l+1/2 + MLP(RMSNorm(h_l+1/2))              SwiGLU: W_d (silu(x W_g) * x W_u)
    logits  = RMSNorm(h_L) W_out                           W_out = E^T when tied

Its parameters are exactly those `scaling.runs.conventions.params` counts (tests check it leaf by
leaf): per layer W_q, W_k, W_v (d x h x k), W_o (h x k x d), the MLP matrices (d x f, f x d),
two RMSNorm scales; then the final RMSNorm scale, E and (untied) W_out. Its forward FLOPs
match `chinchilla_forward_terms` against XLA's cost analysis within ~1%, except the
embedding, which is a gather here and a one-hot matmul in the paper's count.

Flax linen rather than NNX: `nn.scan` over layers (compile time flat in depth; models of
at most `unroll_layers` layers are unrolled, which on CPU makes steps ~20% faster and
compiles faster too, with the same stacked parameters),
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

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from chinchax.models.config import ModelConfig

# `ModelConfig.remat` -> what each scanned block saves for the backward pass.
REMAT_POLICIES: dict[str, object] = {
    "none": None,
    "minimal": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "full": jax.checkpoint_policies.nothing_saveable,
}

Array = jax.Array


def _fan_in(in_axes: tuple[int, ...], out_axes: tuple[int, ...], scale: float = 1.0):
  return nn.initializers.variance_scaling(
      scale, "fan_in", "truncated_normal", in_axis=in_axes, out_axis=out_axes)


def _param(module: nn.Module, name: str, init, shape, names, cfg: ModelConfig) -> Array:
  """A logically partitioned parameter, cast to the compute dtype."""
  w = module.param(name, nn.with_logical_partitioning(init, names), shape, cfg.pdtype)
  return w.astype(cfg.dtype)


def _dense(eq: str, x: Array, w: Array) -> Array:
  """`jnp.einsum` of x (B x S x features) and a weight, x's features and the output's named
  in `eq` ("D,DF->F"), with B and S merged into one axis M = B·S for the product.

  On CPU, with B and S apart, XLA laid each weight gradient out as a product of two
  transposed operands: a transposed copy of one first, then Eigen's slow path (0.42 ms at
  176k parameters, where the forward product takes 0.19 ms). Merged, the gradient is x^T dy
  as it stands, with no copy, at the forward's speed: the smoke's train step is 13-22% shorter
  (10k-176k parameters, 8 x 64 tokens, one core; bench/step_bench.py --K 16). Elsewhere the program is the same: under
  `models.sharding.RULES` B is the only sharded axis of the two, and one H200's step times
  moved by under 0.3% (bench/gpu_bench.py, 50M and 350M).
  """
  B, S = x.shape[:2]
  x_in, rest = eq.split(",")
  w_in, out = rest.split("->")
  y = jnp.einsum(f"M{x_in},{w_in}->M{out}", x.reshape(B * S, *x.shape[2:]), w)
  return y.reshape(B, S, *y.shape[1:])


def _norm(cfg: ModelConfig, name: str) -> nn.RMSNorm:
  return nn.RMSNorm(
      epsilon=1e-6, dtype=cfg.dtype, param_dtype=cfg.pdtype, name=name,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("embed",)))


def rotary(x_BxSxHxK: Array, base: float) -> Array:
  """Rotary position embedding (Su et al. 2021), rotate-half form, phases in float32."""
  S, K = x_BxSxHxK.shape[1], x_BxSxHxK.shape[3]
  inv_freq = base ** (-jnp.arange(0, K, 2, dtype=jnp.float32) / K)  # K/2 frequencies
  phase = jnp.arange(S, dtype=jnp.float32)[:, None] * inv_freq[None, :]  # S x K/2
  cos_1xSx1xK = jnp.concatenate([jnp.cos(phase)] * 2, axis=-1)[None, :, None, :]
  sin_1xSx1xK = jnp.concatenate([jnp.sin(phase)] * 2, axis=-1)[None, :, None, :]
  x = x_BxSxHxK.astype(jnp.float32)
  x1, x2 = jnp.split(x, 2, axis=-1)
  rotated = jnp.concatenate([-x2, x1], axis=-1)
  return (x * cos_1xSx1xK + rotated * sin_1xSx1xK).astype(x_BxSxHxK.dtype)


def causal_attention(q_BxSxHxK: Array, k_BxTxHxK: Array, v_BxTxHxK: Array,
                     q_block: int = 0) -> Array:
  """softmax(q k^T / sqrt(K) + causal mask) v; logits and softmax in float32.

  `q_block` > 0 splits the queries into blocks of that many rows; block i attends to the
  keys up to its own end only, skipping the masked upper triangle: (n + 1) / 2n of the S x T
  work for n blocks (62.5% for 4), the same result up to float rounding. Written out rather
  than `jax.nn.dot_product_attention` (whose XLA path is the same maths) so that q is scaled
  before the product (a BxSxHxK multiply instead of a BxHxSxT one), and so that its gradient
  is `_attend_bwd`'s.
  """
  S, K = q_BxSxHxK.shape[1], q_BxSxHxK.shape[3]
  q_BxSxHxK = q_BxSxHxK * jnp.asarray(K ** -0.5, q_BxSxHxK.dtype)
  b = q_block if 0 < q_block < S else S
  out = [_attend(q_BxSxHxK[:, start:start + b], k_BxTxHxK[:, :start + b],
                 v_BxTxHxK[:, :start + b], start) for start in range(0, S, b)]
  return out[0] if len(out) == 1 else jnp.concatenate(out, axis=1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _attend(q_BxSxHxK: Array, k_BxTxHxK: Array, v_BxTxHxK: Array, start: int) -> Array:
  """Queries `start` .. `start` + S attending causally to keys 0 .. T (q already scaled)."""
  return _attend_fwd(q_BxSxHxK, k_BxTxHxK, v_BxTxHxK, start)[0]


def _attend_fwd(q_BxSxHxK, k_BxTxHxK, v_BxTxHxK, start):
  logits_BxHxSxT = jnp.einsum("BSHK,BTHK->BHST", q_BxSxHxK, k_BxTxHxK,
                              preferred_element_type=jnp.float32)
  S, T = logits_BxHxSxT.shape[2:]
  causal_SxT = start + jnp.arange(S)[:, None] >= jnp.arange(T)[None, :]
  logits_BxHxSxT = jnp.where(causal_SxT, logits_BxHxSxT, jnp.finfo(jnp.float32).min)
  probs_BxHxSxT = jax.nn.softmax(logits_BxHxSxT, axis=-1)
  o_BxSxHxK = jnp.einsum("BHST,BTHK->BSHK", probs_BxHxSxT.astype(v_BxTxHxK.dtype), v_BxTxHxK)
  return o_BxSxHxK, (q_BxSxHxK, k_BxTxHxK, v_BxTxHxK, probs_BxHxSxT, o_BxSxHxK)


def _attend_bwd(start, residuals, do_BxSxHxK):
  """The softmax's gradient as FlashAttention-2 writes it: sum_t p_t dp_t = do · o, a sum
  over K rather than T. Differentiated automatically, the same step took two more passes over
  the S x T probabilities (that sum, the mask's select) and products XLA laid out with
  transposed operands: on one CPU core the smoke's train step was 5-7% longer
  (bench/step_bench.py --K 16)."""
  del start  # masked probabilities are exact zeros, and so are their gradients
  q_BxSxHxK, k_BxTxHxK, v_BxTxHxK, probs_BxHxSxT, o_BxSxHxK = residuals
  f32 = jnp.float32
  dv_BxTxHxK = jnp.einsum("BHST,BSHK->BTHK", probs_BxHxSxT.astype(v_BxTxHxK.dtype), do_BxSxHxK)
  dprobs_BxHxSxT = jnp.einsum("BSHK,BTHK->BHST", do_BxSxHxK, v_BxTxHxK,
                              preferred_element_type=f32)
  delta_BxSxH = jnp.sum(do_BxSxHxK.astype(f32) * o_BxSxHxK.astype(f32), axis=-1)
  dlogits_BxHxSxT = probs_BxHxSxT * (dprobs_BxHxSxT - delta_BxSxH.transpose(0, 2, 1)[..., None])
  dlogits_BxHxSxT = dlogits_BxHxSxT.astype(q_BxSxHxK.dtype)
  dq_BxSxHxK = jnp.einsum("BHST,BTHK->BSHK", dlogits_BxHxSxT, k_BxTxHxK)
  dk_BxTxHxK = jnp.einsum("BHST,BSHK->BTHK", dlogits_BxHxSxT, q_BxSxHxK)
  return dq_BxSxHxK, dk_BxTxHxK, dv_BxTxHxK


_attend.defvjp(_attend_fwd, _attend_bwd)


class Attention(nn.Module):
  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_BxSxD: Array) -> Array:
    cfg, s = self.cfg, self.cfg.shape
    D, H, K = s.d_model, s.n_heads, s.head_dim
    qkv_init = _fan_in((0,), (1, 2))
    names = ("embed", "heads", "kv")
    # One product for q, k and v: on CPU three products of a third the width (and their
    # gradients' three, summed) made the smoke's train step 3-7% longer.
    w_Dx3xHxK = jnp.stack([_param(self, w, qkv_init, (D, H, K), names, cfg)
                           for w in ("w_q", "w_k", "w_v")], axis=1)
    qkv_BxSx3xHxK = _dense("D,DCHK->CHK", x_BxSxD, w_Dx3xHxK)
    q_BxSxHxK, k_BxSxHxK, v_BxSxHxK = (qkv_BxSx3xHxK[:, :, i] for i in range(3))
    q_BxSxHxK = rotary(q_BxSxHxK, cfg.rope_base)
    k_BxSxHxK = rotary(k_BxSxHxK, cfg.rope_base)
    act = ("act_batch", "act_len", "act_heads", "act_kv")
    q_BxSxHxK, k_BxSxHxK, v_BxSxHxK = (
        nn.with_logical_constraint(t, act) for t in (q_BxSxHxK, k_BxSxHxK, v_BxSxHxK))
    # An explicit kernel is taken as given: a deviceless compile for a GPU traces on the CPU.
    kernel = cfg.attention if cfg.attention != "auto" else cfg.attention_kernel()
    if kernel == "cudnn":
      o_BxSxHxK = jax.nn.dot_product_attention(q_BxSxHxK, k_BxSxHxK, v_BxSxHxK,
                                               is_causal=True, implementation="cudnn")
    else:
      o_BxSxHxK = causal_attention(q_BxSxHxK, k_BxSxHxK, v_BxSxHxK, cfg.attention_block)
    # GPT-2's 1/sqrt(2 L) on residual-stream outputs keeps the stream's variance depth-free.
    out_init = _fan_in((0, 1), (2,), scale=1.0 / (2 * s.n_layers))
    w_o = _param(self, "w_o", out_init, (H, K, D), ("heads", "kv", "embed"), cfg)
    return _dense("HK,HKD->D", o_BxSxHxK, w_o)


class Mlp(nn.Module):
  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_BxSxD: Array) -> Array:
    cfg, s = self.cfg, self.cfg.shape
    D, F = s.d_model, s.d_ff
    w_up = _param(self, "w_up", _fan_in((0,), (1,)), (D, F), ("embed", "mlp"), cfg)
    h_BxSxF = _dense("D,DF->F", x_BxSxD, w_up)
    if s.gated:
      w_gate = _param(self, "w_gate", _fan_in((0,), (1,)), (D, F), ("embed", "mlp"), cfg)
      h_BxSxF = nn.silu(_dense("D,DF->F", x_BxSxD, w_gate)) * h_BxSxF
    else:
      h_BxSxF = nn.gelu(h_BxSxF)
    h_BxSxF = nn.with_logical_constraint(h_BxSxF, ("act_batch", "act_len", "act_mlp"))
    down_init = _fan_in((0,), (1,), scale=1.0 / (2 * s.n_layers))
    w_down = _param(self, "w_down", down_init, (F, D), ("mlp", "embed"), cfg)
    return _dense("F,FD->D", h_BxSxF, w_down)


class Block(nn.Module):
  """One pre-norm layer; `(carry, None) -> (carry, None)` so that `nn.scan` can stack it."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, x_BxSxD: Array, _: Any) -> tuple[Array, None]:
    act = ("act_batch", "act_len", "act_embed")
    x_BxSxD = x_BxSxD + Attention(self.cfg, name="attn")(_norm(self.cfg, "attn_norm")(x_BxSxD))
    x_BxSxD = nn.with_logical_constraint(x_BxSxD, act)
    x_BxSxD = x_BxSxD + Mlp(self.cfg, name="mlp")(_norm(self.cfg, "mlp_norm")(x_BxSxD))
    return nn.with_logical_constraint(x_BxSxD, act), None


class Embed(nn.Module):
  """Token embedding E (V x d): a gather in, and `attend` (x E^T) out when tied."""

  cfg: ModelConfig

  def setup(self):
    init = nn.with_logical_partitioning(nn.initializers.normal(self.cfg.init_std),
                                        ("vocab", "embed"))
    s = self.cfg.shape
    self.embedding = self.param("embedding", init, (s.vocab_size, s.d_model), self.cfg.pdtype)

  def __call__(self, tokens_BxS: Array) -> Array:
    # Gather from a table all-gathered over `embed` (FSDP's just-in-time gather): a gather
    # whose operand is split along the gathered features cannot be partitioned well.
    table_VxD = nn.with_logical_constraint(self.embedding, ("vocab", None))
    return jnp.take(table_VxD, tokens_BxS, axis=0).astype(self.cfg.dtype)

  def attend(self, x_BxSxD: Array) -> Array:
    return _dense("D,VD->V", x_BxSxD, self.embedding.astype(self.cfg.dtype))


class Decoder(nn.Module):
  """tokens BxS (int) -> logits BxSxV (float32)."""

  cfg: ModelConfig

  @nn.compact
  def __call__(self, tokens_BxS: Array) -> Array:
    cfg, s = self.cfg, self.cfg.shape
    embed = Embed(cfg, name="embed")
    x_BxSxD = embed(tokens_BxS)
    x_BxSxD = nn.with_logical_constraint(x_BxSxD, ("act_batch", "act_len", "act_embed"))

    # Shallow models are unrolled: a scanned loop stacks every layer's residuals into
    # zero-initialised LxBx... buffers, which on CPU costs more than the layers' own work.
    unroll = s.n_layers if s.n_layers <= cfg.unroll_layers else 1
    block = Block
    if cfg.remat != "none":
      # A rolled scan already keeps XLA from merging the recomputation back into the forward
      # pass (prevent_cse=False is then safe and faster); unrolled layers are straight-line
      # code, where only prevent_cse keeps the remat from being undone.
      block = nn.remat(Block, policy=REMAT_POLICIES[cfg.remat], prevent_cse=unroll > 1)
    layers = nn.scan(
        block, variable_axes={"params": 0}, split_rngs={"params": True},
        length=s.n_layers, unroll=unroll, metadata_params={nn.PARTITION_NAME: "layers"})
    x_BxSxD, _ = layers(cfg, name="layers")(x_BxSxD, None)

    x_BxSxD = _norm(cfg, "final_norm")(x_BxSxD)
    if s.tied:
      logits_BxSxV = embed.attend(x_BxSxD)
    else:
      w_out = _param(self, "w_out", _fan_in((0,), (1,)), (s.d_model, s.vocab_size),
                     ("embed", "vocab"), cfg)
      logits_BxSxV = _dense("D,DV->V", x_BxSxD, w_out)
    logits_BxSxV = nn.with_logical_constraint(logits_BxSxV, ("act_batch", "act_len", "act_vocab"))
    return logits_BxSxV.astype(jnp.float32)


def loss_fn(
    cfg: ModelConfig, params: Any, batch: dict[str, Array]
) -> tuple[Array, dict[str, Array]]:
  """Mean next-token cross-entropy (nats/token, float32) + z_loss · mean log(Z)^2.

  `batch` holds `inputs` and `targets` (BxS int) and optionally `mask` (BxS, 1 = count the
  token). Returns (loss to differentiate, metrics with the plain cross-entropy).
  """
  logits_BxSxV = Decoder(cfg).apply({"params": params}, batch["inputs"])
  ce_BxS = optax.softmax_cross_entropy_with_integer_labels(logits_BxSxV, batch["targets"])
  mask_BxS = batch.get("mask")
  if mask_BxS is None:
    mask_BxS = jnp.ones_like(ce_BxS)
  mask_BxS = mask_BxS.astype(jnp.float32)
  n_tokens = jnp.maximum(mask_BxS.sum(), 1.0)
  ce = (ce_BxS * mask_BxS).sum() / n_tokens
  loss = ce
  if cfg.z_loss:
    log_z_BxS = jax.nn.logsumexp(logits_BxSxV, axis=-1)
    loss = loss + cfg.z_loss * (jnp.square(log_z_BxS) * mask_BxS).sum() / n_tokens
  return loss, {"loss": ce, "tokens": mask_BxS.sum()}


def init_params(cfg: ModelConfig, rng: Array, batch_size: int = 1) -> Any:
  """Boxed (logically partitioned) parameters; `nn.unbox` gives the plain arrays."""
  tokens_BxS = jnp.zeros((batch_size, cfg.shape.seq_len), jnp.int32)
  return Decoder(cfg).init(rng, tokens_BxS)["params"]
