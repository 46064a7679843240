"""What the one-call GPU check runs (issues 27 and 28), most valuable first, and the one figure
the summary shows for each step. check.py runs the plan; this file only says what it is.

Every path is inside the work folder (packed into the archive) except `scratch/` (left out).
`--rehearse` runs the same steps CPU-sized: the same commands and files, smaller numbers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAIRS = ("tf32", "tensor_shapes", "near_capacity", "loader_stall", "item_sync")
# (script, trace folder, report) of the doctor's runs on the examples
NAIVE = ("naive_train.py", "traces/naive", "reports/naive.json")
TUNED = ("tuned_train.py", "traces/tuned", "reports/tuned.json")
VERIFY = ("naive_train.py", "traces/naive-verify", "reports/naive-verify.json")


@dataclass(frozen=True)
class Command:
    """One process of a step; `stdout`: a file in the work folder for its output (else the log).

    `budget_margin_s`: the command takes `--budget S` (torchpace bench): the driver passes the
    step's time left less this margin (start-up, one run longer than the others, the writing), so
    the command ends on its own and writes what it measured instead of being killed.
    """

    argv: tuple[str, ...]
    stdout: str | None = None
    budget_margin_s: float | None = None


@dataclass(frozen=True)
class Step:
    """A time-boxed step: its commands run in order, each even when one before it failed."""

    name: str
    issue: int
    timeout_s: float
    commands: tuple[Command, ...]
    figure: Callable[[Path], str]  # the work folder -> one short key figure for the summary


@dataclass(frozen=True)
class Mode:
    """Where and how big: the interpreter, the work folder, GPU-sized or the CPU rehearsal."""

    python: str
    work: Path
    rehearse: bool


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cuda_figure(work: Path) -> str:
    return (work / "reports" / "cuda.txt").read_text().strip()


def pytest_figure(work: Path) -> str:
    from xml.etree import ElementTree

    root = ElementTree.parse(work / "reports" / "pytest-cuda.xml").getroot()
    suite = root if root.tag == "testsuite" else root[0]
    total, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    return f"{total - skipped - failed} passed, {failed} failed, {skipped} skipped"


def env_figure(work: Path) -> str:
    facts = _read(work / "reports" / "env.json")["facts"]
    gpus = ", ".join(g.get("name", "?") for g in facts["gpus"]) or "no GPU"
    return f"{gpus}; torch {facts['torch_version']}, CUDA {facts['cuda_build'] or '-'}"


def doctor_figure(report: str) -> Callable[[Path], str]:
    def figure(work: Path) -> str:
        rules = [f["rule"] for f in _read(work / "reports" / report)["findings"]]
        return f"{len(rules)} findings: {', '.join(rules) or '-'}"

    return figure


def verify_figure(work: Path) -> str:
    doc = _read(work / "reports" / "naive-verify.json")
    parts = []
    for f in doc["findings"]:
        best = (f.get("measured") or {}).get("best")
        if best and best.get("speedup_ratio"):
            parts.append(f"{f['rule']} {best['speedup_ratio']:.2f}x")
    verification = doc.get("verification") or {}
    combined = verification.get("combined")
    if combined and combined.get("speedup_ratio"):
        parts.insert(0, f"combined {combined['speedup_ratio']:.2f}x")
    notes = verification.get("notes") or ["-"]
    return "; ".join(parts) or f"no fix measured ({notes[0][:80]})"


def bench_figure(name: str) -> Callable[[Path], str]:
    """Full recipe, the 001 recipe (+ prefetcher: workers, persistent, pin, prefetcher), the
    recipe's share of the data-on-device ceiling, and the peers: issue 28's targets."""

    def figure(work: Path) -> str:
        rows = {
            r["config"]["name"]: r["config"]
            for r in _lines(work / "bench" / name)
            if r["type"] == "config"
        }
        cumulative = [c for c in rows.values() if c["kind"] == "cumulative"]
        parts = []
        if cumulative:
            parts.append(
                f"recipe {cumulative[-1]['speedup']:.2f}x ({cumulative[-1]['parity']['status']})"
            )
        if "+ prefetcher" in rows:
            parts.append(f"001 {rows['+ prefetcher']['speedup']:.2f}x")
        ceiling = next((c for c in rows.values() if c["kind"] == "ceiling"), None)
        if ceiling and cumulative:
            parts.append(f"of ceiling {cumulative[-1]['units_per_s'] / ceiling['units_per_s']:.2f}")
        parts += [f"{c['name']} {c['speedup']:.2f}x" for c in rows.values() if c["kind"] == "peer"]
        return "; ".join(parts)

    return figure


def analyze_figure(work: Path) -> str:
    counts = [
        f"{p.stem.removesuffix('-analyze')} {len(_read(p)['findings'])}"
        for p in sorted((work / "reports").glob("*-analyze.json"))
    ]
    return "findings: " + ", ".join(counts)


def pair_figure(name: str) -> Callable[[Path], str]:
    """Whether the rule fires before and is silent after, the speedup, the measured saving."""

    def figure(work: Path) -> str:
        folder = work / "pairs" / name
        pair = _read(folder / "pair.json")
        before, after = (_read(folder / f"{side}-report.json") for side in ("before", "after"))
        if any(s["rule"] == pair["rule"] for s in before["skipped"]):
            judged = "not applicable here"
        else:
            fired = [any(f["rule"] == pair["rule"] for f in r["findings"]) for r in (before, after)]
            judged = {(True, False): "fires/silent", (True, True): "fires on both"}.get(
                (fired[0], fired[1]), "silent on both" if not fired[1] else "fires only after"
            )
        return f"{judged}; {pair['speedup']:.2f}x, saving {pair['measured_saving_ms']:.2f} ms/step"

    return figure


def calibrate_figure(work: Path) -> str:
    rows = _read(work / "pairs" / "calibration.json")
    good = [r for r in rows if r["verdict"].startswith(("within", "bound holds"))]
    return f"{len(good)} of {len(rows)} within +-25% or bound holds"


def html_figure(work: Path) -> str:
    pages = sorted((work / "reports").glob("*.html"))
    return ", ".join(f"{p.name} {p.stat().st_size // 1024} KiB" for p in pages)


def follow_figure(work: Path) -> str:
    """The watch's cost per step at each size (issue 25: at most 1% of a ~1.4 ms step, which
    the shared 2-core machine cannot resolve: quartiles -52 to +132 us over 40 rounds)."""
    out = []
    for line in (work / "reports" / "follow-cost.txt").read_text().splitlines():
        if "the hooks" in line:
            on, hooks = line.split(" on ", 1)[1].split(",")[0], line.split("the hooks ", 1)[1]
            out.append(f"step {on.strip()}: {hooks.strip()}")
    return "; ".join(out) or "no figure"


def _doctor(m: Mode, script: str, out: str, report: str, *extra: str) -> Command:
    window = ("--warmup", "2", "--steps", "3") if m.rehearse else ("--warmup", "5", "--steps", "10")
    # Rehearsal: 32 small steps, enough for --verify's window (3 + 12 steps) on a slow CPU.
    # GPU: one epoch is 64 steps of 64 images.
    small = ("--samples", "512", "--batch-size", "16")
    data = ("--epochs", "1", *small) if m.rehearse else ("--epochs", "1")
    return Command(
        (m.python, "-m", "torchpace", "doctor", *window, *extra, "--out", str(m.work / out),
         "-o", str(m.work / report), f"examples/{script}", *data)
    )  # fmt: skip


# Every technique but compile: the short bench checks that each CUDA path runs; compile's
# inductor build (a minute or more per configuration, dynamo reset each time) is left to issue
# 28's benches, which have the time for it.
WITHOUT_COMPILE = (
    "workers", "persistent-workers", "pin-memory", "prefetcher", "sync-free-logging", "bucketing",
    "token-budget", "cudnn-benchmark", "tf32", "channels-last", "amp-bf16", "amp-fp16",
    "memory-warmup", "checkpointing",
)  # fmt: skip


def _bench(m: Mode, workload: str, name: str, *, short: bool) -> tuple[Command, ...]:
    """One bench with peers (JSON lines), then its page rendered from them."""
    if m.rehearse:  # eager: inductor would spend the rehearsal compiling C++ on two cores
        sizing = ("--size", "tiny", "--steps", "2", "--warmup", "1", "--repeat", "1",
                  "--compile-backend", "eager")  # fmt: skip
    elif short:
        sizing = ("--device", "cuda", "--steps", "5", "--warmup", "2", "--repeat", "1")
    else:
        sizing = ("--device", "cuda", "--steps", "15", "--warmup", "3", "--repeat", "3")
    chosen = ("--techniques", *WITHOUT_COMPILE) if short else ()
    out = m.work / "bench" / name
    tp = (m.python, "-m", "torchpace", "bench")
    measure = (*tp, "--workload", workload, *sizing, *chosen, "--peers", "-o", str(out))
    return (
        Command(measure, budget_margin_s=40 if short else 60),
        Command((*tp, "--from", str(out), "-o", str(out.with_suffix(".html")))),
    )


def _pair(m: Mode, name: str) -> Step:
    folder = m.work / "pairs" / name
    sizing = ("--device", "cpu", "--size", "tiny") if m.rehearse else ("--device", "cuda")
    analyze = [
        Command((m.python, "-m", "torchpace", "analyze", str(folder / f"{side}.json.gz"),
                 "--format", "json", "-o", str(folder / f"{side}-report.json")))
        for side in ("before", "after")
    ]  # fmt: skip
    record = Command((m.python, f"benchmarks/gpu/pairs/{name}.py", "--out", str(folder), *sizing))
    return Step(f"pair-{name.replace('_', '-')}", 28, 75, (record, *analyze), pair_figure(name))


def _issue27(m: Mode) -> list[Step]:
    """Every CUDA path runs, and the doctor diagnoses the examples on the GPU."""
    tp, w = (m.python, "-m", "torchpace"), m.work
    probe = (
        "import torch; ok = torch.cuda.is_available(); "
        "print((torch.cuda.get_device_name() if ok else 'no CUDA device') + "
        "f'; torch {torch.__version__}, CUDA {torch.version.cuda}'); "
        f"raise SystemExit(0 if ok or {m.rehearse} else 1)"
    )
    pytest = (m.python, "-m", "pytest", "-m", "cuda", "-q", "-rA", "-p", "no:cacheprovider",
              "--continue-on-collection-errors", f"--junitxml={w / 'reports' / 'pytest-cuda.xml'}",
              "tests")  # fmt: skip
    env = [Command((*tp, "env")), Command((*tp, "env", "--format", "json"), "reports/env.json")]
    if not m.rehearse:
        env.insert(0, Command(("nvidia-smi",)))
    # Rehearsal: 120 s, so that each run may take 40 s (verify's per-run limit is a third of the
    # budget, at least 30 s): a busy two-core CPU needs that for the small naive script.
    verify = ("--verify", "--verify-budget", "120" if m.rehearse else "90")
    analyze = tuple(
        Command(
            (
                *tp,
                "analyze",
                str(w / "traces" / name),
                "-o",
                str(w / "reports" / f"{name}-analyze.{ext}"),
            )
        )
        for name in ("naive", "tuned")
        for ext in ("json", "html")
    )
    return [
        Step(
            "cuda-visible",
            27,
            60,
            (Command((m.python, "-c", probe), "reports/cuda.txt"),),
            cuda_figure,
        ),
        Step("pytest-cuda", 27, 150, (Command(pytest),), pytest_figure),
        Step("env", 27, 40, tuple(env), env_figure),
        Step("doctor-naive", 27, 90, (_doctor(m, *NAIVE),), doctor_figure("naive.json")),
        Step("doctor-tuned", 27, 90, (_doctor(m, *TUNED),), doctor_figure("tuned.json")),
        Step("verify-naive", 27, 170, (_doctor(m, *VERIFY, *verify),), verify_figure),
        Step(
            "bench-vision-short",
            27,
            120,
            _bench(m, "vision", "vision-short.json", short=True),
            bench_figure("vision-short.json"),
        ),
        Step("analyze-traces", 27, 60, analyze, analyze_figure),
    ]


def _issue28(m: Mode) -> list[Step]:
    """Before/after pairs for the GPU rules, their calibration, and the bench's GPU figures."""
    calibrate = (m.python, "benchmarks/gpu/pairs/calibrate.py", str(m.work / "pairs"))
    return [
        *[_pair(m, name) for name in PAIRS],
        Step("calibrate", 28, 20, (Command(calibrate),), calibrate_figure),
        Step(
            "bench-vision",
            28,
            300,
            _bench(m, "vision", "vision.json", short=False),
            bench_figure("vision.json"),
        ),
        Step(
            "bench-text",
            28,
            300,
            _bench(m, "text", "text.json", short=False),
            bench_figure("text.json"),
        ),
    ]


def plan(m: Mode) -> list[Step]:
    """Every step, most valuable first: issue 27's checks, issue 28's measurements, the HTML
    pages of the doctor (its JSON reports came first), and last the watch's cost per step."""
    html = (
        _doctor(m, "naive_train.py", "scratch/naive", "reports/naive.html"),
        _doctor(m, "tuned_train.py", "scratch/tuned", "reports/tuned.html"),
    )
    followed = _doctor(
        m, "naive_train.py", "traces/naive-follow", "reports/naive-follow.json", "--follow"
    )
    size = ("--smoke",) if m.rehearse else ("--sizes", "ms,tiny", "--rounds", "16")
    follow = (m.python, "benchmarks/bench_follow.py", "--in-process", *size)
    return [
        *_issue27(m),
        *_issue28(m),
        Step("doctor-html", 27, 90, html, html_figure),
        # Issue 25 on a GPU: the whole run's account and its findings (the JSON holds both).
        Step("doctor-follow", 25, 120, (followed,), doctor_figure("naive-follow.json")),
        # Issue 25, a CPU measure: a quiet 16-core host resolves what the shared one cannot.
        Step("follow-cost", 25, 150, (Command(follow, "reports/follow-cost.txt"),), follow_figure),
    ]
