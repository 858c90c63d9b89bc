"""Run a sweep on this machine, from the checkout root.

    python -m chinchax.launch.local [--venv=DIR] [--no-install] [--env=KEY=VALUE ...]
        [--config=PATH[:ARG] [--config.KEY=VALUE ...]] [--workdir=DIR] [--dry-run]

With --venv, creates that virtual environment if it has no interpreter yet and installs the
checkout into it (`pip install -e .`); without, installs into the interpreter running this.
--no-install skips the install. With no --config the sweep is chinchax's built-in smoke sweep.
"""

import os
import sys
from collections.abc import Sequence

if __package__ in (None, ""):  # `python launch/local.py`: make the checkout importable.
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chinchax.launch import steps  # noqa: E402
from chinchax.errors import UserError  # noqa: E402


def local_plan(sweep_args: tuple[str | None, Sequence[str], str | None], *,
               venv: str | None = None, install: bool = True,
               env: dict[str, str] | None = None, python: str = sys.executable) -> steps.Plan:
  """`sweep_args` = (config, overrides, workdir); `python` is used when there is no venv."""
  out = []
  if venv:
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
      out.append(steps.step(f"create the virtual environment {venv}",
                            [sys.executable, "-m", "venv", venv]))
  if install:
    out.append(steps.step("install this checkout (editable)",
                          [python, "-m", "pip", "install", "--quiet", "-e", "."]))
  sweep = steps.sweep_argv(python, *sweep_args)
  out.append(steps.step("run the sweep", [*steps.env_argv(env or {}), *sweep]))
  return steps.Plan(tuple(out))


def _parser() -> steps.Parser:
  p = steps.Parser(prog="python -m chinchax.launch.local", description=__doc__.split("\n\n")[0])
  p.add_argument("--venv", help="virtual environment to create (if absent) and use")
  p.add_argument("--no-install", action="store_true", help="do not pip install -e .")
  steps.add_sweep_flags(p)
  return p


def build(argv: Sequence[str]) -> tuple[steps.Plan, bool]:
  args, overrides = steps.parse(_parser(), argv)
  if not args.no_install and not os.path.isfile("pyproject.toml"):
    raise UserError(f"no pyproject.toml in {os.getcwd()}: run from the chinchax checkout root "
                    f"or pass --no-install")
  steps.validate_sweep(args.config, overrides)  # the sweep's own checks, before the venv
  return local_plan((args.config, overrides, args.workdir), venv=args.venv,
                    install=not args.no_install, env=steps.parse_env(args.env)), args.dry_run


def main(argv: Sequence[str] | None = None) -> int:
  return steps.cli("chinchax.launch.local", build, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
  sys.exit(main())
