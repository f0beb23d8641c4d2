"""PROMPTS_ONLY=1: the trainer recomputes log-probs on the prompts only (hybrid trainer).

Training/inference consistency is compared on the prefill: msprobe dumps the inference engine's
prefill step and the training engine's forward, and the two are only the same computation when the
training forward sees the prompt tokens alone. With `PROMPTS_ONLY` set, `RayPPOTrainer.fit` cuts the
response part off `input_ids`, `attention_mask` and `position_ids` (2-D, or 3-D for mrope: the
sequence is the last dim) and leaves `responses`, `rollout_log_probs` and `response_mask` with zero
tokens, right before the trainer decides between bypass mode and recomputing `old_log_probs`.

Spec: patches.md section 4 (prompts-only, hybrid). Anchor: in `RayPPOTrainer.fit`, the single
`if bypass_recomputing_logprobs:` statement (verl 0.6.1 to 0.9.1); the code goes right before it.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patchrule import (
    Gate,
    Insertion,
    PatchRule,
    Target,
    exactly_one,
    find_class,
    find_method,
    find_statements,
    parse_statements,
    since_gate,
)

# The switch every consistency rule reads. Unset, empty, 0/false/no/off mean off; anything else on
# (the msprobe guide sets PROMPTS_ONLY=1). Shared with the other verl consistency rules.
PROMPTS_ONLY_IS_ON = 'os.environ.get("PROMPTS_ONLY", "").strip().lower() not in ("", "0", "false", "no", "off")'


# The trimming, in the block of `{{batch}}` (a DataProto). Loop names are prefixed: they become
# locals of the function the code is inserted into.
TRIM_TO_PROMPTS = """
compute_prompts_only = {{switch}}
if compute_prompts_only and "responses" in {{batch}}.batch.keys():
    # PROMPTS_ONLY: keep the prompt tokens only, so that recomputing log-probs is the same prefill
    # the inference engine ran. position_ids is (batch, seq) or (batch, 3, seq) for mrope.
    responses_len = {{batch}}.batch["responses"].size(-1)
    for prompts_only_key in ("input_ids", "attention_mask", "position_ids"):
        prompts_only_full = {{batch}}.batch[prompts_only_key]
        {{batch}}.batch[prompts_only_key] = prompts_only_full[..., : prompts_only_full.size(-1) - responses_len]
    for prompts_only_key in ("responses", "rollout_log_probs", "response_mask"):
        if prompts_only_key in {{batch}}.batch.keys():
            {{batch}}.batch[prompts_only_key] = {{batch}}.batch[prompts_only_key][:, :0]
"""


def trim_to_prompts(batch: str) -> tuple[cst.BaseStatement, ...]:
    """The trimming statements for the DataProto bound to the local `batch`."""
    return parse_statements(TRIM_TO_PROMPTS, switch=PROMPTS_ONLY_IS_ON, batch=batch)


# Cases the anchor must accept and refuse (tests build fixtures from them).
GOOD_CASE = """
class RayPPOTrainer:
    def fit(self):
        for batch in data:
            bypass_recomputing_logprobs = False
            if bypass_recomputing_logprobs:
                pass
"""
BAD_CASE = GOOD_CASE.replace("if bypass_recomputing_logprobs:", "if bypass:")  # anchor renamed: refuse


class VerlConsistencyRule(PatchRule):
    """Base of the verl consistency rules: mode `consistency`, not applicable before `since`."""

    package = "verl"
    modes = frozenset({"consistency"})
    since: str = "0.7.0"
    # Why a release before `since` has nothing to patch.
    before_since: str = (
        "the consistency set starts at verl 0.7.0 (0.6.x actors run the legacy workers the dump does not reach)"
    )

    def gate(self, target: Target) -> Gate:
        return since_gate(target, self.since, self.before_since)


class VerlPromptsOnly(VerlConsistencyRule):
    """PROMPTS_ONLY=1 trims the batch to its prompts before log-probs are recomputed (RayPPOTrainer.fit)."""

    id = "verl-prompts-only"
    files = ("verl/trainer/ppo/ray_trainer.py",)
    versions = ">=0.7.0 (anchor checked 0.7.0 to 0.9.1)"
    markers = ("compute_prompts_only", "responses_len")

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
