"""Numbers as chinchax writes them, computed without chinchax: `format()` with the exponent's
`+` and leading zeros dropped (1.26e6, not 1.26e+06)."""

import re


def written(x: float, spec: str = ".3g") -> str:
  return re.sub(r"e\+0*(\d)", r"e\1", format(x, spec))
