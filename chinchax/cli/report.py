"""`chinchax report WORKDIR`: rebuild a sweep workdir's report.md from its runs.jsonl and
law.json (sweeps/report.py; `chinchax sweep` writes it at the end)."""

from chinchax import atomic
from chinchax.sweeps import report
from chinchax.cli import flags


def main(argv: list[str]) -> int:
  p = flags.ArgParser(prog="chinchax report", description=" ".join(__doc__.split()))
  p.add_argument("workdir", help="a sweep workdir (its runs.jsonl and law.json)")
  args = p.parse_args(argv)
  atomic.check_backend(args.workdir, None)
  print(f"wrote {report.write_report(args.workdir)}")
  return 0
