"""The frameworks stay optional: torchpace never imports them, and a missing one says how to get it."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_importing_torchpace_imports_no_framework() -> None:
    code = (
        "import sys, torchpace, torchpace.callbacks, torchpace.callbacks.window, torchpace.monitor\n"
        "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "blocked", "hint"),
    [
        (
            "torchpace.callbacks.lightning",
            ("lightning", "pytorch_lightning"),
            "pip install lightning",
        ),
        ("torchpace.callbacks.huggingface", ("transformers",), "pip install transformers"),
    ],
)
def test_a_missing_framework_is_a_clear_import_error(
    module: str, blocked: tuple[str, ...], hint: str
) -> None:
    block = "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    code = f"import sys\n{block}import {module}\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    assert (
        out.stderr.strip().splitlines()[-1]
        == f"ImportError: {module} needs "
        + ("Lightning: " if "lightning" in module else "transformers: ")
        + hint
    )
