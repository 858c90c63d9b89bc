"""`--help` of the config-driven subcommands (`chinchax sweep`, `chinchax train`): the command's
own text, its flags, the named configs and every key of the chosen config with its default
and one-line meaning, from the keys' declarations (sweeps/configs/train.py, sweep.py).
"""

import importlib.util

import ml_collections

from chinchax.errors import UserError
from chinchax.sweeps import configs
from chinchax.sweeps.configs import keys
from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps.configs import train as train_config

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
  """A default as the override would be typed: 1e+11 not 100000000000.0."""
  if isinstance(v, float):
    return f"{v:g}"
  if isinstance(v, (tuple, list)):
    inner = ", ".join(_value(x) for x in v)
    return f"({inner},)" if len(v) == 1 else f"({inner})"
  return repr(v)


def render(prog: str, doc: str, config_arg: str, default_workdir: str | None,
           shown: str = "") -> str:
  """The whole help text; `config_arg` is the resolved config the keys are read from, `shown`
  the --config the user typed."""
  config = load(config_arg)
  sweep = "train" in config and isinstance(config.train, ml_collections.ConfigDict)
  lines = [doc.strip(), "", "flags:"]
  lines += [f"  {f:<27} {m}" for f, m in FLAGS]
  if default_workdir:
    lines[-len(FLAGS) + 2] += f" (default {default_workdir})"
  lines += ["", "named configs (--config=NAME):", configs.listing(), "",
            f"{prog} config keys of --config={shown or config_arg} (override with --config.KEY=VALUE):"]
  rows = [(k, _value(v), meaning(k, sweep) or "") for k, v in flat(config)]
  wk = max(len(k) for k, _, _ in rows)
  wv = min(max(len(v) for _, v, _ in rows), 24)
  lines += [f"  {k:<{wk}}  {v:<{wv}}  {m}".rstrip() for k, v, m in rows]
  return "\n".join(lines)


TRAIN = keys.meanings(train_config.KEYS)
SWEEP = {**keys.meanings(sweep_config.KEYS), **keys.meanings(train_config.KEYS, "train.")}


def meaning(key: str, sweep: bool) -> str | None:
  """The one-line meaning of `key` in a sweep (or train) config, as its declaration gives it."""
  return (SWEEP if sweep else TRAIN).get(key)


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
