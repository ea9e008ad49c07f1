"""`python -m study STUDY -o OUT [--part PART]` (study/cli.py), run from the repository root."""

from .cli import study

if __name__ == "__main__":
    study()
