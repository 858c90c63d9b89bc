"""Parameter and FLOP counting for a decoder shape: the one source of truth.

Conventions (written into every artifact, docs/DESIGN.md):

* **N `total`** (Hoffmann et al. 2022, default): every trainable parameter, embeddings
  included. For the chinchax decoder (RMSNorm, rotary positions, no biases):

      N_total = V·d·(1 if tied else 2)                      # embedding (+ untied head)
              + L·(4·d·h·k + m·d·f + 2·d)                  # QKVO, MLP, two RMSNorm scales
              + d                                          # final RMSNorm scale

  with h·k = n_heads·head_dim (= d_model here) and m = 3 matrices for a gated (SwiGLU) MLP,
  2 for a plain one.
* **N `non_embedding`** (Kaplan et al. 2020): N_total minus every vocabulary-sized matrix
  (the input embedding and, when untied, the output head).
* **C `6ND`** (default): 6·N·D with N under the chosen parameter convention.
* **C `chinchilla`**: the full count of Hoffmann et al. App. F, per sequence of length S:

      embeddings      2·S·V·d
      QKV projections 2·3·S·d·(k·h)
      logits  K·Q     2·S·S·(k·h)
      softmax         3·h·S·S
      softmax · V     2·S·S·(k·h)
      output proj.    2·S·(k·h)·d
      MLP             2·S·m·d·f          (the paper has m = 2; SwiGLU has m = 3)
      final logits    2·S·d·V
      forward  = embeddings + L·(attention + MLP) + final logits
      training = 3 × forward             (backward = 2 × forward)

  The embedding term counts the lookup as a one-hot matmul, as the paper does. Training FLOPs
  per token are the per-sequence count divided by S.
"""

import dataclasses
import math
from typing import Literal

ParamsConvention = Literal["total", "non_embedding"]
FlopsConvention = Literal["6ND", "chinchilla"]
PARAMS_CONVENTIONS: tuple[str, ...] = ("total", "non_embedding")
FLOPS_CONVENTIONS: tuple[str, ...] = ("6ND", "chinchilla")


@dataclasses.dataclass(frozen=True)
class Shape:
  """A decoder's shape: everything the counts depend on."""

  d_model: int
  n_layers: int
  n_heads: int
  d_ff: int
  vocab_size: int
  seq_len: int
  tied: bool = False
  gated: bool = True  # SwiGLU: three MLP matrices instead of two.

  @property
  def head_dim(self) -> int:
    return self.d_model // self.n_heads

  @property
  def mlp_matrices(self) -> int:
    return 3 if self.gated else 2

  def validate(self) -> "Shape":
    from chinchax.errors import UserError

    for name in ("d_model", "n_layers", "n_heads", "d_ff", "vocab_size", "seq_len"):
      if getattr(self, name) <= 0:
        raise UserError(f"shape: {name} must be positive, got {getattr(self, name)}")
    if self.d_model % self.n_heads:
      raise UserError(
          f"shape: n_heads={self.n_heads} does not divide d_model={self.d_model}; "
          "pick n_heads so that d_model / n_heads is an integer head size")
    return self


# --------------------------------------------------------------------------- parameters


def embedding_params(s: Shape) -> int:
  return s.vocab_size * s.d_model * (1 if s.tied else 2)


def layer_params(s: Shape) -> int:
  attn = 4 * s.d_model * s.n_heads * s.head_dim
  mlp = s.mlp_matrices * s.d_model * s.d_ff
  norms = 2 * s.d_model
  return attn + mlp + norms


def params(s: Shape, convention: ParamsConvention = "total") -> int:
  """N under `convention` ('total' includes embeddings; 'non_embedding' excludes them)."""
  non_embedding = s.n_layers * layer_params(s) + s.d_model
  if convention == "non_embedding":
    return non_embedding
  if convention == "total":
    return non_embedding + embedding_params(s)
  raise ValueError(f"unknown params convention {convention!r}; use one of {PARAMS_CONVENTIONS}")


# --------------------------------------------------------------------------- FLOPs


def chinchilla_forward_terms(s: Shape) -> dict[str, float]:
  """Forward FLOPs per sequence, term by term (Hoffmann et al. App. F)."""
  S, V, d, f, L = s.seq_len, s.vocab_size, s.d_model, s.d_ff, s.n_layers
  kh = s.head_dim * s.n_heads
  return {
      "embeddings": 2.0 * S * V * d,
      "qkv": L * 2.0 * 3 * S * d * kh,
      "attn_logits": L * 2.0 * S * S * kh,
      "attn_softmax": L * 3.0 * s.n_heads * S * S,
      "attn_values": L * 2.0 * S * S * kh,
      "attn_out": L * 2.0 * S * kh * d,
      "mlp": L * 2.0 * S * s.mlp_matrices * d * f,
      "final_logits": 2.0 * S * d * V,
  }


def forward_flops_per_token(s: Shape) -> float:
  """Chinchilla-convention forward FLOPs per token (per-sequence count / seq_len)."""
  return sum(chinchilla_forward_terms(s).values()) / s.seq_len


def flops_per_token(
    s: Shape,
    convention: FlopsConvention = "6ND",
    params_convention: ParamsConvention = "total",
) -> float:
  """Training FLOPs per token: 6·N, or 3 × the Chinchilla forward count."""
  if convention == "6ND":
    return 6.0 * params(s, params_convention)
  if convention == "chinchilla":
    return 3.0 * forward_flops_per_token(s)
  raise ValueError(f"unknown FLOPs convention {convention!r}; use one of {FLOPS_CONVENTIONS}")


def training_flops(
    s: Shape,
    D: float,
    convention: FlopsConvention = "6ND",
    params_convention: ParamsConvention = "total",
) -> float:
  """C for D training tokens."""
  return flops_per_token(s, convention, params_convention) * D


def tokens_for_budget(
    s: Shape,
    C: float,
    convention: FlopsConvention = "6ND",
    params_convention: ParamsConvention = "total",
) -> float:
  """D such that the run spends exactly C under `convention`."""
  return C / flops_per_token(s, convention, params_convention)


def counts(s: Shape, D: float) -> dict[str, float]:
  """Both N and both C conventions for a run: what every run record stores."""
  return {
      "N_total": params(s, "total"),
      "N_non_embedding": params(s, "non_embedding"),
      "flops_6ND": training_flops(s, D, "6ND", "total"),
      "flops_chinchilla": training_flops(s, D, "chinchilla"),
  }


def six_nd(N: float, D: float) -> float:
  return 6.0 * N * D


def is_close_to_6nd(N: float, D: float, C: float, rtol: float = 0.1) -> bool:
  return math.isclose(C, six_nd(N, D), rel_tol=rtol)
