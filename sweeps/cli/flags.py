"""The one flag parser of the `chinchax` subcommands: every bad flag is a `UserError` (one line
on stderr, exit 2, from the dispatcher), never a usage dump or a traceback.

* `ArgParser`: argparse for the subcommands with plain flags (fit, plan, report, eval, ...).
* `parse_config_flags`: absl flags with an ml_collections config file and
  `--config.KEY=VALUE` overrides, for `chinchax sweep` and `chinchax train`. `--config` takes a
  named config (sweeps/configs/__init__.py) or a path, from any folder; `--help` prints the
  config's keys (cli/help.py), `--list-configs` the named configs.
"""

import argparse
import dataclasses
import logging
import sys

import ml_collections

from chinchax.scaling import atomic
from chinchax.scaling.errors import UserError
from chinchax.sweeps import configs
from chinchax.sweeps.cli import help as help_lib


class ArgParser(argparse.ArgumentParser):
  """argparse that reports a bad flag as one UserError line instead of usage + exit 2."""

  def error(self, message: str):
    raise UserError(f"{message} (see {self.prog} --help)")


@dataclasses.dataclass(frozen=True)
class ConfigFlags:
  config: ml_collections.ConfigDict
  workdir: str | None
  dry_run: bool
  quiet: bool
  verbose: bool = False


def parse_config_flags(argv: list[str], prog: str, default_config: str,
                       default_workdir: str | None = None, doc: str = "") -> ConfigFlags:
  """--config=NAME|PATH[:ARG], --config.KEY=VALUE, --workdir, --dry-run, --quiet, --verbose.

  The overrides are read from `argv` itself (ml_collections would read them from sys.argv), so
  the parse is the same in-process as from the command line. `--help` (with `doc`, the
  command's own text) and `--list-configs` print and raise SystemExit(0).
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

  if "--list-configs" in argv:
    print("named configs (--config=NAME[:ARG]):\n" + configs.listing())
    raise SystemExit(0)
  config_text = help_lib.config_arg(argv, default_config)
  config_file = configs.resolve(config_text)
  if help_lib.wants_help(argv):
    shown = "" if config_text == default_config else config_text
    print(help_lib.render(prog, doc or prog, config_file, default_workdir, shown))
    sys.stdout.flush()
    raise SystemExit(0)
  help_lib.load(config_file)  # a broken config file is one line here, not a traceback later
  verbose = "--verbose" in argv
  argv = [a for a in argv if a != "--verbose"]
  argv = ["--dry_run" if a == "--dry-run" else a for a in argv]  # the documented spelling
  # The named or relative config resolved to a file (ml_collections would look in the cwd).
  argv = [f"--config={config_file}" if a.startswith("--config=") else a for a in argv]
  argv = [a for i, a in enumerate(argv) if not (a == "--config" or (
      i > 0 and argv[i - 1] == "--config"))]
  default_config = config_file
  args = [prog] + argv
  fv = flags.FlagValues()
  flags.DEFINE_string("workdir", default_workdir, "run directory", flag_values=fv)
  flags.DEFINE_boolean("dry_run", False, "print the plan and exit", flag_values=fv)
  flags.DEFINE_boolean("quiet", False, "no progress lines", flag_values=fv)
  try:
    # Inside the try: the default config file is loaded, with the overrides, right here.
    config_flags.DEFINE_config_file("config", default=default_config, flag_values=fv,
                                    lock_config=True, sys_argv=args,
                                    help_string="config file[:ARG]")
    fv(args)
    config = fv.config
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError, OSError) as e:
    raise UserError(_flag_error(e, argv)) from None
  if fv.workdir:
    atomic.check_backend(fv.workdir)  # gs:// without gcsfs: refused before anything compiles
  _quiet_tfds()
  return ConfigFlags(config, fv.workdir, fv.dry_run, fv.quiet, verbose)


def _flag_error(e: Exception, argv: list[str]) -> str:
  """One line for a bad flag: the offending flag and the innermost cause."""
  if isinstance(e, (KeyError, AttributeError)) and e.args:
    # An override of a key the config does not have: ml_collections says only the key.
    key = str(e.args[0]).strip("'\"")
    flag = next((a.split("=")[0] for a in argv
                 if a.startswith("--config.") and key in a.split("=")[0].split(".")), None)
    if flag:
      return f"{flag}: the config has no key {key!r}; check the spelling against the config file"
  lines = [line.strip() for line in str(e).splitlines() if line.strip()]
  if not lines:
    return type(e).__name__
  if len(lines) == 1:
    return lines[0]
  # A config file that failed to load or raised: the first line names the flag, the last
  # holds the cause (the rest is a traceback).
  return f"{lines[0].rstrip(':')}: {lines[-1]}"


def _no_custom_config_notice(record: logging.LogRecord) -> bool:
  # TFDS announces every chinchax corpus as a "custom data configuration": noise, not news.
  return not str(record.msg).startswith("Using custom data configuration")


def _quiet_tfds() -> None:
  logging.getLogger("absl").addFilter(_no_custom_config_notice)  # idempotent
