"""law.json's bootstrap draws packed into one string on disk (schema v3).

A thousand draws of five numbers as JSON lists are ~100 KB of a law.json a person reads;
packed they are one line of ~28 KB: the rows as comma-separated text at the 7 significant
digits law_build rounds them to (so the round trip is exact), zlib-compressed, base64.
In memory (`ScalingLaw.doc`, `to_dict`) the draws stay a list of rows. A file whose
`bootstrap.samples` is a list (v2, or written by hand) still loads.
"""

import base64
import binascii
import copy
import zlib
from typing import Any

from chinchax.errors import UserError

KEY = "samples_zlib"
ENCODING = "rows of %.7g values, comma-separated, newline-terminated; zlib; base64"
_MAX_BYTES = 256 * 2**20  # a packed law.json of a million draws is far below this


def pack(doc: dict[str, Any]) -> dict[str, Any]:
  """A copy of `doc` with bootstrap.samples as one packed string."""
  boot = doc.get("bootstrap")
  if not isinstance(boot, dict) or not isinstance(boot.get("samples"), list):
    return doc
  text = "".join(",".join(f"{x:.7g}" for x in row) + "\n" for row in boot["samples"])
  out = dict(doc)
  out["bootstrap"] = {k: v for k, v in boot.items() if k != "samples"}
  out["bootstrap"][KEY] = base64.b64encode(zlib.compress(text.encode("ascii"), 9)).decode()
  out["bootstrap"]["samples_encoding"] = ENCODING
  return out


def unpack(doc: Any) -> Any:
  """A copy of `doc` with packed draws as bootstrap.samples rows; anything else as it is."""
  boot = doc.get("bootstrap") if isinstance(doc, dict) else None
  if not isinstance(boot, dict) or KEY not in boot:
    return doc
  packed = boot[KEY]
  try:
    if not isinstance(packed, str):
      raise ValueError(f"expected a string, got {type(packed).__name__}")
    d = zlib.decompressobj()
    text = d.decompress(base64.b64decode(packed, validate=True), _MAX_BYTES)
    if d.unconsumed_tail:
      raise ValueError(f"more than {_MAX_BYTES} bytes unpacked")
    rows = [[float(x) for x in line.split(",")]
            for line in text.decode("ascii").splitlines() if line]
  except (ValueError, binascii.Error, zlib.error, UnicodeDecodeError) as e:
    raise UserError(f"bootstrap.{KEY}: cannot unpack the draws ({e}); expected a law.json "
                    "written by `chinchax fit`") from None
  out = copy.copy(doc)
  out["bootstrap"] = {k: v for k, v in boot.items() if k not in (KEY, "samples_encoding")}
  out["bootstrap"]["samples"] = rows
  return out
