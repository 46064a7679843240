"""`python -m torchpace.examples [NAME]`: where the bundled demos are (a NAME prints only its path)."""

from __future__ import annotations

import sys

from torchpace.examples import files, path

USAGE = """\
Try them from any folder:
  torchpace doctor -m torchpace.examples.naive_train --epochs 1
  torchpace doctor -m torchpace.examples.tuned_train --epochs 1
  torchpace analyze "$(python -m torchpace.examples slow_loader.pt.trace.json.gz)"
"""


def main(argv: list[str]) -> int:
    """Print every bundled file's path, or the path of the one named."""
    if argv:
        try:
            print(path(argv[0]))
        except ValueError as exc:
            print(f"torchpace: error: {exc}", file=sys.stderr)
            return 2
        return 0
    print("Bundled examples:")
    for p in files():
        print(f"  {p}")
    print(USAGE, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
