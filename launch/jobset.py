"""The Kubernetes JobSet that runs a sweep on GKE: TPU slices (one or several) or GPU nodes.

The form xpk and GKE's TPU documentation use: one replicated Job per slice (`replicas` =
slices), each an Indexed Job of one pod per host (`parallelism` = `completions` = hosts), one
slice per node pool (`alpha.jobset.sigs.k8s.io/exclusive-topology`), pods pinned by
`cloud.google.com/gke-tpu-accelerator` and `cloud.google.com/gke-tpu-topology` and asking for
all `google.com/tpu` chips of their host. GKE gives each TPU pod TPU_WORKER_ID and
TPU_WORKER_HOSTNAMES, from which `jax.distributed.initialize()` finds the slice; with several
slices the pods also get MEGASCALE_COORDINATOR_ADDRESS (the first pod of slice 0),
MEGASCALE_NUM_SLICES and MEGASCALE_SLICE_ID. GPU pods get JAX_COORDINATOR_ADDRESS (the first
pod, port 1234), JAX_NUM_PROCESSES and JAX_PROCESS_ID (the pod's completion index) and the XLA
settings of `launch/gpu.py`.

Preemption: any pod that fails fails its Job (`backoffLimit: 0`), and the JobSet then
recreates every Job, up to `max_restarts` times (`failurePolicy.maxRestarts`); the rerun sweep
skips its done cells and resumes the checkpointed ones from the gs:// workdir. So does a lost,
stuck or missing host (chinchax/exit_codes.py). The statuses that table marks not restarted
(1: cells or the fit failed; 2: a user mistake) fail the JobSet at once (`podFailurePolicy`
FailJob, then the JobSet rule FailJobSet): a rerun would fail the same way.
"""


import dataclasses
import shlex

import yaml

from chinchax import exit_codes
from chinchax.launch import gpu
from chinchax.sweeps.chips import hardware

CONTAINER = "chinchax"
GPU_PORT = 1234
NO_RESTART_EXIT_CODES = exit_codes.NO_RESTART  # a rerun would fail the same way
CHECKOUT = "/chinchax"


@dataclasses.dataclass(frozen=True)
class Job:
  """What the JobSet runs, and on what."""
  name: str
  sweep: tuple[str, ...]            # the sweep's argv
  tpu: hardware.Target | None = None
  gpu: str | None = None            # GKE's cloud.google.com/gke-accelerator value
  nodes: int = 1                    # GPU nodes
  gpus_per_node: int = 8
  image: str = "python:3.11"
  repo: str | None = None
  ref: str = "main"
  env: tuple[tuple[str, str], ...] = ()
  spot: bool = False
  max_restarts: int = 10
  namespace: str = "default"
  service_account: str | None = None

  @property
  def replicas(self) -> int:
    return self.tpu.slices if self.tpu else 1

  @property
  def pods_per_replica(self) -> int:
    return self.tpu.hosts_per_slice if self.tpu else self.nodes


def _field(path: str) -> dict:
  return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def env(job: Job) -> list[dict]:
  """The container's environment: the JAX distributed runtime's variables, then the user's."""
  out = [{"name": "JOBSET_NAME", **_field("metadata.annotations['jobset.sigs.k8s.io/jobset-name']")},
         {"name": "REPLICATED_JOB_NAME",
          **_field("metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']")}]
  first_pod = "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
  if job.tpu and job.tpu.slices > 1:
    out += [{"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": first_pod},
            {"name": "MEGASCALE_NUM_SLICES", "value": str(job.tpu.slices)},
            {"name": "MEGASCALE_SLICE_ID",
             **_field("metadata.labels['jobset.sigs.k8s.io/job-index']")}]
  if job.gpu:
    out += [{"name": k, "value": v} for k, v in gpu.host_env().items()]
    if job.nodes > 1:
      out += [{"name": "JAX_COORDINATOR_ADDRESS", "value": f"{first_pod}:{GPU_PORT}"},
              {"name": "JAX_NUM_PROCESSES", "value": str(job.nodes)},
              {"name": "JAX_PROCESS_ID",
               **_field("metadata.annotations['batch.kubernetes.io/job-completion-index']")}]
  return out + [{"name": k, "value": v} for k, v in job.env]


def script(job: Job) -> str:
  """The container's shell command: install chinchax from the repo (if given), run the sweep."""
  extra = "tpu,gcs" if job.tpu else "gpu,gcs"
  lines = ["set -e"]
  if job.repo:
    lines += [shlex.join(["git", "clone", "--depth=1", f"--branch={job.ref}", job.repo,
                          CHECKOUT]),
              f"cd {CHECKOUT}",
              shlex.join(["python3", "-m", "pip", "install", "--quiet", f".[{extra}]"])]
  return "\n".join(lines + ["exec " + shlex.join(job.sweep)])


def pod_spec(job: Job) -> dict:
  if job.tpu:
    chips = job.tpu.chips_per_host
    selector = {"cloud.google.com/gke-tpu-accelerator": job.tpu.chip.gke_accelerator,
                "cloud.google.com/gke-tpu-topology": job.tpu.topology_name}
    resources = {"google.com/tpu": chips}
    ports = [{"containerPort": 8471}, {"containerPort": 8080}]
  else:
    selector = {"cloud.google.com/gke-accelerator": job.gpu}
    resources = {"nvidia.com/gpu": job.gpus_per_node}
    ports = [{"containerPort": GPU_PORT}]
  tolerations = []
  if job.spot:
    selector["cloud.google.com/gke-spot"] = "true"
    tolerations.append({"key": "cloud.google.com/gke-spot", "operator": "Equal",
                        "value": "true", "effect": "NoSchedule"})
  container = {
      "name": CONTAINER, "image": job.image, "command": ["bash", "-c", script(job)],
      "env": env(job), "ports": ports,
      "resources": {"limits": dict(resources), "requests": dict(resources)}}
  if job.tpu:
    container["securityContext"] = {"privileged": True}  # TPU device access on older GKE
  spec = {"restartPolicy": "Never", "nodeSelector": selector,
          # The sweep checkpoints on SIGTERM: give it time before the pod is killed.
          "terminationGracePeriodSeconds": 300, "containers": [container]}
  if job.tpu:
    spec.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
  if tolerations:
    spec["tolerations"] = tolerations
  if job.service_account:
    spec["serviceAccountName"] = job.service_account  # Workload Identity: gs:// access
  return spec


def manifest(job: Job) -> dict:
  """The JobSet as a dict (`render` prints it as YAML)."""
  n = job.pods_per_replica
  labels = lambda: {"app.kubernetes.io/name": "chinchax", "chinchax/sweep": job.name}
  annotations = ({"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
                 if job.tpu else {})
  return {
      "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
      "metadata": {"name": job.name, "namespace": job.namespace, "labels": labels(),
                   "annotations": annotations},
      "spec": {
          "failurePolicy": {
              "maxRestarts": job.max_restarts,
              "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]},
          "network": {"enableDNSHostnames": True},
          "replicatedJobs": [{
              "name": "slice" if job.tpu else "workers",
              "replicas": job.replicas,
              "template": {"spec": {
                  "parallelism": n, "completions": n, "completionMode": "Indexed",
                  "backoffLimit": 0,
                  "podFailurePolicy": {"rules": [{
                      "action": "FailJob",
                      "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                      "values": list(NO_RESTART_EXIT_CODES)}}]},
                  "template": {"metadata": {"labels": labels()}, "spec": pod_spec(job)}}}}]}}


class _Dumper(yaml.SafeDumper):
  """Multi-line strings (the container's script) as YAML literal blocks."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))


def render(job: Job) -> str:
  return yaml.dump(manifest(job), Dumper=_Dumper, sort_keys=False, width=100)
