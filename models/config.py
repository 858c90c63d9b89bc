"""The decoder's configuration: a `scaling.runs.conventions.Shape` (for a target N, the recipe
below) plus how it is computed.

The shape fixes every parameter and FLOP count (`scaling.runs.conventions`); the options here
change only numerics and memory, never N or C:

* `compute_dtype`: activations and matmul inputs. Parameters are always stored in
  `param_dtype` (float32) and cast at use, so the optimizer sees float32.
* `remat`: activation checkpointing of each scanned block. `none` saves everything,
  `minimal` saves matmul outputs (`dots_with_no_batch_dims_saveable`: the weight matmuls,
  not the attention logits) and recomputes the elementwise work, `full` saves only the block
  input and recomputes the whole block in the backward pass.
* `z_loss`: weight of the auxiliary `log(Z)^2` term (PaLM) that keeps the softmax normaliser
  near 1; 0 disables it.
* `unroll_layers`: models of at most this many layers run their layers as straight-line
  code; deeper ones as a scanned loop, whose compile time does not grow with depth. The
  parameters are stacked over layers either way.
* `attn_block`: queries per block of the causal attention (`decoder.causal_attention`), which
  skips the masked upper triangle block by block; 0 turns it off, None (default) picks
  max(32, seq_len / 4) on CPU, where it makes attention ~25% cheaper, and off on GPU and TPU.
* `attention`: the kernel of the causal attention. `xla` is `decoder.causal_attention`
  written out: S x T logits in float32, materialised. `cudnn` is cuDNN's fused (flash)
  attention through `jax.nn.dot_product_attention`: no S x T tensor in memory, on an NVIDIA
  GPU in bfloat16 only. `auto` (default) takes `cudnn` where it can run (a GPU, bfloat16
  compute, head_dim a multiple of 8 up to 128), else `xla`. On one H200 at context 2048 the
  written-out form held a 50M model's train step to 9% MFU (bench/gpu_bench.py).

The shape recipe, `shape_for_params`: (d_model, n_layers, n_heads, d_ff) for a target N.

Fixed proportions, so that loss against N is smooth (a sweep's sizes differ in scale, not in
kind):

    d_ff      ≈ ρ · d_model           ρ = 8/3 for SwiGLU (4 for a plain MLP), within a factor
                                      FF_BAND = 1.25 either way: d_ff is the fine knob that
                                      lands N on its target between two widths
    head_dim  = the largest power of two ≤ d_model / 8, clipped to [8, 128]
                                      (8 to 15 heads up to d_model 1024, then head_dim 128);
                                      d_model and d_ff are multiples of it, hence multiples of
                                      128 (MXU and tensor-core tiles) from d_model 1024 up
    n_layers  ≥ 2                     (one layer cannot form induction heads), the depth whose
                                      width at d_ff = ρ·d_model puts d_model / n_layers nearest
                                      ASPECT = 64 (Kaplan et al.'s flat optimum spans 20-200;
                                      GPT-3 and Chinchilla run 64-128)

Depth and width therefore grow together, d_model ≈ 64·n_layers once n_layers > 2 (below,
two layers and a width that grows alone). Given the depth, d_model is the multiple of head_dim
just below or above the width that would land N exactly at d_ff = ρ·d_model; d_ff is the
multiple of head_dim in the band that lands N nearest, and of the two widths the one whose
d_ff is nearer ρ·d_model is taken among those landing within LANDING = 3%. Neighbouring
targets thus get neighbouring shapes: between targets 10^(1/16) apart, d_model / n_layers
moves by at most a factor 1.25 (from d_model 64 up; the width step is at most 1/8) except
where a layer is added (then by ((L+1)/L)^1.5 at most, 1.84 at 2 → 3 layers), d_ff /
d_model stays within [ρ/1.25, 1.25·ρ], and head_dim changes only by doubling at d_model =
128, 256, 512 and 1024.

Where widths are too coarse for that band to bridge (d_model below ~48: N below ~6e4 with a
258-byte vocabulary, a few 1e6 with 32000 tokens untied) the band widens to 1.5, then 2,
only as far as landing needs; a target more than 10% from every shape is refused. N is
counted by `scaling.runs.conventions.params` under `convention`, so the recipe and every run
record agree by construction. A `total` target below the embedding of the smallest model
(V·16, twice untied) cannot be met: with a 32000-token vocabulary that is ~1M parameters;
use `convention="non_embedding"` (Kaplan et al.) to size small models for large
vocabularies."""

import dataclasses
import math
from typing import Literal

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.scaling.runs.conventions import ParamsConvention, Shape


Remat = Literal["none", "minimal", "full"]
# Names only: jax is imported where the model is built (`decoder.REMAT_POLICIES`, the dtype
# properties below), so that `chinchax models` and the grid read shapes without it.
REMAT = ("none", "minimal", "full")
DTYPES = ("float32", "bfloat16")
ATTENTION = ("auto", "xla", "cudnn")  # `attention`: see the module docstring


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Everything `models.decoder.Decoder` needs: a shape and numerics options."""

  shape: Shape
  compute_dtype: str = "bfloat16"
  param_dtype: str = "float32"
  remat: Remat = "none"
  z_loss: float = 0.0
  rope_base: float = 10_000.0
  init_std: float = 0.02  # embedding std; weight matrices use fan-in scaling
  unroll_layers: int = 8
  attn_block: int | None = None
  attention: str = "auto"

  def validate(self) -> "ModelConfig":
    self.shape.validate()
    if self.shape.head_dim % 2:
      raise UserError(
          f"model: head_dim={self.shape.head_dim} is odd; rotary embeddings rotate pairs of "
          "features, so pick n_heads with an even d_model / n_heads")
    for name in ("compute_dtype", "param_dtype"):
      if getattr(self, name) not in DTYPES:
        raise UserError(
            f"model: {name}={getattr(self, name)!r} is not one of {', '.join(DTYPES)}")
    if self.remat not in REMAT:
      raise UserError(f"model: remat={self.remat!r} is not one of {', '.join(REMAT)}")
    if self.attn_block is not None and self.attn_block < 0:
      raise UserError(f"model: attn_block must be >= 0 (0: off), got {self.attn_block}")
    if self.z_loss < 0:
      raise UserError(f"model: z_loss must be >= 0, got {self.z_loss}")
    if self.attention not in ATTENTION:
      raise UserError(
          f"model: attention={self.attention!r} is not one of {', '.join(ATTENTION)}")
    return self

  def attention_kernel(self, platform: str | None = None) -> str:
    """`attention` resolved for a backend (`jax.default_backend()` unless given): xla | cudnn.

    A UserError where `cudnn` is asked for and cannot run there."""
    platform = platform or _backend()
    why_not = []
    if platform not in ("gpu", "cuda"):
      why_not.append(f"a GPU (this backend is {platform})")
    if self.compute_dtype != "bfloat16":
      why_not.append(f"compute_dtype bfloat16 (not {self.compute_dtype})")
    if self.shape.head_dim % 8 or self.shape.head_dim > 128:
      why_not.append(f"head_dim a multiple of 8 up to 128 (not {self.shape.head_dim})")
    if self.attention == "xla" or (self.attention == "auto" and why_not):
      return "xla"
    if why_not:
      raise UserError(f"model: attention=cudnn needs {' and '.join(why_not)}: use "
                      "--config.model.attention=auto (or xla)")
    return "cudnn"

  @property
  def attention_block(self) -> int:
    """`attn_block` resolved: None is the backend's default."""
    if self.attn_block is not None:
      return self.attn_block
    return max(32, self.shape.seq_len // 4) if _backend() == "cpu" else 0

  @property
  def dtype(self):
    return _jnp_dtype(self.compute_dtype)

  @property
  def pdtype(self):
    return _jnp_dtype(self.param_dtype)


def _backend() -> str:
  import jax  # pylint: disable=g-import-not-at-top
  return jax.default_backend()


def _jnp_dtype(name: str):
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  return {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[name]


ASPECT = 64        # d_model / n_layers
MIN_LAYERS = 2
MIN_D_MODEL = 16
FF_BAND = 1.25     # d_ff / (ρ · d_model) stays within [1/FF_BAND, FF_BAND] ...
WIDE_BANDS = (1.5, 2.0)  # ... or, only where no width lands within it, the first that does
LANDING = 0.03     # relative distance from the target that counts as "on target"
REFUSE = 0.10      # farther than this from every shape: the target is refused
MAX_LAYERS = 1024


def head_dim(d_model: int) -> int:
  """The power of two in [8, 128] nearest below d_model / 8."""
  k = 8
  while k < 128 and d_model >= 16 * k:
    k *= 2
  return k


def ff_ratio(gated: bool) -> float:
  return 8 / 3 if gated else 4.0


def _width(N: float, L: int, vocab_size: int, tied: bool, gated: bool,
           convention: ParamsConvention) -> float:
  """The real d with N(d, L, d_ff = ρ·d) = N: the positive root of a quadratic in d."""
  m, rho = (3 if gated else 2), ff_ratio(gated)
  emb = 0 if convention == "non_embedding" else vocab_size * (1 if tied else 2)
  a, b = L * (4 + m * rho), emb + 2 * L + 1  # per layer 4d² + m·d·f + 2d; final norm d
  root = math.sqrt(b * b + 4 * a * N)
  d = (-b + root) / (2 * a)
  # An embedding far beyond N (a vocabulary of billions) cancels -b + root to 0; the same root
  # without the cancellation keeps d positive, so the target is refused as too small.
  return d if d > 0 else 2 * N / (b + root)


def _depth(N: float, vocab_size: int, tied: bool, gated: bool,
           convention: ParamsConvention) -> int:
  best, L = None, MIN_LAYERS
  while L <= MAX_LAYERS:
    aspect = _width(N, L, vocab_size, tied, gated, convention) / L
    off = abs(math.log(aspect / ASPECT))
    if best is not None and off >= best[0]:
      break  # d/L falls as L grows: the distance from ASPECT is unimodal in L
    best, L = (off, L), L + 1
  return best[1]


def _candidates(N, L, vocab_size, seq_len, tied, gated, convention, band):
  """(shape, N) for the widths either side of the exact one, d_ff landing N in the band."""
  d_exact = max(_width(N, L, vocab_size, tied, gated, convention), MIN_D_MODEL)
  k = head_dim(int(d_exact))
  # The two widths either side, and where the embedding is most of N (one width step moves
  # it more than d_ff can take back) the next two on each side.
  widths = {max(MIN_D_MODEL, k * (math.floor(d_exact / k) + j)) for j in (-2, -1, 0, 1, 2, 3)}
  m, rho = (3 if gated else 2), ff_ratio(gated)
  for d in sorted(widths):
    k = head_dim(d)
    if d % k:  # d sits just past a head_dim doubling: the next multiple of the new one
      d = k * math.ceil(d / k)
    base = Shape(d, L, d // k, 0, vocab_size, seq_len, tied=tied, gated=gated)
    f_exact = (N - conventions.params(base, convention)) / (L * m * d)
    lo = k * math.ceil(rho * d / band / k - 1e-9)
    hi = k * math.floor(rho * d * band / k + 1e-9)
    f = min(max(k * round(f_exact / k), lo), hi)
    s = Shape(d, L, d // k, max(f, k), vocab_size, seq_len, tied=tied, gated=gated)
    yield s, conventions.params(s, convention)


def _smallest(vocab_size: int, seq_len: int, tied: bool, gated: bool) -> Shape:
  d, k = MIN_D_MODEL, head_dim(MIN_D_MODEL)
  f = k * math.ceil(ff_ratio(gated) * d / WIDE_BANDS[-1] / k)
  return Shape(d, MIN_LAYERS, d // k, f, vocab_size, seq_len, tied=tied, gated=gated)


def shape_for_params(
    N_target: float,
    *,
    vocab_size: int,
    seq_len: int,
    tied: bool = False,
    gated: bool = True,
    convention: ParamsConvention = "total",
) -> Shape:
  """The recipe's shape for `N_target` parameters (see the module docstring)."""
  if not (N_target > 0 and math.isfinite(N_target)):
    raise UserError(f"shape recipe: N_target must be a positive number, got {N_target}")
  if vocab_size <= 0 or seq_len <= 0:
    raise UserError(
        f"shape recipe: vocab_size and seq_len must be positive, got {vocab_size}, {seq_len}")
  if convention not in conventions.PARAMS_CONVENTIONS:
    raise UserError(f"shape recipe: convention {convention!r} is not one of "
                    f"{', '.join(conventions.PARAMS_CONVENTIONS)}")
  L = _depth(N_target, vocab_size, tied, gated, convention)
  rho = ff_ratio(gated)
  d_exact = _width(N_target, L, vocab_size, tied, gated, convention)

  def key(c):
    s, N = c
    miss = abs(math.log(N / N_target))
    if miss > math.log1p(LANDING):
      return (1, miss)
    return (0, abs(math.log(s.d_ff / (rho * s.d_model))) + abs(math.log(s.d_model / d_exact)))

  for band in (FF_BAND,) + WIDE_BANDS:
    s, N = min(_candidates(N_target, L, vocab_size, seq_len, tied, gated, convention, band),
               key=key)
    if key((s, N))[0] == 0:
      break
  if abs(N / N_target - 1) > REFUSE:
    smallest = conventions.params(_smallest(vocab_size, seq_len, tied, gated), convention)
    raise UserError(
        f"shape recipe: no decoder with vocab_size={vocab_size} has about {fmt.num(N_target)} "
        f"{convention} parameters (the nearest has {fmt.num(N)}, the smallest "
        f"{fmt.num(smallest)}); pick another N_target or count non_embedding parameters")
  return s
