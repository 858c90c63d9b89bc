"""law.json's bootstrap draws packed into one string on disk (schema v3).

A thousand draws of five numbers as JSON lists are ~100 KB of a law.json a person reads;
packed they are one line of ~30 KB: the rows as comma-separated text at the 7 significant
digits law_build rounds them to (so the round trip is exact), zlib-compressed, base64.
In memory (`ScalingLaw.doc`, `to_dict`) the draws stay a list of rows. A file whose
`bootstrap.samples` is a list (v2, or written by hand) still loads.

An approach's bulky point data (Approach 1's loss-curve envelope: ~90 KB of a smoke
law.json) is packed the same way as `KEY_zlib`: its compact JSON, zlib, base64 (exact).
"""

import base64
import binascii
import copy
import itertools
import json
import zlib
from typing import Any

from chinchax.errors import UserError

KEY = "samples_zlib"
BULKY = ("envelope",)  # approach entries' keys packed on disk
SUFFIX = "_zlib"
ENCODING = "rows of %.7g values, comma-separated, newline-terminated; zlib; base64"
# zlib's fastest: 4,000 draws (186 KB of text) in 1.7 ms and 89 KB, where the default (6)
# took 11.4 ms for 80 KB.
LEVEL = 1
_MAX_BYTES = 256 * 2**20  # a packed law.json of a million draws is far below this


def pack(doc: dict[str, Any]) -> dict[str, Any]:
  """A copy of `doc` with bootstrap.samples as one packed string."""
  boot = doc.get("bootstrap")
  if not isinstance(boot, dict) or not isinstance(boot.get("samples"), list):
    return _approaches(doc, packing=True)
  text = _rows_text(boot["samples"])
  out = _approaches(doc, packing=True)
  out["bootstrap"] = {k: v for k, v in boot.items() if k != "samples"}
  out["bootstrap"][KEY] = base64.b64encode(zlib.compress(text.encode("ascii"), LEVEL)).decode()
  out["bootstrap"]["samples_encoding"] = ENCODING
  return out


def _rows_text(rows: list) -> str:
  """Each row's values at %.7g, comma-separated, newline-terminated."""
  k = len(rows[0]) if rows else 0
  if all(type(row) is list and len(row) == k for row in rows):  # one format call for all
    return ((",".join(["%.7g"] * k) + "\n") * len(rows)) % tuple(itertools.chain(*rows))
  return "".join(",".join(f"{x:.7g}" for x in row) + "\n" for row in rows)


def _zip(obj: Any) -> str:
  text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
  return base64.b64encode(zlib.compress(text.encode("utf-8"), LEVEL)).decode()


def _inflate(packed: Any) -> bytes:
  """The bytes a packed string holds; ValueError (or base64's, zlib's) when it holds none,
  or more than _MAX_BYTES."""
  if not isinstance(packed, str):
    raise ValueError(f"expected a string, got {type(packed).__name__}")
  d = zlib.decompressobj()
  data = d.decompress(base64.b64decode(packed, validate=True), _MAX_BYTES)
  if d.unconsumed_tail:
    raise ValueError(f"more than {_MAX_BYTES} bytes unpacked")
  return data


def _unzip(packed: Any, where: str) -> Any:
  try:
    return json.loads(_inflate(packed).decode("utf-8"))
  except (ValueError, binascii.Error, zlib.error, UnicodeDecodeError, RecursionError) as e:
    raise UserError(f"{where}: cannot unpack it ({e}); expected a law.json written by "
                    "`chinchax fit`") from None


def _entry(e: Any, k: str, packing: bool) -> Any:
  """One approach's entry with its BULKY values packed (or unpacked)."""
  if not isinstance(e, dict):
    return e
  out = {}
  for name, value in e.items():
    if packing and name in BULKY:
      out[f"{name}{SUFFIX}"] = _zip(value)
    elif not packing and name.endswith(SUFFIX) and name[:-len(SUFFIX)] in BULKY:
      out[name[:-len(SUFFIX)]] = _unzip(value, f"approaches.{k}.{name}")
    else:
      out[name] = value
  return out


def _approaches(doc: Any, packing: bool) -> Any:
  approaches = doc.get("approaches") if isinstance(doc, dict) else None
  if not isinstance(approaches, dict):
    return doc
  out = copy.copy(doc)
  out["approaches"] = {k: _entry(e, k, packing) for k, e in approaches.items()}
  return out


def unpack(doc: Any) -> Any:
  """A copy of `doc` with packed draws as bootstrap.samples rows and packed approach data
  as it was; anything else as it is."""
  doc = _approaches(doc, packing=False)
  boot = doc.get("bootstrap") if isinstance(doc, dict) else None
  if not isinstance(boot, dict) or KEY not in boot:
    return doc
  packed = boot[KEY]
  try:
    text = _inflate(packed)
    rows = [[float(x) for x in line.split(",")]
            for line in text.decode("ascii").splitlines() if line]
  except (ValueError, binascii.Error, zlib.error, UnicodeDecodeError) as e:
    raise UserError(f"bootstrap.{KEY}: cannot unpack the draws ({e}); expected a law.json "
                    "written by `chinchax fit`") from None
  out = copy.copy(doc)
  out["bootstrap"] = {k: v for k, v in boot.items() if k not in (KEY, "samples_encoding")}
  out["bootstrap"]["samples"] = rows
  return out
