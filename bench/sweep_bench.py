"""Wall time of one small sweep grid: `local` (cells one after another) versus `packed`.

    python bench/sweep_bench.py [--budgets='(1e10,2e10)'] [--devices=8]

Both sweeps run in fresh processes on the tiny config's byte-level models, in fresh workdirs,
with `--devices` fake CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count).
`local` trains every cell on one device (1 fake device: its batches need not split 8 ways);
`packed` trains one cell per device, all at once. On CPU the fake devices share the host's
cores, so packing mainly overlaps per-cell compilation and host overhead; on an accelerator
host each cell also gets its own chip. Prints the wall time of each and the ratio.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(executor: str, devices: int, budgets: str, sizes: str, workdir: str) -> float:
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu",
             XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
  cmd = [sys.executable, "-m", "chinchax.cli", "sweep",
         f"--config={os.path.join(ROOT, 'sweeps', 'configs', 'tiny.py')}",
         f"--workdir={workdir}", f"--config.budgets={budgets}", f"--config.sizes={sizes}",
         "--config.min_steps=10", "--config.train.eval_tokens=2048", "--config.bootstrap=0",
         f"--config.executor={executor}", "--quiet"]
  t0 = time.time()
  out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
  wall = time.time() - t0
  cells = sum(1 for l in out.stdout.splitlines() if ": done, eval loss" in l)
  print(f"{executor:<7} {devices} device(s): {cells} cells trained in {wall:6.1f} s "
        f"(exit {out.returncode})", flush=True)
  return wall


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--budgets", default="(1e10,2e10)")
  p.add_argument("--sizes", default="(45376,69952,94528)")
  p.add_argument("--devices", type=int, default=8)
  args = p.parse_args()
  with tempfile.TemporaryDirectory() as tmp:
    local = run("local", 1, args.budgets, args.sizes, os.path.join(tmp, "local"))
    packed = run("packed", args.devices, args.budgets, args.sizes, os.path.join(tmp, "packed"))
  print(f"packed / local wall time: {packed / local:.2f} (on {os.cpu_count()} CPU cores)")


if __name__ == "__main__":
  main()
