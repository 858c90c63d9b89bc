"""`python -m chinchax.cli ...` is the `chinchax` console script."""

from chinchax.cli import main

if __name__ == "__main__":  # a process that imports this module (a spawn, a worker) runs nothing
  main()
