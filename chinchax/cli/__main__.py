"""`python -m chinchax.cli ...` is the `chinchax` console script."""

from chinchax.cli import main

main()
