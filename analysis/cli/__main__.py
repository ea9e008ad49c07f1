"""`python -m analysis.cli`: the console script `gapscope`."""

from . import main

main()
