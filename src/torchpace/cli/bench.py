"""`torchpace bench`: measure each technique's speedup, alone and stacked, side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from torchpace.cli import reporting
from torchpace.cli.formatting import subcommand
from torchpace.cli.status import StatusLine
from torchpace.errors import UsageError
from torchpace.report import choose_format

# Output-file extension -> format (the report package chooses: torchpace.report.choose_format).
EXTENSIONS = {".json": "json", ".jsonl": "json", ".html": "html", ".htm": "html", ".txt": "text"}

EPILOG = """examples:
  torchpace bench                                   # vision workload, every technique that applies
  torchpace bench --workload text --steps 50 --repeat 5
  torchpace bench --techniques workers amp-bf16 compile -o results.html
  torchpace bench --workload my_workload.py         # a file whose build() returns model, dataset, loss
  torchpace bench --peers -o results.json           # also Lightning / timm set-ups when installed
  torchpace bench --list                            # the techniques and what each changes
  torchpace bench --from results.json -o results.html   # re-render a saved run, no measuring
  torchpace bench --budget 300 -o results.json     # at most 5 minutes; what did not fit is listed
"""


# long: one flat list of argparse options, in the order --help shows them.
def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `torchpace bench`."""
    parser = subcommand(
        subparsers,
        "bench",
        help="measure each speed technique, alone and stacked, on a workload",
        description="Run a naive baseline, then each technique on its own and cumulatively, "
        "and report throughput, step time, data wait, peak memory, time to first step and loss parity.",
        epilog=EPILOG,
    )
    add = parser.add_argument
    add(
        "--workload",
        default="vision",
        help="vision, text, or a path to a .py file defining build()",
    )
    add(
        "--size",
        choices=("tiny", "small", "full"),
        help="built-in workload size (default: full on cuda, small on cpu)",
    )
    add(
        "--techniques",
        nargs="+",
        metavar="T",
        help="techniques to measure (default: all; see --list)",
    )
    add("--device", choices=("cpu", "cuda"), help="default: cuda when available, else cpu")
    add("--steps", type=int, default=30, help="measured steps per repeat (default 30)")
    add(
        "--warmup",
        type=int,
        default=3,
        help="unmeasured steps first, after the first step is timed (default 3)",
    )
    add("--repeat", type=int, default=3, help="repeats per configuration, interleaved (default 3)")
    add(
        "--max-repeat",
        type=int,
        metavar="N",
        help="rounds at most: a configuration still inconclusive after --repeat rounds gets more "
        "until its interval settles (default: 2 x --repeat, at least 6)",
    )
    add(
        "--workers",
        type=int,
        help="worker processes for the workers technique (default: the worker policy's count for the cores and device, at least 1)",
    )
    add("--seed", type=int, default=0, help="model init, data and order seed (default 0)")
    add("--peers", action="store_true", help="also run Lightning/timm set-ups where installed")
    add("--no-ceiling", action="store_true", help="skip the data-already-on-device ceiling run")
    add("--compile-backend", default="inductor", help="torch.compile backend (default inductor)")
    add(
        "--budget",
        type=float,
        metavar="S",
        help="seconds for the whole measurement: configurations and rounds that would not fit "
        "are left out and listed (default: measure everything)",
    )
    add(
        "-o",
        "--output",
        metavar="FILE",
        help="write results to FILE (.json: JSON lines, .html, .txt)",
    )
    add(
        "--format",
        choices=("text", "json", "html"),
        help="output format (default: from -o, else text)",
    )
    add(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="render a saved .json run instead of measuring",
    )
    add("--list", action="store_true", help="list the techniques and exit")
    return parser


def run(args: argparse.Namespace) -> int:
    """Plan, measure, and write the table (stdout) and the chosen output."""
    fmt = choose_format(args.output, args.format, extensions=EXTENSIONS)
    if args.list:
        reporting.write_stdout(_technique_list() + "\n")
        return 0
    if args.from_file:
        _write(_read(args.from_file), fmt, args.output)
        return 0
    import torch

    from torchpace.bench.config import BenchSettings
    from torchpace.bench.harness import run_bench
    from torchpace.bench.techniques import ORDER, get_technique
    from torchpace.bench.workloads import get_workload

    device = _device(args.device, torch)
    chosen = [get_technique(n) for n in args.techniques] if args.techniques else list(ORDER)
    settings = _settings(args, BenchSettings)
    size = args.size or ("full" if device.type == "cuda" else "small")
    workload = get_workload(args.workload, size, args.seed)
    status = StatusLine(sys.stderr, prefix="")
    try:
        result = run_bench(workload, device, settings, chosen, progress=_progress(status))
    finally:
        status.clear()
    _write(result, fmt, args.output)
    return 0


def _device(name: str | None, torch: Any) -> Any:
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"--device cuda, but this torch ({torch.__version__}) sees no CUDA GPU; "
            "use --device cpu or run on a machine with a GPU and a CUDA build of torch"
        )
    return torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))


def _settings(args: argparse.Namespace, settings_class: Any) -> Any:
    try:
        return settings_class(
            steps=args.steps,
            warmup=args.warmup,
            repeat=args.repeat,
            max_repeat=args.max_repeat if args.max_repeat is not None else max(6, 2 * args.repeat),
            seed=args.seed,
            compile_backend=args.compile_backend,
            workers=args.workers,
            peers=args.peers,
            ceiling=not args.no_ceiling,
            budget_s=args.budget,
        )
    except ValueError as exc:
        raise UsageError(f"{exc}; see torchpace bench --help") from exc


def _read(path: str) -> Any:
    from torchpace.bench.results import read_jsonl

    try:
        return read_jsonl(path)
    except FileNotFoundError as exc:
        raise UsageError(
            f"--from {path!r}: no such file; give a .json file torchpace bench wrote"
        ) from exc
    except ValueError as exc:  # msgspec's DecodeError/ValidationError are ValueErrors
        raise UsageError(f"--from {path!r}: not a torchpace bench JSON lines file ({exc})") from exc


def _technique_list() -> str:
    from torchpace.bench.techniques import ORDER

    width = max(len(t.name) for t in ORDER)
    return "\n".join(f"{t.name.ljust(width)}  {t.summary}" for t in ORDER)


def _progress(status: StatusLine) -> Any:
    if not status.enabled:
        return None

    def show(done: int, total: int, label: str) -> None:
        status.say(f"[{done}/{total}] {label}")

    return show


def _write(result: Any, fmt: str, output: str | None) -> None:
    from torchpace.report.bench import render
    from torchpace.report.bench.text import render_plain, render_rich

    table = render_rich(result) if sys.stdout.isatty() else render_plain(result)
    rendered = render(result, fmt)
    if output is None:
        reporting.write_stdout(table if fmt == "text" else rendered)
        return
    Path(output).write_text(rendered, encoding="utf-8")
    reporting.write_stdout(table)
    print(f"torchpace bench: wrote {output}", file=sys.stderr)
