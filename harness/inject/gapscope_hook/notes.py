"""The hook's messages: one line each on stderr, never the program's own output."""

import sys


def say(message: str) -> None:
    print(f"gapscope hook: {message}", file=sys.stderr, flush=True)
