"""The one flag parser of the `chinchax` subcommands: every bad flag is a `UserError` (one line
on stderr, exit 2, from the dispatcher), never a usage dump or a traceback.

* `ArgParser`: argparse for the subcommands with plain flags (fit, plan, report, eval, ...).
* `parse_config_flags`: absl flags with an ml_collections config file and
  `--config.KEY=VALUE` overrides, for `chinchax sweep` and `chinchax train`. `--config` takes a
  named config (sweeps/configs/__init__.py) or a path, from any folder; `--list-configs`
  lists the named configs.
* `render`: their `--help`, the command's own text, its flags, the named configs and every
  key of the chosen config with its default and one-line meaning, from the keys'
  declarations (sweeps/configs/train.py, sweep.py)."""

import argparse
import dataclasses
import importlib.util
import logging
import os
import re
import sys
import traceback

import ml_collections

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.sweeps import configs, console, grid
from chinchax.sweeps.configs import keys, sweep as sweep_config, train as train_config


FLAGS = (
    ("--config=NAME|PATH[:ARG]", "a named config (below) or a config file; ARG picks a preset"),
    ("--config.KEY=VALUE", "override one key of the config (keys below)"),
    ("--workdir=DIR", "the run folder, local or gs://"),
    ("--dry-run", "print the plan from the config alone: no data opened, no file written"),
    ("--quiet", "no step lines or bars: one line per sweep cell"),
    ("--verbose", "show the libraries' warnings and the per-step lines"),
    ("--list-configs", "list the named configs and exit"),
    ("-h, --help", "this help (with --config=X: X's keys)"),
)


def load(config_arg: str) -> ml_collections.ConfigDict:
  """The config a resolved `PATH[:ARG]` names, loaded as ml_collections would, or a UserError
  of one line (a broken file, or a `get_config` that raised)."""
  file, _, arg = config_arg.partition(":")
  try:
    spec = importlib.util.spec_from_file_location("chinchax_user_config", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    get_config = getattr(module, "get_config", None)
    if get_config is None:
      raise UserError(f"--config={file}: defines no get_config(); a config file is Python with "
                      "a function get_config() returning an ml_collections.ConfigDict")
    return get_config(arg) if arg else get_config()
  except UserError:
    raise
  except Exception as e:  # pylint: disable=broad-except  (any failure of a user's file)
    text = (str(e).strip().splitlines() or [""])[-1]
    raise UserError(f"--config={config_arg}: could not load it: {type(e).__name__}: "
                    f"{text}".rstrip(": ")) from None


def flat(c, prefix: str = "") -> list[tuple[str, object]]:
  out = []
  for k, v in c.items():
    if isinstance(v, ml_collections.ConfigDict):
      out += flat(v, f"{prefix}{k}.")
    else:
      out.append((f"{prefix}{k}", v))
  return out


def _value(v) -> str:
  """A default as the override would be typed: 1e11, not 100000000000.0 (nor 1e+11)."""
  if isinstance(v, float):
    return fmt.exact(v)
  if isinstance(v, (tuple, list)):
    inner = ", ".join(_value(x) for x in v)
    return f"({inner},)" if len(v) == 1 else f"({inner})"
  return repr(v)


def render(prog: str, doc: str, config_arg: str, default_workdir: str | None,
           shown: str = "", more_flags: tuple[tuple[str, str], ...] = ()) -> str:
  """The whole help text; `config_arg` is the resolved config the keys are read from, `shown`
  the --config the user typed, `more_flags` the command's own flags (flag, meaning)."""
  config = load(config_arg)
  sweep = is_sweep(config)
  lines = [doc.strip(), "", "flags:"]
  lines += [f"  {f:<27} {m}" for f, m in FLAGS]
  if default_workdir:
    lines[-len(FLAGS) + 2] += f" (default {default_workdir})"
  lines[-1:-1] = [f"  {f:<27} {m}" for f, m in more_flags]  # before -h, --help
  lines += ["", "named configs (--config=NAME):", configs.listing(), "",
            f"{prog} config keys of --config={shown or config_arg} (override with --config.KEY=VALUE):"]
  rows = [(k, _value(v), meaning(k, sweep) or "") for k, v in flat(config)]
  wk = max(len(k) for k, _, _ in rows)
  wv = min(max(len(v) for _, v, _ in rows), 24)
  lines += [f"  {k:<{wk}}  {v:<{wv}}  {m}".rstrip() for k, v, m in rows]
  return "\n".join(lines)


def is_sweep(config) -> bool:
  """A sweep config (sweeps/configs/sweep.py: its runs' settings under `train`), not one
  run's."""
  return "train" in config and isinstance(config.train, ml_collections.ConfigDict)


TRAIN = keys.meanings(train_config.KEYS)
SWEEP = {**keys.meanings(sweep_config.KEYS), **keys.meanings(train_config.KEYS, "train.")}


def meaning(key: str, sweep: bool) -> str | None:
  """The one-line meaning of `key` in a sweep (or train) config, as its declaration gives it."""
  if sweep and key.startswith("train.") and key[len("train."):] in grid.PER_CELL:
    return f"set by each cell: use {grid.PER_CELL[key[len('train.'):]]}"
  return (SWEEP if sweep else TRAIN).get(key)


def check_per_cell(argv: list[str]) -> None:
  """A sweep's `--config.train.KEY=` of a key each cell sets for itself would be ignored."""
  for a in argv:
    key = a.split("=", 1)[0][len("--config.train."):] if a.startswith("--config.train.") else ""
    if key in grid.PER_CELL:
      raise UserError(f"{a.split('=', 1)[0]}: each cell of a sweep sets train.{key} itself, so "
                      f"this would be ignored; use {grid.PER_CELL[key]}")


def wants_help(argv: list[str]) -> bool:
  return any(a in ("-h", "--help") for a in argv)


def config_arg(argv: list[str], default: str) -> str:
  """The --config value in argv (the last one wins, as in absl), else `default`."""
  value = default
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      value = a.split("=", 1)[1]
    elif a == "--config" and i + 1 < len(argv):
      value = argv[i + 1]
  if not value:
    raise UserError("--config needs a value: a named config or a file")
  return value


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
                       default_workdir: str | None = None, doc: str = "",
                       more_flags: tuple[tuple[str, str], ...] = ()) -> ConfigFlags:
  """--config=NAME|PATH[:ARG], --config.KEY=VALUE, --workdir, --dry-run, --quiet, --verbose.

  The overrides are read from `argv` itself (ml_collections would read them from sys.argv), so
  the parse is the same in-process as from the command line. `--help` (with `doc`, the
  command's own text, and `more_flags`, the flags the command parses itself) and
  `--list-configs` print and raise SystemExit(0).
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top

  if "--list-configs" in argv:
    print("named configs (--config=NAME[:ARG]):\n" + configs.listing())
    raise SystemExit(0)
  config_text = config_arg(argv, default_config)
  config_file = configs.resolve(config_text)
  if wants_help(argv):
    shown = "" if config_text == default_config else config_text
    print(render(prog, doc or prog, config_file, default_workdir, shown, more_flags))
    sys.stdout.flush()
    raise SystemExit(0)
  base = load(config_file)  # a broken config file is one line here, not a traceback later
  verbose = "--verbose" in argv
  argv = [a for a in argv if a != "--verbose"]
  argv = ["--dry_run" if a == "--dry-run" else a for a in argv]  # the documented spelling
  # The named or relative config resolved to a file (ml_collections would look in the cwd).
  argv = [f"--config={config_file}" if a.startswith("--config=") else a for a in argv]
  argv = [a for i, a in enumerate(argv) if not (a == "--config" or (
      i > 0 and argv[i - 1] == "--config"))]
  default_config = config_file
  for a in argv:
    key = a.split("=", 1)[0][len("--config."):] if a.startswith("--config.") else None
    if key is not None and not all(part.isidentifier() for part in key.split(".")):
      raise UserError(f"{a}: {key!r} is not a config key; write --config.KEY=VALUE, "
                      "e.g. --config.tokens=4e6")
  args = [prog] + argv
  fv = flags.FlagValues()
  flags.DEFINE_string("workdir", default_workdir, "run directory", flag_values=fv)
  flags.DEFINE_boolean("dry_run", False, "print the plan and exit", flag_values=fv)
  flags.DEFINE_boolean("quiet", False, "no progress lines", flag_values=fv)
  # ml_collections loads every config file as the module `config_config` and re-executes a
  # second file into the first one's module, so a file without get_config() would find the
  # previous file's: a fresh module each parse.
  sys.modules.pop("config_config", None)
  logging.getLogger("absl").addFilter(_no_none_notice)  # the UserError below says it
  try:
    # Inside the try: the default config file is loaded, with the overrides, right here.
    config_flags.DEFINE_config_file("config", default=default_config, flag_values=fv,
                                    lock_config=True, sys_argv=args,
                                    help_string="config file[:ARG]")
    fv(args)
    config = fv["config"].value
  except Exception as e:  # pylint: disable=broad-except
    # The config file is the user's Python: whatever it raises is their mistake to fix.
    raise UserError(_flag_error(e, argv, _config_path(argv, default_config), base)) from None
  _check_loaded(config, _config_path(argv, default_config))
  if fv.workdir:
    atomic.check_backend(fv.workdir)  # gs:// without gcsfs: refused before anything compiles
  console.quiet_tfds()
  return ConfigFlags(config, fv.workdir, fv.dry_run, fv.quiet, verbose)


def _config_path(argv: list[str], default_config: str) -> str:
  """The config file the flags name (the last --config=PATH[:ARG] wins), without its ARG."""
  path = default_config
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      path = a[len("--config="):]
    elif a == "--config" and i + 1 < len(argv):
      path = argv[i + 1]
  return path.split(":", 1)[0]


def _check_loaded(config, path: str) -> None:
  """ml_collections defers a config file it could not find or load to the first access."""
  error = vars(config).get("_error") if type(config).__name__ == "_ErrorConfig" else None
  if error is not None:
    raise UserError(f"--config={path}: cannot load it ({_innermost(error)}); "
                    "give the path of a Python file that defines get_config()")
  if not isinstance(config, ml_collections.ConfigDict):
    raise UserError(f"--config={path}: get_config() returned {type(config).__name__}, "
                    "expected an ml_collections.ConfigDict (see sweeps/configs/smoke.py)")


def _innermost(e: BaseException) -> str:
  """The last non-empty line of the message of `e` (ml_collections nests its causes)."""
  lines = [line.strip() for line in str(e).splitlines() if line.strip()]
  return lines[-1] if lines else type(e).__name__


def _in_config_file(e: BaseException, path: str) -> str | None:
  """'line N' of the deepest frame of `e` inside the config file `path`, if any."""
  if isinstance(e, SyntaxError) and e.filename and os.path.abspath(e.filename) == \
      os.path.abspath(path):
    return f"line {e.lineno}"
  line = None
  for frame in traceback.extract_tb(e.__traceback__):
    if os.path.abspath(frame.filename) == os.path.abspath(path):
      line = f"line {frame.lineno}"
  return line


def _override_key(e: Exception) -> tuple[str, str] | None:
  """(key, suggestion) of an override of a key the config lacks, from ml_collections' error."""
  cause = e.args[0] if isinstance(e, AttributeError) and e.args and isinstance(
      e.args[0], KeyError) else e
  if not isinstance(cause, (KeyError, AttributeError)) or not cause.args:
    return None
  text = str(cause.args[0])
  m = re.match(r"""^['"]?([^'"\n]+)['"]?(?:\n.*?Did you mean "([^"]+)")?""", text, re.S)
  return (m.group(1), m.group(2) or "") if m else None


def _flag_error(e: Exception, argv: list[str], path: str, base=None) -> str:
  """One line for a bad flag or config file: what it names and the innermost cause. `base`,
  the config without the overrides, names the keys a misplaced or mistyped one may mean."""
  keys = dict(flat(base)) if base is not None else {}
  key = _override_key(e)
  if key:
    name, suggestion = key
    flag = next((a.split("=")[0] for a in argv
                 if a.startswith("--config.") and name in a.split("=")[0].split(".")), None)
    if flag:
      # A key written without the section that holds it (--config.seed for train.seed).
      deeper = sorted(k for k in keys if k.endswith("." + flag[len("--config."):]))
      hint = (f"did you mean {suggestion!r}?" if suggestion else
              f"did you mean --config.{' or --config.'.join(deeper)}?" if deeper else
              "check the spelling against the config file")
      if name == "train" and flag.startswith("--config.train."):
        # A sweep's run keys sit under `train.`; a run's config holds them at the top.
        hint = (f"a run's config has its keys at the top (a sweep's hold them under "
                f"train.): --config.{flag[len('--config.train.'):]}")
      return f"{flag}: the config has no key {name!r}; {hint}"
  if isinstance(e, AttributeError) and "has no attribute 'get_config'" in str(e):
    return f"--config={path}: defines no get_config(); a config file is Python with a " \
           "function get_config() returning an ml_collections.ConfigDict"
  where = _in_config_file(e, path)
  if where or isinstance(e, (SyntaxError, ImportError)):
    return (f"--config={path}: {where + ': ' if where else ''}{type(e).__name__}: "
            f"{_innermost(e)}")
  lines = [line.strip() for line in str(e).splitlines() if line.strip()]
  if not lines:
    return type(e).__name__
  if len(lines) == 1:
    return _bad_value(lines[0], keys) or _named_flag(lines[0], argv)
  # A config file that failed to load or raised: the first line names the flag, the last
  # holds the cause (the rest is a traceback).
  return f"{lines[0].rstrip(':')}: {lines[-1]}"


_TAKES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _bad_value(message: str, keys: dict) -> str | None:
  """absl's "flag --config.K=V: <parser's complaint>" as what key K takes, where the config
  says (its value's type): the parser's own words name no type."""
  m = re.match(r"flag (--config\.([\w.]+))=(.*?): ", message)
  if not m or m.group(2) not in keys:
    return None
  flag, key, value = m.groups()
  takes = _TAKES.get(type(keys[key]))
  if takes is None:
    return None
  return f"{flag}={value}: {key} takes {takes} (the config's value: {_value(keys[key])})"


def _named_flag(message: str, argv: list[str]) -> str:
  """absl's "Could not parse ''" names no flag: add the override it came from."""
  m = re.match(r"Could not parse '(.*?)'", message)
  if not m:
    return message
  flag = next((a for a in argv if a.startswith("--config.") and a.split("=", 1)[-1] ==
               m.group(1)), None)
  return f"{flag}: cannot parse {m.group(1)!r} as a value" if flag else message


def _no_none_notice(record: logging.LogRecord) -> bool:
  # ml_collections logs a config returning None before the one-line refusal says so.
  return "get_config() returned None" not in str(record.msg)


HEADROOM = 0.10  # the share of HBM a cell of `--dry-run --compile` leaves free, by default


@dataclasses.dataclass(frozen=True)
class DryRunFlags:
  """`chinchax sweep --dry-run`'s own flags; sweeps/dry_run.py says what they do."""

  compile: str | None = None   # "" = the config's target
  json: bool = False
  headroom: float = HEADROOM


def split_dry_run_flags(argv: list[str]) -> tuple[list[str], DryRunFlags]:
  """argv without --compile[=TARGET], --json and --headroom=F, and those flags."""
  rest, kw = [], {}
  for arg in argv:
    name, eq, value = arg.partition("=")
    if name == "--compile":
      kw["compile"] = value
    elif arg == "--json":
      kw["json"] = True
    elif name == "--headroom":
      try:
        kw["headroom"] = float(value)
      except ValueError:
        kw["headroom"] = -1.0
      if not 0 <= kw["headroom"] < 1:
        raise UserError(f"--headroom={value!r}: give the fraction of HBM to keep free, "
                        f"from 0 to below 1 (default {HEADROOM:g})")
    else:
      rest.append(arg)
  return rest, DryRunFlags(**kw)
