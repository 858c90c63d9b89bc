"""README's and DESIGN's command lists name every subcommand the dispatcher knows."""

import os
import re

from chinchax import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_command_is_listed():
  for doc in ("README.md", os.path.join("docs", "DESIGN.md")):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
      text = f.read()
    listed = set(re.findall(r"^chinchax ([\w-]+)", text, re.M))
    assert set(cli.COMMANDS) <= listed, (doc, sorted(set(cli.COMMANDS) - listed))
