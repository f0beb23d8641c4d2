"""PROMPTS_ONLY=1 for the fully-async trainer: trim each batch taken from the queue to its prompts.

## What it patches

`FullyAsyncTrainer._fit_generate`: with `PROMPTS_ONLY` set, each batch taken from the message queue is
cut to its prompt tokens, as `verl-prompts-only` does in `RayPPOTrainer.fit`.

## Why

The fully-async trainer (`FullyAsyncTrainer`, verl 0.8.0+) does not go through `RayPPOTrainer.fit`'s
anchor: it takes finished rollouts from the message queue in `_fit_generate`. The same trimming as
`verl-prompts-only` runs there, right after the samples are taken and before the rollout temperature
is stored in `batch.meta_info`, and only when the batch has `responses`.

## Versions

Anchor: in `FullyAsyncTrainer._fit_generate`,
the single `batch.meta_info["temperature"] = ...` assignment; the code goes right before it.
The file does not exist before verl 0.8.0 (the policy lived in `recipe/`, outside the wheel).

## Trainer

The fully-async trainer only (its own entry point `fully_async_main`, whatever `trainer.use_v1` says).
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import Insertion, PatchCase, exactly_one, find_class, find_method, find_statements

from ._verl_consistency import VerlConsistencyRule, trim_to_prompts

# `<name>.meta_info["temperature"] = ...`: the batch is whatever name the anchor stores into.
TEMPERATURE_STORE = m.SimpleStatementLine(
    body=[
        m.Assign(
            targets=[
                m.AssignTarget(
                    target=m.Subscript(
                        value=m.Attribute(value=m.Name(), attr=m.Name("meta_info")),
                        slice=[m.SubscriptElement(slice=m.Index(value=m.SimpleString(m.MatchIfTrue(
                            lambda text: text.strip("'\"") == "temperature"
                        ))))],
                    )
                )
            ]
        )
    ]
)


class VerlPromptsOnlyAsync(VerlConsistencyRule):
    """PROMPTS_ONLY=1 trims each fully-async batch to its prompts (FullyAsyncTrainer._fit_generate)."""

    id = "verl-prompts-only-async"
    files = ("verl/experimental/fully_async_policy/fully_async_trainer.py",)
    versions = "0.8.0+ (anchor checked 0.8.0 to 0.9.1)"
    trainer = "FullyAsyncTrainer (entry verl.experimental.fully_async_policy.fully_async_main)"
    trainers = frozenset({"fully-async"})
    markers = ("compute_prompts_only", "responses_len")
    since = "0.8.0"
    before_since = "no fully-async trainer in this release (FullyAsyncTrainer ships from 0.8.0)"

    VALID = [
        PatchCase(
            """
class FullyAsyncTrainer:
    async def _fit_generate(self, batch=None):
        epoch, batch = await self._get_samples_from_queue()
        batch.meta_info["temperature"] = 1.0
        return batch
""",
            expected="""
class FullyAsyncTrainer:
    async def _fit_generate(self, batch=None):
        epoch, batch = await self._get_samples_from_queue()
        compute_prompts_only = os.environ.get("PROMPTS_ONLY", "").strip().lower() in ("1", "true", "yes", "on")
        if compute_prompts_only and "responses" in batch.batch.keys():
            # PROMPTS_ONLY: keep the prompt tokens only, so that recomputing log-probs is the same prefill
            # the inference engine ran. position_ids is (batch, seq) or (batch, 3, seq) for mrope.
            responses_len = batch.batch["responses"].size(-1)
            for prompts_only_key in ("input_ids", "attention_mask", "position_ids"):
                prompts_only_full = batch.batch[prompts_only_key]
                batch.batch[prompts_only_key] = prompts_only_full[..., : prompts_only_full.size(-1) - responses_len]
            for prompts_only_key in ("responses", "rollout_log_probs", "response_mask"):
                if prompts_only_key in batch.batch.keys():
                    batch.batch[prompts_only_key] = batch.batch[prompts_only_key][:, :0]
        batch.meta_info["temperature"] = 1.0
        return batch
""",
        ),
    ]

    INVALID = [
        # no anchor
        PatchCase(
            VALID[0].source.replace('batch.meta_info["temperature"] = 1.0', "pass"),
            refusal='verl/experimental/fully_async_policy/fully_async_trainer.py: FullyAsyncTrainer._fit_generate: expected exactly one `batch.meta_info["temperature"] = ...` statement, found 0',
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        method = find_method(find_class(module, "FullyAsyncTrainer", path), "_fit_generate", path)
        where = f"{path}: FullyAsyncTrainer._fit_generate"
        block, anchor = exactly_one(
            find_statements(method, TEMPERATURE_STORE), where, '`batch.meta_info["temperature"] = ...` statement'
        )
        batch = _stored_batch_name(anchor)
        label = f'{where}: before `{batch}.meta_info["temperature"] = ...`'
        return [Insertion(block, anchor, "before", trim_to_prompts(batch), label)]


def _stored_batch_name(anchor: cst.BaseStatement) -> str:
    assert isinstance(anchor, cst.SimpleStatementLine)
    assign = anchor.body[0]
    assert isinstance(assign, cst.Assign)
    target = assign.targets[0].target
    assert isinstance(target, cst.Subscript) and isinstance(target.value, cst.Attribute)
    assert isinstance(target.value.value, cst.Name)
    return target.value.value.value
