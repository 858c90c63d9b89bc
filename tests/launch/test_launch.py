"""launch/: the command lines the launchers print (--dry-run) and how a plan runs.

No cloud is reachable here: the gcloud/ssh lines are parsed back with shlex, and the shell
commands meant for a remote host are run by a local bash with a stand-in `python3` that
records the argv and environment it got, so quoting is checked end to end.
"""

import json
import os
import shlex
import subprocess
import sys
import textwrap

import ml_collections
import pytest

from chinchax.launch import gpu, local, steps, tpu, tpu_slice
from chinchax.sweeps.chips import hardware

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = "sweeps/configs/chin.py"
# Overrides a shell would mangle if any level of quoting were wrong.
OVERRIDES = ["--config.grid.budgets=(1e18, 3e18)", "--config.name=it's \"a\" $HOME; *",
             "--config.note=back\\slash `x` & | > <"]
TPU = ["--name=chin-a", "--project=my-proj", "--zone=us-east5-a"]


@pytest.fixture(autouse=True)
def stand_in_config_checks(monkeypatch):
  """These tests are about plans and quoting, with a stand-in config and overrides no real
  config has: the sweep's own checks (steps.validate_sweep) are tested in test_validate.py."""
  data = ml_collections.ConfigDict({"tokenizer": "bytes", "spm_model": ""})
  monkeypatch.setattr(steps, "validate_sweep",
                      lambda config, overrides: ml_collections.ConfigDict({"train": {"data": data}}))


@pytest.fixture
def checkout(tmp_path, monkeypatch):
  """A folder with a sweep config at CONFIG, as cwd (configs are copied from here)."""
  (tmp_path / "sweeps" / "configs").mkdir(parents=True)
  (tmp_path / CONFIG).write_text("def get_config(arg):\n  return arg\n")
  monkeypatch.chdir(tmp_path)
  return tmp_path


def dry_run(capsys, main, *argv):
  rc = main([*argv, "--dry-run"])
  out, err = capsys.readouterr()
  assert rc == 0 and err == "", err
  return [shlex.split(line[4:]) for line in out.splitlines() if line.startswith("  $ ")]


def flag(argv, name):
  values = [a.partition("=")[2] for a in argv if a.startswith(f"--{name}=")]
  assert len(values) == 1, (name, argv)
  return values[0]


def refused(capsys, main, *argv):
  rc = main([*argv, "--dry-run"])
  out, err = capsys.readouterr()
  assert rc == 2 and out == "", out
  assert len(err.strip().splitlines()) == 1, err
  return err


# ---------------------------------------------------------------------------- a stand-in host


def fake_python(tmp_path):
  """A `python3` on PATH that writes its argv and JAX/XLA env to record.json and exits 3."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  script = bin_dir / "python3"
  script.write_text(textwrap.dedent(f"""\
      #!{sys.executable}
      import json, os, sys
      env = {{k: v for k, v in os.environ.items() if k.startswith(("JAX_", "XLA_", "TFDS_"))}}
      json.dump({{"argv": sys.argv[1:], "env": env}}, open("record.json", "w"))
      print("sweep says hi")
      sys.exit(3)
      """))
  script.chmod(0o755)
  return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)}


def run_on_hosts(commands, follow, homes, env):
  """Runs each start command as ssh would (a shell in that host's home), then the follow
  command on every host at once; returns their CompletedProcess in order."""
  for command, home in zip(commands, homes):
    subprocess.run(["bash", "-c", command], cwd=home, env=env, check=True, timeout=30)
  procs = [subprocess.Popen(["bash", "-c", follow], cwd=home, env=env, text=True,
                            stdout=subprocess.PIPE) for home in homes]
  return [subprocess.CompletedProcess(p.args, p.wait(30), p.communicate()[0], "")
          for p in procs]


# ---------------------------------------------------------------------------- TPU


def test_v5p_32_all_creates_installs_starts_then_deletes_in_order(capsys, checkout):
  lines = dry_run(capsys, tpu.main, "all", *TPU, "--accelerator=v5p-32", "--spot",
                  "--repo=https://github.com/o/chinchax", "--ref=v1", f"--config={CONFIG}",
                  "--workdir=gs://b/sweep")
  heads = [" ".join(a[:5]) for a in lines]
  create = heads.index("gcloud compute tpus queued-resources create")
  describe = heads.index("gcloud compute tpus queued-resources describe")
  delete = heads.index("gcloud compute tpus queued-resources delete")
  ssh_all = [i for i, a in enumerate(lines)
             if a[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh"] and "--worker=all" in a]
  assert len(ssh_all) == 2  # install, start
  assert create < describe < ssh_all[0] < ssh_all[1] < delete == len(lines) - 1

  c = lines[create]
  assert c[5] == "chin-a" and flag(c, "node-id") == "chin-a"
  assert flag(c, "accelerator-type") == "v5p-32"
  assert flag(c, "runtime-version") == "v2-alpha-tpuv5"
  assert flag(c, "project") == "my-proj" and flag(c, "zone") == "us-east5-a"
  assert "--spot" in c and "--best-effort" not in c and "--reserved" not in c
  assert flag(lines[describe], "format") == "value(state.state)"
  install = flag(lines[ssh_all[0]], "command")
  # One install: the tpu extra brings jax[tpu] (the libtpu of that jax), gcs the gs:// access.
  assert "pip install" in install and "jax[tpu]" not in install
  assert "'chinchax[tpu,gcs] @ git+https://github.com/o/chinchax@v1'" in install
  d = lines[delete]
  assert d[5] == "chin-a" and {"--force", "--async"} <= set(d)
  assert flag(d, "zone") == "us-east5-a" and flag(d, "project") == "my-proj"
  # Logs follow worker 0 only; results come back from the bucket.
  assert any("--worker=0" in a and "tail" in flag(a, "command") for a in lines)
  assert ["gcloud", "storage", "cp", "-r", "gs://b/sweep", "."] in lines


@pytest.mark.slow
def test_tpu_sweep_command_survives_quoting(capsys, checkout):
  lines = dry_run(capsys, tpu.main, "all", *TPU, "--accelerator=v5litepod-8",
                  "--repo=https://github.com/o/chinchax", f"--config={CONFIG}:small",
                  *OVERRIDES, "--workdir=runs/a b", "--env=TFDS_DATA_DIR=gs://b/tfds x")
  commands = [flag(a, "command") for a in lines if a[4] == "ssh"]
  start = next(c for c in commands if "chinchax.cli" in c)
  follow = next(c for c in commands if "tail" in c)
  env = fake_python(checkout)
  (checkout / tpu.RUN_DIR).mkdir()
  (done,) = run_on_hosts([start], follow, [checkout], env)
  # The follow step ends with the sweep and carries its exit status and output.
  assert done.returncode == 3 and "sweep says hi" in done.stdout
  record = json.loads((checkout / tpu.RUN_DIR / "record.json").read_text())
  assert record["argv"] == ["-m", "chinchax.cli", "sweep", f"--config={CONFIG}:small",
                            *OVERRIDES, "--workdir=runs/a b"]
  assert record["env"]["TFDS_DATA_DIR"] == "gs://b/tfds x"
  # A single-host slice keeps a local workdir: fetched from worker 0 by scp.
  scp = next(a for a in lines if a[4] == "scp" and "--recurse" in a)
  assert scp[5] == f"chin-a:{tpu.RUN_DIR}/runs/a b" and "--worker=0" in scp


def test_tpu_config_and_wheel_are_copied_before_use(capsys, checkout):
  wheel = checkout / "chinchax-0.1.0-py3-none-any.whl"
  wheel.write_bytes(b"")
  lines = dry_run(capsys, tpu.main, "up", *TPU, "--accelerator=v4-32", f"--wheel={wheel}",
                  f"--config={CONFIG}", "--workdir=gs://b/w")
  kinds = [(a[4], a[5] if a[4] == "scp" else flag(a, "command")) for a in lines[2:]]
  (scp_wheel, wheel_dest), (_, install), (scp_cfg, cfg_dest), (_, start) = kinds
  assert scp_wheel == scp_cfg == "scp"
  assert wheel_dest == str(wheel) and "'./chinchax-0.1.0-py3-none-any.whl[tpu,gcs]'" in install
  assert lines[4][6] == f"chin-a:{tpu.RUN_DIR}/{CONFIG}" and cfg_dest == CONFIG
  assert f"mkdir -p {tpu.RUN_DIR} {tpu.RUN_DIR}/sweeps/configs" in install
  assert f"cd {tpu.RUN_DIR}" in start


def test_multislice_uses_node_count_and_reaches_every_slice(capsys, checkout):
  lines = dry_run(capsys, tpu.main, "all", *TPU, "--accelerator=v5litepod-16",
                  "--node-count=2", "--best-effort", "--repo=git+https://h/c",
                  f"--config={CONFIG}", "--workdir=gs://b/w")
  create = lines[0]
  assert create[:7] == ["gcloud", "alpha", "compute", "tpus", "queued-resources", "create",
                        "chin-a"]
  assert flag(create, "node-count") == "2" and flag(create, "node-prefix") == "chin-a"
  assert not any(a.startswith("--node-id") for a in create) and "--best-effort" in create
  ssh = [a for a in lines if a[4] == "ssh"]
  assert all(a[3] == "queued-resources" for a in ssh)
  assert [(flag(a, "node"), flag(a, "worker")) for a in ssh] == [("all", "all")] * 2 + [
      ("0", "0")]


@pytest.mark.parametrize("accel,hosts", [("v5p-32", 4), ("v5p-8", 1), ("v4-128", 16),
                                         ("v3-8", 1), ("v2-32", 4), ("v5litepod-8", 1),
                                         ("v5litepod-16", 4), ("v6e-256", 64), ("v6e-4", 1)])
def test_hosts_per_slice(accel, hosts):
  # v2-v5p: 4 chips x 2 TensorCores per host, size counts cores; v5e/v6e: size counts chips,
  # up to 8 on one host, 4 per host beyond.
  assert tpu_slice.accelerator(accel).hosts == hosts


@pytest.mark.parametrize("argv,says", [
    (["--accelerator=v5e-32"], "v5litepod-32"),
    (["--accelerator=tpu-32"], "unknown accelerator type"),
    (["--accelerator=v5p-12"], "multiple of 8"),
    (["--accelerator=v6e-12"], "1, 4, 8 or a multiple of 16"),
    (["--accelerator=v5p-32", "--workdir=runs"], "gs://"),
    (["--accelerator=v4-8", "--node-count=2", "--workdir=/data/runs"], "gs://"),
    (["--accelerator=v3-8", "--node-count=2"], "Multislice"),
    (["--accelerator=v5p-8", "--wheel=missing.whl"], "missing.whl not found"),
    (["--accelerator=v5p-8", "--config=nope.py"], "nope.py not found"),
    (["--accelerator=v5p-8", "--config.seed=1"], "no --config"),
    (["--accelerator=v5p-8", f"--config={CONFIG}", "--config.seed"], "--config.KEY=VALUE"),
    (["--accelerator=v5p-8", "--worker=3"], "unrecognized argument"),
])
def test_tpu_refusals_are_one_line(capsys, checkout, argv, says):
  src = [] if any(a.startswith("--wheel") for a in argv) else ["--repo=https://h/c"]
  wd = [] if any(a.startswith("--workdir") for a in argv) else ["--workdir=gs://b/w"]
  err = refused(capsys, tpu.main, "up", *TPU, *src, *wd, *argv)
  assert says in err


@pytest.mark.parametrize("missing", ["--project", "--zone"])
def test_tpu_needs_project_and_zone(capsys, missing):
  argv = [a for a in TPU if not a.startswith(missing)]
  assert missing in refused(capsys, tpu.main, "down", *argv)


def test_single_host_slice_accepts_a_local_workdir(capsys, checkout):
  lines = dry_run(capsys, tpu.main, "up", *TPU, "--accelerator=v6e-8", "--repo=https://h/c",
                  "--workdir=runs")
  assert lines[-1][4] == "ssh"


@pytest.mark.slow
def test_runs_as_a_file_from_the_checkout():
  done = subprocess.run([sys.executable, "launch/tpu.py", "down", *TPU, "--dry-run"],
                        cwd=REPO, capture_output=True, text=True, timeout=60,
                        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
  assert done.returncode == 0, done.stderr
  assert "queued-resources delete chin-a" in done.stdout


# ---------------------------------------------------------------------------- GPU


@pytest.mark.slow
def test_gpu_hosts_get_distinct_process_ids_and_one_coordinator(capsys, tmp_path):
  hosts = ["gpu0", "me@gpu1", "gpu2"]
  lines = dry_run(capsys, gpu.main, f"--hosts={','.join(hosts)}", "--port=8476",
                  "--remote-dir=chinchax", f"--config={CONFIG}", *OVERRIDES,
                  "--workdir=gs://b/w")
  starts, follow = lines[:-1], lines[-1]
  assert [a[:2] for a in starts] == [["ssh", h] for h in hosts]
  assert follow[:2] == ["ssh", "gpu0"] and "tail" in follow[2]
  env = fake_python(tmp_path)
  homes = [tmp_path / h for h in hosts]  # each host has its own home and checkout
  for home in homes:
    (home / "chinchax").mkdir(parents=True)
  done = run_on_hosts([a[2] for a in starts], follow[2], homes, env)
  assert [d.returncode for d in done] == [3, 3, 3]
  seen = []
  for home in homes:
    record = json.loads((home / "chinchax" / "record.json").read_text())
    assert record["argv"] == ["-m", "chinchax.cli", "sweep", f"--config={CONFIG}", *OVERRIDES,
                              "--workdir=gs://b/w"]
    seen.append(record["env"])
  assert [e["JAX_PROCESS_ID"] for e in seen] == ["0", "1", "2"]
  assert {e["JAX_COORDINATOR_ADDRESS"] for e in seen} == {"gpu0:8476"}
  assert {e["JAX_NUM_PROCESSES"] for e in seen} == {"3"}
  assert {e["XLA_PYTHON_CLIENT_MEM_FRACTION"] for e in seen} == {"0.9"}
  assert all("--xla_gpu_enable_latency_hiding_scheduler=true" in e["XLA_FLAGS"] for e in seen)


def test_gpu_one_host_runs_here_without_a_process_group(capsys):
  (argv,) = dry_run(capsys, gpu.main, "--mem-fraction=0.8", "--xla-flags=--xla_foo=1",
                    f"--config={CONFIG}", "--workdir=runs")
  assert argv[0] == "env" and "XLA_PYTHON_CLIENT_MEM_FRACTION=0.8" in argv
  assert ("XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true --xla_foo=1") in argv
  assert not any(a.startswith("JAX_") for a in argv)
  i = argv.index("chinchax.cli")
  assert argv[i - 2:] == [sys.executable, "-m", "chinchax.cli", "sweep", f"--config={CONFIG}",
                          "--workdir=runs"]


@pytest.mark.parametrize("argv,says", [
    (["--hosts=a,b", "--workdir=/data/runs"], "gs://"),
    (["--hosts=a,b"], "--workdir"),
    (["--hosts=a,a", "--workdir=gs://b/w"], "twice"),
    (["--mem-fraction=1.5"], "(0, 1]"),
    (["--env=1BAD=x"], "KEY=VALUE"),
])
def test_gpu_refusals_are_one_line(capsys, argv, says):
  assert says in refused(capsys, gpu.main, *argv)


def test_gpu_shared_workdir_is_allowed_when_declared(capsys):
  lines = dry_run(capsys, gpu.main, "--hosts=a,b", "--workdir=/nfs/runs", "--shared-workdir",
                  "--detach")
  assert [a[1] for a in lines] == ["a", "b"]


# ---------------------------------------------------------------------------- local


def test_local_creates_venv_installs_and_runs(capsys, checkout):
  (checkout / "pyproject.toml").write_text("")
  venv = checkout / "venv"
  lines = dry_run(capsys, local.main, f"--venv={venv}", f"--config={CONFIG}", *OVERRIDES)
  py = str(venv / "bin" / "python")
  assert lines == [[sys.executable, "-m", "venv", str(venv)],
                   [py, "-m", "pip", "install", "--quiet", "-e", "."],
                   [py, "-m", "chinchax.cli", "sweep", f"--config={CONFIG}", *OVERRIDES]]
  (venv / "bin").mkdir(parents=True)
  (venv / "bin" / "python").write_text("")
  lines = dry_run(capsys, local.main, f"--venv={venv}")
  assert [a[1:3] for a in lines] == [["-m", "pip"], ["-m", "chinchax.cli"]]


def test_local_install_needs_the_checkout_root(capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert "pyproject.toml" in refused(capsys, local.main)
  assert len(dry_run(capsys, local.main, "--no-install")) == 1


# ---------------------------------------------------------------------------- running a plan


class FakeRun:
  """subprocess.run stand-in: answers from a script of (returncode, stdout) per call."""

  def __init__(self, answers):
    self.answers, self.calls = list(answers), []

  def __call__(self, argv, **kw):
    self.calls.append(argv)
    rc, out = self.answers.pop(0)
    return subprocess.CompletedProcess(argv, rc, out, "")


def _plan():
  return steps.Plan((steps.step("a", ["gcloud", "create"]),
                     steps.step("b", ["gcloud", "describe"], until=("ACTIVE",),
                                fail_on=("FAILED",), every_s=7),
                     steps.step("c", ["gcloud", "ssh", "it's"]),
                     steps.step("d", ["gcloud", "delete"])))


def test_execute_polls_until_ready_then_runs_the_rest(capsys):
  run, naps = FakeRun([(0, ""), (0, "WAITING_FOR_RESOURCES\n"), (0, "PROVISIONING"),
                       (0, "ACTIVE\n"), (0, ""), (0, "")]), []
  assert steps.execute(_plan(), dry_run=False, run=run, sleep=naps.append) == 0
  assert [c[1] for c in run.calls] == ["create"] + ["describe"] * 3 + ["ssh", "delete"]
  assert naps == [7, 7]


@pytest.mark.parametrize("answers,rc", [([(0, ""), (0, "FAILED")], 1),
                                        ([(0, ""), (0, "ACTIVE"), (5, "")], 5)])
def test_execute_stops_at_a_failure_and_lists_what_was_not_run(capsys, answers, rc):
  run = FakeRun(answers)
  assert steps.execute(_plan(), dry_run=False, run=run, sleep=lambda s: None) == rc
  out = capsys.readouterr().out
  assert len(run.calls) == len(answers)
  assert "Not run:" in out and "$ gcloud delete" in out.split("Not run:")[1]


def test_dry_run_runs_nothing_and_prints_exact_lines(capsys):
  run = FakeRun([])
  assert steps.execute(_plan(), dry_run=True, run=run) == 0
  lines = [ln[4:] for ln in capsys.readouterr().out.splitlines() if ln.startswith("  $ ")]
  assert run.calls == [] and [shlex.split(ln) for ln in lines] == [
      list(s.argv) for s in _plan().steps]


@pytest.mark.parametrize("family", list(hardware.TPU_CHIPS))
def test_a_gcloud_type_and_its_compile_target_agree_on_hosts(family):
  """One table of chip facts: a slice's hosts, runtime and Multislice come from it."""
  chip = hardware.TPU_CHIPS[family]
  for chips in (4, 8, 16, 64):
    name = f"{chip.gcloud}-{chips * chip.cores_per_chip}"
    accel = tpu_slice.accelerator(name)
    assert accel.hosts == hardware.parse_target(name).hosts_per_slice, name
    assert (accel.runtime, accel.multislice) == (chip.runtime, chip.multislice)
