"""Code shared by the verl consistency rules: the PROMPTS_ONLY switch, the trimming, the base class.

The trimming is inserted as text into two upstream methods (`RayPPOTrainer.fit`, and
`FullyAsyncTrainer._fit_generate`); its loop names are prefixed because they become locals of the
method they land in.
"""

from __future__ import annotations

import libcst as cst

from rlpatch.patch.rule import Gate, PatchRule, Target, parse_statements, read_tree_file, since_gate
from rlpatch.upstream.switches import env_is_on

# The switch every consistency rule reads, spelled like the engine rules' DUMP_ON: one truthy set
# (rlpatch.upstream.switches, which RL211 reads too); anything else, unset included, is off.
PROMPTS_ONLY_IS_ON = env_is_on("PROMPTS_ONLY")

# The trimming, in the block of `{{batch}}` (a DataProto): the prompt part of input_ids,
# attention_mask and position_ids (2-D, or 3-D for mrope: the sequence is the last dim), and zero
# tokens of responses, rollout_log_probs and response_mask when present.
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


V1_TRAINER = "verl/trainer/ppo/v1/trainer_base.py"


class VerlV1Rule(VerlConsistencyRule):
    """Base of the rules for the v1 trainer's own code path (verl 0.9.0+, `trainer.use_v1=True`)."""

    trainers = frozenset({"v1"})
    since = "0.9.0"
    before_since = "no v1 trainer in this release (verl/trainer/ppo/v1/ ships from 0.9.0)"

    def gate(self, target: Target) -> Gate:
        # A tree of unknown version goes by structure: without the v1 trainer there is nothing to serve.
        if target.version is None and not read_tree_file(target.root, V1_TRAINER):
            return Gate("not-applicable", f"verl {target.version_text}: no {V1_TRAINER} in this tree (no v1 trainer)")
        return super().gate(target)
