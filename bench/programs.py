"""The XLA programs a chinchax command compiles: how many, which, and what they cost.

    python bench/programs.py [--json] [--cold] -- COMMAND [FLAGS ...]
    python bench/programs.py -- sweep --config=smoke --workdir=/tmp/smoke-programs

Runs `chinchax COMMAND ...` in this process with a listener on jax's compile events
(`jax.monitoring`: one `/jax/core/compile/backend_compile_duration` per program handed to XLA,
compiled or read from the persistent cache; one `jaxpr_to_mlir_module_duration` per lowering),
then prints the programs by name (`jit(train_step)`, `jit(cos)` for an eager op, ...), how
many times each was lowered and compiled and the seconds XLA spent on it, and the totals.

`--cold` points the persistent compilation cache (`sweeps/accel/compile_cache.py`) at an empty
folder (removed at the end), so every program is compiled (a warm cache still counts each program once, at the
cost of reading it). `--json` prints one JSON object instead: {"programs", "lowerings",
"compile_s", "by_name": {NAME: [lowerings, compiles, seconds]}, "rc"}.
tests/sweeps/test_compile_programs.py reads that line to bound the tiny sweep's programs.
"""

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the checkout's chinchax, not an installed one

LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
COMPILE = "/jax/core/compile/backend_compile_duration"


class Programs:
  """Lowerings, compiles and compile seconds per program name, from jax's events."""

  def __init__(self):
    self.lowered, self.compiled = collections.Counter(), collections.Counter()
    self.seconds = collections.defaultdict(float)

  def listen(self) -> "Programs":
    import jax  # pylint: disable=g-import-not-at-top
    jax.monitoring.register_event_duration_secs_listener(self._event)
    return self

  def _event(self, name, secs, **kwargs):
    fun = kwargs.get("fun_name", "?")
    if name == LOWER:
      self.lowered[fun] += 1
    elif name == COMPILE:
      self.compiled[fun] += 1
      self.seconds[fun] += secs

  def summary(self) -> dict:
    names = sorted(set(self.lowered) | set(self.compiled),
                   key=lambda n: (-self.seconds.get(n, 0.0), n))
    return {"programs": sum(self.compiled.values()), "lowerings": sum(self.lowered.values()),
            "compile_s": round(sum(self.seconds.values()), 3),
            "by_name": {n: [self.lowered[n], self.compiled[n], round(self.seconds[n], 3)]
                        for n in names}}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--json", action="store_true", help="one JSON line, no table")
  p.add_argument("--cold", action="store_true", help="an empty persistent compilation cache")
  p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND FLAGS...")
  args = p.parse_args()
  argv = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not argv:
    p.error("name a chinchax command after --, e.g. -- sweep --config=smoke")
  cold = tempfile.mkdtemp(prefix="programs-xla-cache-") if args.cold else None
  if cold:
    os.environ["CHINCHAX_COMPILE_CACHE"] = cold
  programs = Programs().listen()
  from chinchax import cli  # pylint: disable=g-import-not-at-top
  t = time.time()
  try:
    rc = cli.run(argv)
  finally:
    if cold:
      shutil.rmtree(cold, ignore_errors=True)
  wall = time.time() - t
  out = {**programs.summary(), "rc": rc, "wall_s": round(wall, 1)}
  if args.json:
    print(json.dumps(out))
    return
  print(f"chinchax {' '.join(argv)}: exit {rc}, {wall:.1f} s wall, {out['programs']} XLA "
        f"programs, {out['lowerings']} lowerings, {out['compile_s']:.1f} s compiling "
        f"({'cold' if args.cold else 'warm'} cache, {os.cpu_count()} CPU cores, load average "
        f"{os.getloadavg()[0]:.1f})")
  print(f"  {'program':<40} {'lowered':>8} {'compiled':>8} {'compile s':>10}")
  for name, (lo, co, s) in out["by_name"].items():
    print(f"  {name[:40]:<40} {lo:>8} {co:>8} {s:>10.2f}")


if __name__ == "__main__":
  main()
