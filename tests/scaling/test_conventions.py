"""Parameter and FLOP counting against hand-worked numbers and the paper's Table A4."""

import pytest

from chinchax.scaling.runs import conventions as cv
from chinchax.errors import UserError

# d=4, L=1, h=2 (head 2), f=8, V=10, S=3, SwiGLU, untied. Worked by hand:
#   embedding 2·V·d = 80; layer: QKVO 4·d·d = 64, MLP 3·d·f = 96, norms 2·d = 8 -> 168;
#   final norm 4. Total 252, non-embedding 172; tied: 212.
TINY = cv.Shape(d_model=4, n_layers=1, n_heads=2, d_ff=8, vocab_size=10, seq_len=3)


def test_params_by_hand():
  assert cv.params(TINY, "total") == 252
  assert cv.params(TINY, "non_embedding") == 172
  tied = cv.Shape(**{**TINY.__dict__, "tied": True})
  assert cv.params(tied, "total") == 212
  assert cv.params(tied, "non_embedding") == 172
  plain = cv.Shape(**{**TINY.__dict__, "gated": False})  # MLP 2·d·f = 64
  assert cv.params(plain, "total") == 252 - 32


def test_chinchilla_flops_by_hand():
  # Per sequence (S=3, k·h=4): embeddings 2·3·10·4=240, QKV 2·3·3·4·4=288, logits 2·9·4=72,
  # softmax 3·2·9=54, values 72, out proj 2·3·4·4=96, MLP 2·3·3·4·8=576, final 2·3·4·10=240.
  terms = cv.chinchilla_forward_terms(TINY)
  assert terms == {"embeddings": 240, "qkv": 288, "attn_logits": 72, "attn_softmax": 54,
                   "attn_values": 72, "attn_out": 96, "mlp": 576, "final_logits": 240}
  assert cv.forward_flops_per_token(TINY) == pytest.approx(1638 / 3)
  assert cv.flops_per_token(TINY, "chinchilla") == pytest.approx(1638)
  assert cv.flops_per_token(TINY, "6ND") == 6 * 252
  assert cv.flops_per_token(TINY, "6ND", "non_embedding") == 6 * 172
  assert cv.training_flops(TINY, 1e6, "6ND") == pytest.approx(6 * 252 * 1e6)
  assert cv.tokens_for_budget(TINY, 6 * 252 * 1e6) == pytest.approx(1e6)


def test_counts_record_has_both_conventions():
  c = cv.counts(TINY, D=100)
  assert c == {"N_total": 252, "N_non_embedding": 172,
               "flops_6ND": pytest.approx(151200), "flops_chinchilla": pytest.approx(163800)}


# Hoffmann et al. 2022, Table A4: (layers, d_model, ffw, heads, kv size, reported ratio).
# Their models use a two-matrix MLP, untied embeddings, vocab 32k and 2048-token sequences.
TABLE_A4 = [(10, 640, 2560, 10, 64, 1.03), (20, 1024, 4096, 16, 64, 1.10),
            (24, 1280, 5120, 10, 128, 1.08), (26, 1792, 7168, 14, 128, 1.04),
            (28, 2048, 8192, 16, 128, 1.03), (40, 3584, 14336, 28, 128, 0.99)]


def test_ratio_to_6nd_tracks_table_a4():
  """The table cannot be matched exactly from App. F as printed. With the one-hot embedding
  matmul counted, the 73M model's ratio would be 1.29, far from the reported 1.03; the table is
  tracked once that term is left out (a lookup does no matmul), so it was evidently left out
  there. What remains: our ratios sit 0.03-0.09 above the table's (their N also counts relative-
  position parameters our decoder lacks, which enlarges 6ND), peak at the same 305M model, and
  fall with size as the table's do.
  """
  ours = []
  for L, d, f, h, k, reported in TABLE_A4:
    assert h * k == d
    s = cv.Shape(d_model=d, n_layers=L, n_heads=h, d_ff=f, vocab_size=32000, seq_len=2048,
                 gated=False)
    terms = cv.chinchilla_forward_terms(s)
    no_lookup = 3 * (sum(terms.values()) - terms["embeddings"]) / s.seq_len
    ratio = no_lookup / cv.flops_per_token(s, "6ND")
    assert 0.0 <= ratio - reported <= 0.09, (L, d, ratio, reported)
    ours.append(ratio)
  reported = [r[-1] for r in TABLE_A4]
  assert ours.index(max(ours)) == reported.index(max(reported))
  assert all(a > b for a, b in zip(ours[1:], ours[2:]))


def test_attention_share_grows_with_context():
  short = cv.Shape(d_model=512, n_layers=8, n_heads=8, d_ff=1536, vocab_size=256, seq_len=128)
  long = cv.Shape(**{**short.__dict__, "seq_len": 8192})
  assert cv.params(short) == cv.params(long)
  assert cv.flops_per_token(long, "chinchilla") > 1.5 * cv.flops_per_token(short, "chinchilla")


def test_bad_shape_and_convention_refused():
  with pytest.raises(UserError, match="n_heads=3 does not divide d_model=4"):
    cv.Shape(d_model=4, n_layers=1, n_heads=3, d_ff=8, vocab_size=10, seq_len=3).validate()
  with pytest.raises(UserError, match="n_layers must be positive"):
    cv.Shape(d_model=4, n_layers=0, n_heads=2, d_ff=8, vocab_size=10, seq_len=3).validate()
  with pytest.raises(ValueError, match="unknown FLOPs convention"):
    cv.flops_per_token(TINY, "kaplan")
  with pytest.raises(ValueError, match="unknown params convention"):
    cv.params(TINY, "embedding")
