"""`torchpace explain` (placeholder until its issue lands; replaced by the real command)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return subparsers.add_parser("explain", help="(not yet available)")  # type: ignore[no-any-return]


def run(args: argparse.Namespace) -> int:
    print("torchpace explain: not yet available in this build")
    return 2
