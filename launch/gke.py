"""Run a sweep on GKE as a Kubernetes JobSet (`launch/jobset.py`): a multi-host TPU slice,
several slices (Multislice), or several GPU nodes.

    python -m chinchax.launch.gke ACTION --name=NAME
        (--tpu=v5p:2x2x4|v5p-32 [--slices=K] | --gpu=nvidia-h100-80gb [--nodes=N])
        [--image=python:3.11] [--repo=URL [--ref=REF]] [--spot] [--max-restarts=10]
        [--namespace=default] [--service-account=KSA] [--manifest=PATH] [--check]
        [--env=KEY=VALUE ...] --config=PATH[:ARG] [--config.KEY=VALUE ...]
        --workdir=gs://BUCKET/PATH [--dry-run]

ACTION: `render` prints the JobSet manifest (YAML) and nothing else; `up` writes it to
--manifest (default NAME.jobset.yaml), `kubectl apply`s it, waits for the first pod and follows
its log (with --check it first compiles every cell for the TPU slice or GPU nodes here,
`chinchax sweep --dry-run --compile`, which stops the plan when a cell does not fit); `logs` follows the first
pod's log; `down` deletes the JobSet; `fetch` copies the workdir here. With --dry-run, `up`
prints the manifest and the steps and runs nothing.

The cluster is yours: a GKE cluster with the JobSet controller and a node pool of the slice's
TPU type and topology (or the GPU type), with Workload Identity for the gs:// workdir. Without
--repo the image must hold chinchax (`pip install "chinchax[tpu,gcs]"`) and the config file at
the path given; with --repo the container clones it and installs `.[tpu,gcs]` (`.[gpu,gcs]`).
"""

import dataclasses
import os
import re
import sys
from collections.abc import Sequence

if __package__ in (None, ""):  # `python launch/gke.py`: make the checkout importable.
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chinchax.launch import gpu, steps  # noqa: E402
from chinchax.launch.jobset import CONTAINER, Job, render  # noqa: E402
from chinchax.errors import UserError  # noqa: E402
from chinchax.sweeps.chips import hardware  # noqa: E402

ACTIONS = ("render", "up", "logs", "down", "fetch")
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")  # pod names add suffixes to it


# ---------------------------------------------------------------------------- plan


def gpu_target(gke_gpu: str, nodes: int, gpus_per_node: int) -> hardware.GpuNode:
  """The GPU nodes of a GKE GPU type (`nvidia-h100-80gb`) as a compile target (`h100:16`)."""
  card = next((g for g in hardware.GPUS.values() if g.name in gke_gpu.lower()), None)
  if card is None or card.target_config is None:
    known = ", ".join(g.name for g in hardware.GPUS.values() if g.target_config)
    raise UserError(f"--check: {gke_gpu} cannot be compiled for here (specs ship for {known}); "
                    "drop --check and run `chinchax sweep --dry-run --compile=local` on a node")
  if nodes > 1 and gpus_per_node != hardware.GPUS_PER_NODE:
    raise UserError(f"--check: several nodes are compiled for as nodes of "
                    f"{hardware.GPUS_PER_NODE} GPUs; --gpus-per-node={gpus_per_node}")
  return hardware.gpu_node(f"{card.name}:{nodes * gpus_per_node}")


def check_step(job: Job, config: str | None, overrides: Sequence[str]) -> steps.Step:
  """Compiles every cell for the slice or GPU nodes here, before anything is created; for
  GPUs against the memory fraction the pods get (`launch/gpu.py`)."""
  argv = steps.sweep_argv(sys.executable, config, overrides, None)
  if job.tpu:
    target, env = job.tpu.name, []
  else:
    target = gpu_target(job.gpu, job.nodes, job.gpus_per_node).name
    fraction = gpu.host_env()["XLA_PYTHON_CLIENT_MEM_FRACTION"]
    env = steps.env_argv({"XLA_PYTHON_CLIENT_MEM_FRACTION": fraction})
  return steps.step(f"compile every cell for {target} here (refuses cells that do not fit)",
                    [*env, *argv, "--dry-run", f"--compile={target}"])


def up_steps(job: Job, path: str) -> list[steps.Step]:
  what = (f"{job.tpu.slices} x {job.tpu.accelerator_type} ({job.tpu.hosts_per_slice} hosts "
          "each)" if job.tpu else f"{job.nodes} x {job.gpus_per_node} {job.gpu}")
  return [steps.step(f"create JobSet {job.name} on {what}",
                     ["kubectl", "apply", f"--namespace={job.namespace}", "-f", path])]


def _first_pod(job: Job) -> str:
  return ",".join([f"jobset.sigs.k8s.io/jobset-name={job.name}", "jobset.sigs.k8s.io/job-index=0",
                   "batch.kubernetes.io/job-completion-index=0"])


def wait_step(job: Job) -> steps.Step:
  return steps.step("wait until the first pod runs (nodes may be scaled up first)", [
      "kubectl", "get", "pods", f"--namespace={job.namespace}", "-l", _first_pod(job),
      "-o", "jsonpath={.items[*].status.phase}"], until=("Running", "Succeeded"),
      fail_on=("Failed",), every_s=30.0)


def logs_step(job: Job) -> steps.Step:
  return steps.step("follow the first pod's log", [
      "kubectl", "logs", f"--namespace={job.namespace}", "-f", "-l", _first_pod(job),
      f"--container={CONTAINER}", "--tail=-1"])


def down_step(job: Job) -> steps.Step:
  return steps.step(f"delete JobSet {job.name} (and its pods)",
                    ["kubectl", "delete", "jobset", job.name, f"--namespace={job.namespace}"])


# ---------------------------------------------------------------------------- flags


def _parser() -> steps.Parser:
  p = steps.Parser(prog="python -m chinchax.launch.gke", description=__doc__.split("\n\n")[0])
  p.add_argument("action", choices=ACTIONS)
  p.add_argument("--name", required=True, help="JobSet name (lowercase, digits, '-')")
  kind = p.add_mutually_exclusive_group()
  kind.add_argument("--tpu", help="TPU slice: v5p:2x2x4, v5e:4x4, v6e-8 (sweeps/chips/hardware.py)")
  kind.add_argument("--gpu", help="GKE GPU type, e.g. nvidia-h100-80gb, nvidia-a100-80gb")
  p.add_argument("--slices", type=int, default=0, help="TPU slices (Multislice when > 1)")
  p.add_argument("--nodes", type=int, default=1, help="GPU nodes (one pod each)")
  p.add_argument("--gpus-per-node", type=int, default=8)
  p.add_argument("--image", default="python:3.11", help="container image (default python:3.11)")
  p.add_argument("--repo", help="git URL cloned and pip-installed in the container; without "
                 "it the image must hold chinchax and the config")
  p.add_argument("--ref", default="main", help="git ref for --repo (default: main)")
  p.add_argument("--spot", action="store_true", help="Spot nodes (preemptible)")
  p.add_argument("--max-restarts", type=int, default=10, help="JobSet restarts (preemptions)")
  p.add_argument("--namespace", default="default")
  p.add_argument("--service-account", help="Kubernetes service account (Workload Identity)")
  p.add_argument("--manifest", help="where `up` writes the manifest (default NAME.jobset.yaml)")
  p.add_argument("--check", action="store_true",
                 help="compile every cell for the TPU slice or GPU nodes here first (needs "
                      "the tpu or gpu-compile extra)")
  p.add_argument("--dest", default=".", help="where `fetch` copies the workdir (default: .)")
  steps.add_sweep_flags(p)
  return p


def build(argv: Sequence[str]) -> tuple[steps.Plan, bool]:
  args, overrides = steps.parse(_parser(), argv)
  if not _NAME.fullmatch(args.name):
    raise UserError(f"--name={args.name!r}: use lowercase letters, digits and '-', starting "
                    "with a letter (at most 40: pod names add suffixes)")
  if args.action in ("render", "up", "fetch") and not (args.workdir or "").startswith("gs://"):
    raise UserError(f"--workdir={args.workdir!r}: pods share no disk and lose theirs on a "
                    "restart; use a gs://bucket/path workdir")
  if args.action == "fetch":
    return steps.Plan((steps.step(f"copy {args.workdir} to {args.dest}",
                                  ["gcloud", "storage", "cp", "-r", args.workdir, args.dest]),)
                      ), args.dry_run
  if args.action in ("render", "up"):
    if not (args.tpu or args.gpu):
      raise UserError(f"{args.action} needs --tpu=SLICE or --gpu=TYPE")
    if args.check and args.gpu:
      gpu_target(args.gpu, args.nodes, args.gpus_per_node)  # refused now, not mid-plan
    if args.nodes < 1 or args.gpus_per_node < 1 or args.max_restarts < 0 or args.slices < 0:
      raise UserError("--nodes, --gpus-per-node and --slices must be positive, "
                      "--max-restarts >= 0")
    if args.config and os.path.isabs(args.config):
      raise UserError(f"--config={args.config}: give the path relative to the checkout root")
    config = steps.validate_sweep(args.config, overrides)  # before the cluster is asked
    if steps.tokenizer_file(config):
      raise UserError("--config.train.data.spm_model: pods do not see this machine's disk; "
                      "put the SentencePiece model in gs:// and pass that path")
  tpu = None
  if args.tpu:
    tpu = hardware.parse_target(args.tpu)
    if args.slices:
      tpu = dataclasses.replace(tpu, slices=args.slices)
  sweep = steps.sweep_argv("python3", args.config, overrides, args.workdir)
  job = Job(args.name, tuple(sweep), tpu,
            args.gpu, args.nodes, args.gpus_per_node, args.image, args.repo, args.ref,
            tuple(steps.parse_env(args.env).items()), args.spot, args.max_restarts,
            args.namespace, args.service_account)
  if args.action == "render":
    print(render(job), end="")
    return steps.Plan(()), True
  if args.action == "logs":
    return steps.Plan((logs_step(job),)), args.dry_run
  if args.action == "down":
    return steps.Plan((down_step(job),)), args.dry_run
  path = args.manifest or f"{args.name}.jobset.yaml"
  text = render(job)
  if args.dry_run:
    print(f"# {path}\n{text}", end="")
  else:
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  plan = [check_step(job, args.config, overrides)] if args.check else []
  plan += up_steps(job, path) + [wait_step(job), logs_step(job)]
  return steps.Plan(tuple(plan)), args.dry_run


def main(argv: Sequence[str] | None = None) -> int:
  return steps.cli("chinchax.launch.gke", build, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
  sys.exit(main())
