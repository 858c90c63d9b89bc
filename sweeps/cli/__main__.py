"""`python -m chinchax.sweeps.cli ...` is the `chinchax` console script."""

from chinchax.sweeps.cli import main

main()
