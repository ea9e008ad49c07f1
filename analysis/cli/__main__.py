"""`python -m analysis.cli`: the console script `gapscope`."""

from . import main

if __name__ == "__main__":
    main()
