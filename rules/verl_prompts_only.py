"""PROMPTS_ONLY=1: the trainer recomputes log-probs on the prompts only (hybrid trainer).

## What it patches

`RayPPOTrainer.fit` (`verl/trainer/ppo/ray_trainer.py`): with `PROMPTS_ONLY` set, the batch is cut to
its prompt tokens right before the trainer decides between bypass mode and recomputing `old_log_probs`.

## Why

Training/inference consistency is compared on the prefill: msprobe dumps the inference engine's
prefill step and the training engine's forward, and the two are only the same computation when the
training forward sees the prompt tokens alone. With `PROMPTS_ONLY` set, `RayPPOTrainer.fit` cuts the
response part off `input_ids`, `attention_mask` and `position_ids` (2-D, or 3-D for mrope: the
sequence is the last dim) and leaves `responses`, `rollout_log_probs` and `response_mask` with zero
tokens, right before the trainer decides between bypass mode and recomputing `old_log_probs`.

## Versions

Anchor: in `RayPPOTrainer.fit`, the single
`if bypass_recomputing_logprobs:` statement (verl 0.6.1 to 0.9.1); the code goes right before it.

## Trainer

`RayPPOTrainer.fit`, which runs every PPO launch before verl 0.9.0 and, from 0.9.0, only with
`trainer.use_v1=False` (the deprecated `main_ppo_v0`); the default v1 trainer is `verl-prompts-only-v1`'s.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import Insertion, PatchCase, exactly_one, find_class, find_method, find_statements

from ._verl_consistency import VerlConsistencyRule, trim_to_prompts


class VerlPromptsOnly(VerlConsistencyRule):
    """PROMPTS_ONLY=1 trims the batch to its prompts before log-probs are recomputed (RayPPOTrainer.fit)."""

    id = "verl-prompts-only"
    files = ("verl/trainer/ppo/ray_trainer.py",)
    versions = "0.7.0+ (anchor checked 0.7.0 to 0.9.1)"
    trainer = "RayPPOTrainer.fit (trainer.use_v1=False from 0.9.0, main_ppo_v0; the only trainer before 0.9.0)"
    trainers = frozenset({"v0"})
    markers = ("compute_prompts_only", "responses_len")

    # Cases the anchor must accept and refuse (tests/test_patch_rule_cases.py runs them).
    VALID = [
        PatchCase(
            """
class RayPPOTrainer:
    def fit(self):
        for batch in data:
            bypass_recomputing_logprobs = False
            if bypass_recomputing_logprobs:
                pass
""",
            expected="""
class RayPPOTrainer:
    def fit(self):
        for batch in data:
            bypass_recomputing_logprobs = False
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
            if bypass_recomputing_logprobs:
                pass
""",
        ),
    ]

    INVALID = [
        # anchor renamed
        PatchCase(
            VALID[0].source.replace("if bypass_recomputing_logprobs:", "if bypass:"),
            refusal="verl/trainer/ppo/ray_trainer.py: RayPPOTrainer.fit: expected exactly one `if bypass_recomputing_logprobs:` statement, found 0",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        fit = find_method(find_class(module, "RayPPOTrainer", path), "fit", path)
        where = f"{path}: RayPPOTrainer.fit"
        block, anchor = exactly_one(
            find_statements(fit, m.If(test=m.Name("bypass_recomputing_logprobs"))),
            where,
            "`if bypass_recomputing_logprobs:` statement",
        )
        label = f"{where}: before `if bypass_recomputing_logprobs:`"
        return [Insertion(block, anchor, "before", trim_to_prompts("batch"), label)]
