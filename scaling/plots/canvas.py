"""The canvas every figure is saved through: PNG and SVG rendered in memory, then each file
written atomically (`chinchax.atomic`), and one colour scale for series of any count."""

import io

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from chinchax import atomic

FORMATS = ("png", "svg")
DPI = 150


def save(fig: Figure, stem: str) -> list[str]:
  """Writes `stem`.png and `stem`.svg; both are rendered before either is written, so a
  failure writes nothing. The paths written."""
  # The tight box is laid out once for both formats: "tight" in each savefig laid the whole
  # figure out again before drawing it (a third of a fit's plotting time).
  renderer = FigureCanvasAgg(fig).get_renderer()
  box = fig.get_tightbbox(renderer).padded(mpl.rcParams["savefig.pad_inches"])
  rendered = []
  for fmt in FORMATS:
    buf = io.BytesIO()
    # Reproducible SVG: no date, and element ids hashed with a fixed salt (else a random one
    # per process), so a figure drawn by a worker is the bytes of one drawn here.
    metadata = {"Date": None} if fmt == "svg" else {}
    with mpl.rc_context({"svg.hashsalt": "chinchax"}):
      fig.savefig(buf, format=fmt, dpi=DPI, bbox_inches=box, metadata=metadata)
    rendered.append((f"{stem}.{fmt}", buf.getvalue()))
  for path, data in rendered:
    atomic.write_bytes(path, data)
  return [path for path, _ in rendered]


def prime() -> None:
  """Builds what matplotlib builds on a first figure (the math-text parser of log axes' tick
  labels, the fonts' metrics): a worker does it before its first figure is asked for."""
  fig = Figure(figsize=(1, 1))
  ax = fig.add_subplot()
  ax.set_xscale("log")
  ax.set_xlim(1, 100)
  ax.set_title("x")
  for fmt in FORMATS:
    fig.savefig(io.BytesIO(), format=fmt, dpi=DPI)


def colors(n: int):
  from matplotlib import colormaps
  return colormaps["viridis"](np.linspace(0.0, 0.9, max(n, 1)))
