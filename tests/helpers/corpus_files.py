"""Small text corpora written as files, with their split counted by hand from the documented
rule (sweeps/data/text_builder.py: a file is held out iff sha256(relpath + NUL + bytes)[:8]
/ 2^64 < val_fraction), not through the builder; and the bytes tokenizer's stream of them."""

import hashlib
import os

import numpy as np

EOD = 256  # the bytes tokenizer: one token per byte, then end-of-document


def held_out(relpath: str, content: bytes, fraction: float = 0.05) -> bool:
  digest = hashlib.sha256(relpath.encode() + b"\0" + content).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction


def write(root, texts: dict[str, str]) -> str:
  for rel, text in texts.items():
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  return str(root)


def docs(n: int, val: int | None, fraction: float = 0.05, size: int = 300) -> dict[str, str]:
  """n documents of about `size` bytes, `val` of them held out (None: any number), found by
  trying names."""
  out, held, i = {}, 0, 0
  while len(out) < n:
    rel, text = f"d{i // 7}/doc{i}.txt", f"doc {i}: " + "lorem ipsum é " * (size // 14)
    is_val = held_out(rel, text.encode(), fraction)
    if val is None or (is_val and held < val) or (not is_val and len(out) - held < n - val):
      out[rel], held = text, held + is_val
    i += 1
  return out


def tokens(texts) -> int:
  """The bytes tokenizer's stream length of `texts`: a token per byte, one per end."""
  return sum(len(t.encode()) + 1 for t in texts)


def stream(texts) -> np.ndarray:
  """The bytes tokenizer's packed stream of `texts`, in the given order."""
  return np.array([t for text in texts for t in (list(text.encode()) + [EOD])], np.uint16)
