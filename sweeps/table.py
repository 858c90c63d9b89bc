"""The dry-run table of a sweep grid: one row per cell, then the totals and the refusals."""

from collections.abc import Callable, Sequence

from chinchax.scaling.numerics import fmt
from chinchax.sweeps.grid import Cell


def duration(seconds: float) -> str:
  for unit, size, top in (("s", 1, 60), ("m", 60, 60), ("h", 3600, 24)):
    if round(seconds / size, 1) < top:
      return f"{seconds / size:.0f}s" if unit == "s" else f"{seconds / size:.1f}{unit}"
  return f"{seconds / 86400:.1f}d"


def format_table(cells: Sequence[Cell], refusals: Sequence[str] = (),
                 seconds: Callable[[Cell], float] | None = None,
                 source: str | None = None, notes: Sequence[str] = ()) -> str:
  """The dry-run table: one row per cell, then totals and the refusals.

  seconds: a cell's estimated wall time (`estimate.time_model`); adds a time column and a total.
  source: where the LR and batch come from (`Recipe.source`, e.g. "law, law" when a fitted
  hparams.json gives both); adds that column; `notes` (the laws, cells beyond them) follow.
  """
  head = ["cell", "C", "N", "d_model x L", "heads", "d_ff", "D", "D/N", "steps", "batch",
          "peak LR", "C 6ND", "C chinchilla"]
  if source:
    head.insert(head.index("peak LR") + 1, "LR, batch from")
  if seconds is not None:
    head.append("time")
  rows = []
  for c in cells:
    s = c.shape
    row = [c.name, fmt.num(c.budget), f"{c.N:,}", f"{s.d_model} x {s.n_layers}",
           str(s.n_heads), str(s.d_ff), fmt.num(c.D), f"{c.tokens_per_param:.1f}",
           str(c.steps), f"{c.batch_size} x {c.seq_len}", fmt.num(c.peak_lr),
           fmt.num(c.flops_6ND), fmt.num(c.flops_chinchilla)]
    if source:
      row.insert(head.index("LR, batch from"), source)
    if seconds is not None:
      row.append(duration(seconds(c)))
    rows.append(row)
  widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
  line = lambda r: "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                             for i, (v, w) in enumerate(zip(r, widths))).rstrip()
  out = [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]
  total_6nd = sum(c.flops_6ND for c in cells)
  total_ch = sum(c.flops_chinchilla for c in cells)
  summary = (f"{len(cells)} cells, {len(refusals)} refused; total {fmt.num(total_6nd)} FLOPs "
             f"(6ND), {fmt.num(total_ch)} (chinchilla)")
  if seconds is not None:
    summary += f"; about {duration(sum(map(seconds, cells)))} of training"
  out += ["", summary]
  out += [f"  {r}" for r in refusals]
  out += list(notes)
  return "\n".join(out)
