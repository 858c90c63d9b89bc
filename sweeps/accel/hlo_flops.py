"""FLOPs of a compiled XLA program with every loop counted as many times as it runs.

XLA's cost analysis (`Compiled.cost_analysis()["flops"]`, per device) counts the body of a
`while` loop once. The decoder scans its layers (`nn.scan`), so that figure holds one layer of
L, and a gradient-accumulation scan holds one microbatch of k. This module takes the optimized
HLO text of the compiled program and counts

    total(C) = once(C) + Σ_{while w in C} (trips(w) · total(body_w) − once(body_w))

where once(C) is XLA's own cost analysis of computation C as an entry (loops in it once) and
the sum runs over the loops C calls directly or through non-loop calls. The trip count is
the loop's `known_trip_count` when the compiler records it, else the bound of its condition
`i < K` (jax's scans count from 0 in steps of 1). A loop whose trip count cannot be read
counts once, and `unknown_loops` says how many there were, except a loop of the entry
computation when the caller knows its trips (`entry_trips`): the train chunk
(`sweeps.train.step.make_train_chunk`) is a `fori_loop` to an argument n, which the program
does not hold, and runs K steps when the chunk is full.

Each `once` is XLA's `hlo_module_cost_analysis` on a module rebuilt from the text with that
computation as the entry, on the CPU client: the count is backend-independent HLO arithmetic
(for a TPU program it matches the TPU compiler's own figure to within a few FLOPs).
"""

import dataclasses
import re

import jax

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_WHILE = re.compile(r"\bwhile\(.*?condition=%?([\w.\-]+), body=%?([\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"')
_CALLEES = re.compile(r"\b(?:calls|to_apply|branch_computations|called_computations)="
                      r"\{?(%?[\w.\-]+(?:,\s*%?[\w.\-]+)*)\}?")
_CONST = re.compile(r"%([\w.\-]+) = s32\[\]\S* constant\((-?\d+)\)")
_ROOT_LT = re.compile(r"ROOT .*compare\(%[\w.\-]+, %([\w.\-]+)\), direction=LT")
_STACK_FRAME = re.compile(r"\s*stack_frame_id=\d+")


@dataclasses.dataclass(frozen=True)
class Flops:
  flops: float          # per device, loops counted trips times
  flops_once: float     # XLA's figure: loop bodies once
  loops: int
  unknown_loops: int    # counted once (the entry's given `entry_trips` are not unknown)


def _computations(text: str) -> tuple[dict[str, list[str]], str]:
  comps, entry, name, lines = {}, "", None, []
  for line in text.splitlines():
    if name is None:
      m = _HEADER.match(line)
      if m and not line.startswith("HloModule"):
        name, lines = m.group(2), [_STACK_FRAME.sub("", line)]
        entry = name if m.group(1) else entry
      continue
    lines.append(_STACK_FRAME.sub("", line))
    if line.strip() == "}":
      comps[name], name = lines, None
  return comps, entry


def _module(comps: dict[str, list[str]], entry: str) -> str:
  out = ["HloModule flops", ""]
  for name, lines in comps.items():
    head = re.sub(r"^ENTRY\s+", "", lines[0])
    out += [("ENTRY " + head) if name == entry else head, *lines[1:], ""]
  return "\n".join(out)


def _trips(comps, line: str, cond: str) -> int | None:
  t = _TRIP.search(line)
  if t:
    return int(t.group(1))
  consts = {}
  for body_line in comps.get(cond, [])[1:]:
    c = _CONST.search(body_line)
    if c:
      consts[c.group(1)] = int(c.group(2))
    r = _ROOT_LT.search(body_line)
    if r and r.group(1) in consts:
      return consts[r.group(1)]
  return None


def _loops(comps, name: str, seen: set[str]) -> list[tuple[str, int | None]]:
  """(body, trips) of the loops `name` runs directly or through calls that are not loops."""
  out = []
  for line in comps[name][1:]:
    w = _WHILE.search(line)
    if w:
      out.append((w.group(2), _trips(comps, line, w.group(1))))
      continue
    for m in _CALLEES.finditer(line):
      for callee in (c.strip().lstrip("%") for c in m.group(1).split(",")):
        if callee in comps and callee not in seen:
          seen.add(callee)
          out += _loops(comps, callee, seen)
  return out


def count(hlo_text: str, entry_trips: int | None = None) -> Flops:
  """Per-device FLOPs of the optimized HLO `hlo_text` (`Compiled.as_text()`); a loop of the
  entry computation whose trip count the program does not hold runs `entry_trips` times."""
  from jax._src.lib import _jax  # pylint: disable=g-import-not-at-top
  from jaxlib import _hlo  # pylint: disable=g-import-not-at-top

  comps, entry = _computations(hlo_text)
  client = jax.devices("cpu")[0].client
  once_memo: dict[str, float] = {}
  total_memo: dict[str, float] = {}
  stats = {"loops": 0, "unknown": 0}

  def once(name: str) -> float:
    if name not in once_memo:
      module = _hlo.hlo_module_from_text(_module(comps, name))
      once_memo[name] = float(_jax.hlo_module_cost_analysis(client, module).get("flops", 0.0))
    return once_memo[name]

  def total(name: str) -> float:
    if name not in total_memo:
      extra = 0.0
      for body, trips in _loops(comps, name, {name}):
        stats["loops"] += 1
        if trips is None and name == entry and entry_trips is not None:
          trips = entry_trips
        if trips is None:
          stats["unknown"] += 1
          trips = 1
        extra += trips * total(body) - once(body)
      total_memo[name] = once(name) + extra
    return total_memo[name]

  flops = total(entry)
  return Flops(flops, once(entry), stats["loops"], stats["unknown"])
