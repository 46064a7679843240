"""Batches of variable-length sequences are mostly padding: the model computes on pad tokens.

Measured under `torchpace doctor` from the profiled batches themselves (runner/sensors/padding.py):
the share of token positions that are padding, and how many of them batching by length would
remove, planned from the row lengths the batches held.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from torchpace.doctor.finding import EvidenceValue, Finding, Severity
from torchpace.doctor.registry import NotApplicable, rule

if TYPE_CHECKING:
    from torchpace.runner.sensors.inspection import Inspection
    from torchpace.runner.sensors.loader import LoaderFacts

MULTIPLE_OF = 8  # pad_collate's default: bucketed batches are planned padded the same way
METHOD = (
    "estimate: the rest of the step (all but the wait for this loader) x the share of padded "
    "token positions that batching by length removes, planned from the {rows} rows the profiled "
    "batches held (sorted by length into the same number of batches, each padded to its longest "
    f"rounded up to {MULTIPLE_OF}); assumes forward and backward scale with padded tokens (the "
    "optimizer step does not, attention grows faster)"
)
FIX = """\
from functools import partial
from torchpace.data import BucketBatchSampler, pad_collate

lengths = [len({sample}) for sample in dataset]  # one length per sample
loader = DataLoader(
    dataset,
    batch_sampler=BucketBatchSampler(lengths, batch_size={batch}),  # similar lengths together
    collate_fn=partial(pad_collate, pad_value={pad}),  # pads to the batch's longest (x8)
)"""
HF_FIX = """
# Hugging Face Trainer: TrainingArguments(group_by_length=True) (Transformers 5:
#   train_sampling_strategy="group_by_length"), with DataCollatorWithPadding(tokenizer)
#   (padding="longest", not "max_length")
# TRL: SFTConfig(packing=True) or padding_free=True: rows filled with whole samples, no padding"""


def _ceil(n: int) -> int:
    return -(-n // MULTIPLE_OF) * MULTIPLE_OF


def bucketed_tokens(lengths: list[int], batches: int) -> int:
    """Padded token positions when `lengths` are sorted into `batches` batches of equal size
    (as BucketBatchSampler makes them), each padded to its longest rounded up to 8."""
    ordered = sorted(lengths)
    total, start = 0, 0
    base, extra = divmod(len(ordered), batches)
    for i in range(batches):
        size = base + (1 if i < extra else 0)
        if size:
            total += size * _ceil(ordered[start + size - 1])
        start += size
    return total


@rule("padding-waste", input="live")
def padding_waste(
    live: Inspection,
    *,
    min_padding_fraction: float = 0.20,
    min_token_saving_fraction: float = 0.15,
    min_batches: int = 3,
) -> list[Finding]:
    """Fire when `min_padding_fraction` of the token positions are padding and batching by length
    removes `min_token_saving_fraction` of them, over at least `min_batches` profiled batches."""
    if not live.loaders:
        raise NotApplicable("the script created no DataLoader")
    found = []
    trains = any(f.trained_batches for f in live.loaders)  # else: no backward() seen at all
    for f in live.loaders:
        batches = f.padded_batches
        if len(batches) < min_batches:
            continue
        padded = sum(b.width * len(b.lengths) for b in batches)
        real = sum(sum(b.lengths) for b in batches)
        lengths = [n for b in batches for n in b.lengths]
        after = bucketed_tokens(lengths, len(batches))
        share, cut = 1 - real / padded, 1 - after / padded
        if share >= min_padding_fraction and cut >= min_token_saving_fraction:
            finding = _finding(live, f, padded, real, after, lengths)
            found.append(_evaluation(finding) if trains and not f.trained_batches else finding)
    return found


def _evaluation(finding: Finding) -> Finding:
    """A loader whose profiled batches no backward pass followed, beside one whose batches
    trained: an evaluation loader, whose padding lengthens evaluation, not the training steps
    (accelerate's gradient_accumulation.py: its eval loader's 47% padding was put at 61% of the
    training step, above the training loader's own finding)."""
    return replace(
        finding,
        severity=Severity.LOW,
        summary=f"{finding.summary}; an evaluation loader (no backward pass followed its "
        "batches): batching by length shortens evaluation, not the training steps",
        saving_ms=None,
        saving_method="not estimated: its batches are evaluation's, not the training steps'",
    )


def _saving(live: Inspection, f: LoaderFacts, cut: float) -> float | None:
    step = live.saving_step_ms
    if not step or f.wait_fraction is None:
        return None
    return round(step * (1 - f.wait_fraction) * cut, 3)


def _finding(
    live: Inspection, f: LoaderFacts, padded: int, real: int, after: int, lengths: list[int]
) -> Finding:
    batches = f.padded_batches
    share, cut = 1 - real / padded, 1 - after / padded
    rows = len(lengths) / len(batches)
    where = f" (DataLoader at {f.created_at.file}:{f.created_at.line})" if f.created_at else ""
    source = batches[0].source
    hf = source == "attention_mask"
    pad = '{"input_ids": tokenizer.pad_token_id, "labels": -100}' if hf else _pad(source)
    evidence: dict[str, EvidenceValue] = {
        "padding_fraction": round(share, 4),
        "bucketed_padding_fraction": round(1 - real / after, 4) if after else None,
        "token_saving_fraction": round(cut, 4),
        "padded_tokens_per_batch": round(padded / len(batches), 1),
        "real_tokens_per_batch": round(real / len(batches), 1),
        "rows_per_batch": round(rows, 1),
        "row_tokens_min": min(lengths),
        "row_tokens_max": max(lengths),
        "batches_count": len(batches),
        "padding_source_name": source,
    }
    return Finding(
        rule="padding-waste",
        severity=Severity.HIGH if cut >= 0.40 else Severity.MEDIUM,
        summary=f"{share:.0%} of the token positions in each batch are padding (rows of "
        f"{min(lengths)}-{max(lengths)} tokens padded to the batch's longest); batching by "
        f"length would cut the padded tokens by {cut:.0%}{where}",
        evidence=evidence,
        fix=FIX.format(
            sample='sample["input_ids"]' if hf else "sample[0]",
            batch=f.batch_size or round(rows),
            pad=pad,
        )
        + (HF_FIX if hf else ""),
        saving_ms=_saving(live, f, cut),
        saving_method=METHOD.format(rows=len(lengths)),
        # A share of tokens times the steps' share not spent waiting (at most 1): load can
        # shrink the estimate, never inflate it.
        load_proof=True,
        locations=(f.created_at,) if f.created_at else (),
        caveat="Batching by length changes which samples share a batch (shuffled within pools "
        "of similar length, each sample still once per epoch); packing removes the padding "
        "altogether but needs a model that keeps packed samples apart (position ids, "
        "block-diagonal or varlen attention).",
    )


def _pad(source: str) -> str:
    return source.removeprefix("pad id ") if source.startswith("pad id ") else "PAD_ID"
