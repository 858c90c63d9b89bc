"""launch/gke.py and launch/jobset.py: the JobSet manifest GKE gets, parsed back from YAML."""

import shlex

import pytest
import yaml

from chinchax.launch import gke, jobset
from chinchax.sweeps.chips import hardware

CONFIG = "sweeps/configs/tpu_v5p.py"
BASE = ["--name=chin-v5p", f"--config={CONFIG}", "--config.train.seed=1",
        "--workdir=gs://b/sweeps/v5p", "--env=TFDS_DATA_DIR=gs://b/tfds"]


def render(capsys, *argv) -> dict:
  assert gke.main(["render", *BASE, *argv]) == 0
  out, err = capsys.readouterr()
  assert err == ""
  return yaml.safe_load(out)


def pod(m: dict, i: int = 0) -> tuple[dict, dict, dict]:
  """(the replicated job, its pod spec, the container) of replicated job i."""
  rj = m["spec"]["replicatedJobs"][i]
  spec = rj["template"]["spec"]["template"]["spec"]
  return rj, spec, spec["containers"][0]


def env_of(container: dict) -> dict:
  return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_multi_host_tpu_slice(capsys):
  m = render(capsys, "--tpu=v5p-32", "--repo=https://github.com/o/chinchax", "--ref=v1")
  assert (m["apiVersion"], m["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
  assert m["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == (
      "cloud.google.com/gke-nodepool")
  rj, spec, c = pod(m)
  job = rj["template"]["spec"]
  # v5p-32: 16 chips on 4 hosts of 4 chips; one pod per host, all of its chips.
  assert rj["replicas"] == 1 and job["parallelism"] == job["completions"] == 4
  assert job["completionMode"] == "Indexed" and job["backoffLimit"] == 0
  assert spec["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                                  "cloud.google.com/gke-tpu-topology": "2x2x4"}
  assert c["resources"]["limits"] == c["resources"]["requests"] == {"google.com/tpu": 4}
  assert spec["restartPolicy"] == "Never" and spec["hostNetwork"] is True
  assert {p["containerPort"] for p in c["ports"]} == {8471, 8080}
  env = env_of(c)
  assert env["TFDS_DATA_DIR"] == "gs://b/tfds" and "MEGASCALE_NUM_SLICES" not in env
  # The container installs the tpu extra from the repo and execs the sweep, argv intact.
  script = c["command"][2].splitlines()
  assert c["command"][:2] == ["bash", "-c"] and script[0] == "set -e"
  assert shlex.split(script[1]) == ["git", "clone", "--depth=1", "--branch=v1",
                                    "https://github.com/o/chinchax", "/chinchax"]
  assert "'.[tpu,gcs]'" in script[3]
  assert shlex.split(script[-1]) == ["exec", "python3", "-m", "chinchax.cli", "sweep",
                                     f"--config={CONFIG}", "--config.train.seed=1",
                                     "--workdir=gs://b/sweeps/v5p"]


def test_restart_on_preemption_but_not_on_a_failed_sweep(capsys):
  m = render(capsys, "--tpu=v5e:4x4", "--max-restarts=7", "--spot")
  policy = m["spec"]["failurePolicy"]
  assert policy["maxRestarts"] == 7
  assert policy["rules"] == [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]
  rj, spec, _ = pod(m)
  (rule,) = rj["template"]["spec"]["podFailurePolicy"]["rules"]
  assert rule["action"] == "FailJob" and rule["onExitCodes"]["operator"] == "In"
  assert rule["onExitCodes"]["values"] == [1, 2]  # 143 (SIGTERM) and 137 restart
  assert rule["onExitCodes"]["containerName"] == spec["containers"][0]["name"]
  assert spec["nodeSelector"]["cloud.google.com/gke-spot"] == "true"
  assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true",
          "effect": "NoSchedule"} in spec["tolerations"]
  assert spec["terminationGracePeriodSeconds"] >= 60  # time to checkpoint on SIGTERM


def test_multislice_sets_the_megascale_variables(capsys):
  m = render(capsys, "--tpu=v5e:4x4", "--slices=2")
  rj, spec, c = pod(m)
  assert rj["replicas"] == 2 and rj["template"]["spec"]["parallelism"] == 4
  assert c["resources"]["limits"] == {"google.com/tpu": 4}
  assert spec["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4"
  env = env_of(c)
  assert env["MEGASCALE_NUM_SLICES"] == "2"
  assert env["MEGASCALE_SLICE_ID"] == {"fieldRef": {
      "fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}
  # The coordinator is the first pod of slice 0: <jobset>-<replicated job>-0-0.<jobset>.
  assert env["MEGASCALE_COORDINATOR_ADDRESS"] == (
      "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)")
  names = [e["name"] for e in c["env"]]
  assert names.index("JOBSET_NAME") < names.index("MEGASCALE_COORDINATOR_ADDRESS")


def test_multi_node_gpu_job(capsys):
  m = render(capsys, "--gpu=nvidia-h100-80gb", "--nodes=4")
  rj, spec, c = pod(m)
  job = rj["template"]["spec"]
  assert rj["replicas"] == 1 and job["parallelism"] == job["completions"] == 4
  assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
  assert c["resources"]["limits"] == {"nvidia.com/gpu": 8}
  assert "exclusive-topology" not in str(m["metadata"]["annotations"])
  env = env_of(c)
  assert env["JAX_NUM_PROCESSES"] == "4"
  assert env["JAX_COORDINATOR_ADDRESS"] == (
      f"$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME):{jobset.GPU_PORT}")
  assert env["JAX_PROCESS_ID"] == {"fieldRef": {
      "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
  assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.9"
  assert "latency_hiding_scheduler" in env["XLA_FLAGS"]
  assert "securityContext" not in c and "hostNetwork" not in spec


def test_check_compiles_for_the_gpu_nodes_with_the_pods_memory_fraction(capsys, tmp_path,
                                                                         monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert gke.main(["up", *BASE, "--gpu=nvidia-h100-80gb", "--nodes=2", "--check",
                   "--dry-run"]) == 0
  lines = [shlex.split(l[4:]) for l in capsys.readouterr().out.splitlines()
           if l.startswith("  $ ")]
  check = lines[0]
  assert check[:2] == ["env", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.9"]  # as launch/gpu.py's pods
  assert check[-2:] == ["--dry-run", "--compile=h100:16"] and "sweep" in check


def test_up_dry_run_prints_the_manifest_then_the_steps(capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert gke.main(["up", *BASE, "--tpu=v5p:2x2x4", "--check", "--dry-run"]) == 0
  out = capsys.readouterr().out
  head, _, rest = out.partition("\n")
  assert head == "# chin-v5p.jobset.yaml"
  manifest_text = rest[:rest.index("[1/")]
  assert yaml.safe_load(manifest_text)["kind"] == "JobSet"
  lines = [shlex.split(l[4:]) for l in out.splitlines() if l.startswith("  $ ")]
  check, apply, wait, logs = lines
  assert check[-2:] == ["--dry-run", "--compile=v5p:2x2x4"] and "sweep" in check
  assert apply == ["kubectl", "apply", "--namespace=default", "-f", "chin-v5p.jobset.yaml"]
  assert wait[:3] == ["kubectl", "get", "pods"] and logs[:2] == ["kubectl", "logs"]
  assert not (tmp_path / "chin-v5p.jobset.yaml").exists()  # a dry run writes nothing


@pytest.mark.parametrize("argv,says", [
    (["render", "--name=x", "--tpu=v5p-32", "--workdir=runs/a"], "gs://"),
    (["render", "--name=x", "--workdir=gs://b/w"], "--tpu=SLICE or --gpu=TYPE"),
    (["render", "--name=X_1", "--tpu=v5p-32", "--workdir=gs://b/w"], "--name="),
    (["render", "--name=x", "--tpu=v5p-31", "--workdir=gs://b/w"], "TensorCores"),
    (["up", "--name=x", "--gpu=nvidia-a100-80gb", "--check", "--workdir=gs://b/w"],
     "--check: nvidia-a100-80gb cannot be compiled for here (specs ship for h100, h200)"),
    (["up", "--name=x", "--gpu=nvidia-h100-80gb", "--nodes=2", "--gpus-per-node=4", "--check",
      "--workdir=gs://b/w"], "nodes of 8 GPUs"),
    (["render", "--name=x", "--tpu=v5p-32", "--gpu=a", "--workdir=gs://b/w"], "not allowed"),
])
def test_refusals_are_one_line(capsys, argv, says):
  assert gke.main([*argv, "--dry-run"]) == 2
  out, err = capsys.readouterr()
  assert out == "" and len(err.strip().splitlines()) == 1 and says in err, err


def test_jobset_hosts_follow_the_target():
  for text, pods, chips in [("v5p:2x2x1", 1, 4), ("v6e-8", 1, 8), ("v6e-256", 64, 4)]:
    job = jobset.Job("x", ("python3",), tpu=hardware.parse_target(text))
    m = jobset.manifest(job)
    rj = m["spec"]["replicatedJobs"][0]
    assert rj["template"]["spec"]["parallelism"] == pods
    assert rj["template"]["spec"]["template"]["spec"]["containers"][0]["resources"][
        "limits"]["google.com/tpu"] == chips
