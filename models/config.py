"""The decoder's configuration: a `scaling.conventions.Shape` plus how it is computed.

The shape fixes every parameter and FLOP count (`scaling.conventions`); the options here
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
"""

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp

from chinchax.scaling.conventions import Shape
from chinchax.errors import UserError

Remat = Literal["none", "minimal", "full"]
REMAT_POLICIES: dict[str, object] = {
    "none": None,
    "minimal": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "full": jax.checkpoint_policies.nothing_saveable,
}
DTYPES: dict[str, jnp.dtype] = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


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
    if self.remat not in REMAT_POLICIES:
      raise UserError(
          f"model: remat={self.remat!r} is not one of {', '.join(REMAT_POLICIES)}")
    if self.attn_block is not None and self.attn_block < 0:
      raise UserError(f"model: attn_block must be >= 0 (0: off), got {self.attn_block}")
    if self.z_loss < 0:
      raise UserError(f"model: z_loss must be >= 0, got {self.z_loss}")
    return self

  @property
  def attention_block(self) -> int:
    """`attn_block` resolved: None is the backend's default."""
    if self.attn_block is not None:
      return self.attn_block
    return max(32, self.shape.seq_len // 4) if jax.default_backend() == "cpu" else 0

  @property
  def dtype(self) -> jnp.dtype:
    return DTYPES[self.compute_dtype]

  @property
  def pdtype(self) -> jnp.dtype:
    return DTYPES[self.param_dtype]
