"""A path that cannot be written, as real processes: one line on stderr naming the path and
why, exit status 2, before any work, nothing written. Tests run as root, whom permission bits
do not stop, so the paths are ones the kernel refuses anyway: under /proc (no folder can be
made there), under /sys (no file can be made there), a read-only mount (when this machine
lets the test mount one), and a file standing where a folder must be."""

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import synthetic_law as syn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def read_only(tmp_path):
  """A read-only tmpfs mounted in tmp_path, or a skip where mounting is not allowed."""
  path = tmp_path / "ro"
  path.mkdir()
  p = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)],
                     capture_output=True, check=False)
  if p.returncode != 0:
    pytest.skip("cannot mount a read-only tmpfs here")
  try:
    yield str(path)
  finally:
    subprocess.run(["umount", str(path)], check=False)


def _csv(path):
  runs = syn.isoflop(budgets=(1e18, 1e19, 1e20), sizes=5)
  lines = ["N,D,loss"] + [f"{n:.6g},{d:.6g},{l:.6g}"
                          for n, d, l in zip(runs["N"], runs["D"], runs["loss"])]
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def _files(root):
  return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root)
                for n in names)


def _refused(cmd, argv, path, tmp_path, env=None):
  before = _files(tmp_path)
  p = subprocess.run([sys.executable, "-m", "chinchax.cli", cmd, *argv], cwd=ROOT,
                     capture_output=True, text=True, timeout=120,
                     env={**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})})
  lines = p.stderr.splitlines()
  assert p.returncode == 2, p.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith(f"chinchax {cmd}: error: "), p.stderr[-2000:]
  assert path in lines[0], lines[0]
  assert re.search(r"cannot (create|write in) it|is a file, not a folder", lines[0]), lines[0]
  assert _files(tmp_path) == before
  return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("cmd,where", [("sweep", "proc"), ("train", "sys"), ("train", "file")])
def test_sweep_and_train_workdir(cmd, where, tmp_path):
  (tmp_path / "f").write_text("a file\n")
  workdir = {"proc": "/proc/chinchax/wd", "sys": "/sys/chinchax-wd",
             "file": f"{tmp_path}/f/wd"}[where]
  line = _refused(cmd, [f"--workdir={workdir}"], workdir, tmp_path)
  if where == "proc":
    assert "/proc takes no new files" in line


@pytest.mark.slow
@pytest.mark.parametrize("cmd", ["sweep", "train"])
def test_workdir_on_a_read_only_mount(cmd, read_only, tmp_path):
  line = _refused(cmd, [f"--workdir={read_only}/wd"], f"{read_only}/wd", tmp_path)
  assert "Read-only file system" in line


@pytest.mark.slow
def test_a_named_compile_cache(tmp_path):
  line = _refused("sweep", [f"--workdir={tmp_path}/wd"], "/proc/chinchax/xla", tmp_path,
                  env={"CHINCHAX_COMPILE_CACHE": "/proc/chinchax/xla"})
  assert "CHINCHAX_COMPILE_CACHE" in line


@pytest.mark.slow
@pytest.mark.parametrize("flag,path", [("--out", "/proc/chinchax/law.json"),
                                       ("--plots", "/sys/chinchax-plots"),
                                       ("--out", "{ro}/law.json"),
                                       ("--plots", "{ro}/plots")])
def test_fit_outputs_before_the_bootstrap(flag, path, tmp_path, request):
  if "{ro}" in path:
    path = path.format(ro=request.getfixturevalue("read_only"))
  runs = _csv(tmp_path / "runs.csv")
  # 10^6 resamples would run for hours: a refusal within the timeout came before them.
  argv = [runs, "--bootstrap=1000000", f"--out={tmp_path}/law.json", f"{flag}={path}"]
  _refused("fit", argv, path, tmp_path)


@pytest.mark.slow
def test_law_out_and_plan_law(tmp_path):
  coefficients = ["--E=1.87", "--A=521", "--B=1488", "--alpha=0.353", "--beta=0.353"]
  _refused("law", [*coefficients, "--out=/proc/chinchax/law.json"], "/proc/chinchax/law.json",
           tmp_path)
  p = subprocess.run([sys.executable, "-m", "chinchax.cli", "plan",
                      "--law=/proc/chinchax/law.json", "--flops=1e21"], cwd=ROOT,
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
  assert "/proc/chinchax/law.json" in p.stderr and "cannot read law file" in p.stderr


@pytest.mark.slow
def test_tokenizer_and_data_out(tmp_path):
  _refused("tokenizer", ["--out=/proc/chinchax/tok"], "/proc/chinchax/tok", tmp_path)
  (tmp_path / "a.txt").write_text("some text\n")
  _refused("data", ["prepare", f"--input={tmp_path}/a.txt", "--name=x", "--out=/sys/chinchax"],
           "/sys/chinchax", tmp_path)
