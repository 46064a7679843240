"""The top-level package: every advertised name resolves, and importing it stays torch-free."""

from __future__ import annotations

import subprocess
import sys

import pytest

import torchpace


@pytest.mark.parametrize("name", sorted(torchpace._LAZY))
def test_every_public_name_resolves_to_its_subpackage(name: str) -> None:
    obj = getattr(torchpace, name)
    assert obj.__module__.startswith(torchpace._LAZY[name].rsplit(".", 1)[0])


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        torchpace.nothing_here  # noqa: B018


def test_analyze_path_never_imports_torch() -> None:
    # `torchpace analyze` must start fast: importing torch alone costs over a second.
    code = (
        "import sys, torchpace, torchpace.trace, torchpace.doctor.diagnose, torchpace.report, "
        "torchpace.cli.main; torchpace.cli.main.build_parser(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
