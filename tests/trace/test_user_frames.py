"""Which stack frames are the user's: torchpace's own package is not, a folder named torchpace is."""

from __future__ import annotations

from pathlib import Path

import torchpace
from torchpace.trace.stacks import is_user_file, user_location

PACKAGE = Path(torchpace.__file__).parent


def test_a_clone_named_torchpace_holds_user_code() -> None:
    # A clone's default folder name is the project's: its scripts and tests are the user's code.
    assert is_user_file("/home/me/torchpace/tests/doctor/scripts/sleepy.py")
    assert is_user_file("/home/me/torchpace/train.py")


def test_torchpace_itself_is_not_user_code() -> None:
    assert not is_user_file(str(PACKAGE / "runner" / "run.py"))
    assert not is_user_file("/home/me/torchpace/src/torchpace/runner/run.py")  # a source checkout
    assert not is_user_file("/usr/lib/python3.11/site-packages/torchpace/runner/run.py")
    assert is_user_file(str(PACKAGE / "examples" / "naive_train.py"))  # the demos stand for yours


def test_the_innermost_user_frame_skips_torchpace_in_a_clone_named_torchpace() -> None:
    frames = [
        "/home/me/torchpace/src/torchpace/runner/hooks.py(10): wrapper",
        "/home/me/torchpace/examples/../tests/doctor/scripts/loop.py(42): train",
    ]
    loc = user_location(frames)
    assert loc is not None and loc.line == 42 and loc.function == "train"
