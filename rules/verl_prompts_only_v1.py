"""PROMPTS_ONLY=1 on the v1 trainer: the actor's log-prob recompute sees the prompt tokens only.

## What it patches

Where, and why there: the v1 trainer never holds the tensors. `PPOTrainer._compute_old_log_prob`
passes a `KVBatchMeta` (TransferQueue keys) to `actor_rollout_wg.compute_log_prob`; verl's
`tqbridge` wrapper fetches the fields in the worker process and calls
`ActorRolloutRefWorker.compute_log_prob(self, data)` in `verl/workers/engine_workers.py` with them,
one jagged (nested) row per sample. That method is the one place every log-prob recompute of the
v1 trainer passes through (all three `trainer.v1.trainer_mode`s, FSDP and Megatron engines alike,
and `separate_async`, which overrides `_compute_old_log_prob`). Trimming in the trainer instead
would pull every sequence to the driver and write cut copies back into TransferQueue, changing the
stored rollout for every later stage (reference, critic, advantages, actor update, metrics whose
TransferQueue tags keep the full lengths).

What it inserts into `ActorRolloutRefWorker`:
- in `compute_log_prob`, right before `output = self.actor.infer_batch(data)`: with `PROMPTS_ONLY`
  on and the TransferQueue layout (nested `prompts` and `input_ids`), every nested per-token field
  of the full sequence (`input_ids`, `position_ids` incl. mrope's `(4, seq)` rows, `routed_experts`,
  ...) is cut to each sample's prompt length, so the engine's forward (and the engine dump) is the
  prefill the inference engine ran;
- right after it: each nested output of prompt length (`log_probs`, `entropy`, ...) is padded back
  to the sample's full length with zeros, so what the worker writes to TransferQueue keeps the
  shape the trainer reads (`response_from_nested(log_probs, response_mask)`): the recomputed
  `old_log_probs` and `entropy` of the response tokens are 0 in a PROMPTS_ONLY run (the debug
  metrics and rollout correction are skipped by `verl-debug-metrics` / `verl-rollout-corr`);
- the methods `_prompts_only_inputs` and `_prompts_only_outputs`, after `compute_log_prob`.
Nothing changes with `PROMPTS_ONLY` unset, or for the DataProto layout of `trainer.use_v1=False`
(padded `prompts`; `verl-prompts-only` has trimmed that batch already). Only the log-prob recompute
is trimmed: the actor update still trains on the whole sequence (`DUMP_PHASE=update_actor` dumps
full sequences on the v1 trainer), and the reference pass is left whole: a separate reference worker
(`compute_ref_log_prob`), and with LoRA (`ref_in_actor`) the trainer's second `compute_log_prob` call
with `no_lora_adapter` set (the actor with its adapter off), whose `ref_log_prob` would otherwise be
zero on every response token. Neither is dumped (the engine rules skip them). Checked on CPU with the
real TransferQueue and fixtures of these shapes (tests/test_verl_v1_runtime.py), and on the real
verl 0.9.1 with its FSDP engine, LoRA included (tests/test_rehearsal_training.py); Megatron's R3
router replay (which pairs `input_ids` with `response_mask`) was not run here.

## Why

From verl 0.9.0 `trainer.use_v1` defaults to true and `main_ppo` runs the v1 `PPOTrainer`
(`verl/trainer/ppo/v1/trainer_base.py`), not `RayPPOTrainer.fit`: the trim of `verl-prompts-only`
never runs, training recomputes log-probs on prompt plus response, and the consistency dump cannot
be paired with the inference prefill.

## Versions

Anchor: class `ActorRolloutRefWorker`, method `compute_log_prob`, the single statement
`<name> = self.actor.infer_batch(<first parameter>)` (verl 0.8.0 to 0.9.1 and main). Not applicable
before 0.9.0 (no v1 trainer: `verl/trainer/ppo/v1/` ships from 0.9.0), nor on a tree of unknown
version without `verl/trainer/ppo/v1/trainer_base.py`.

## Trainer

The v1 `PPOTrainer` (`trainer.use_v1=True`, the default from 0.9.0; every
`trainer.v1.trainer_mode`). The code sits in the engine worker, which every trainer runs, but it
acts only on the TransferQueue layout only the v1 trainer produces.
"""

from __future__ import annotations

import libcst as cst
from libcst import matchers as m

from rlpatch.patch.rule import (
    AnchorError,
    Insertion,
    PatchCase,
    blank_line_before,
    exactly_one,
    find_class,
    find_method,
    find_statements,
    first_parameter,
    parse_statements,
)

from ._verl_consistency import PROMPTS_ONLY_IS_ON, VerlV1Rule

ENGINE_WORKERS = "verl/workers/engine_workers.py"
WORKER_CLASS = "ActorRolloutRefWorker"

# `<name> = self.actor.infer_batch(...)`
INFER_STATEMENT = m.SimpleStatementLine(
    body=[m.Assign(
        targets=[m.AssignTarget(target=m.Name())],
        value=m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("self"), attr=m.Name("actor")),
                                      attr=m.Name("infer_batch"))),
    ),
]
)

CUT_INPUTS = "prompts_only_lengths = self._prompts_only_inputs({{data}})"
RESTORE_OUTPUTS = "{{output}} = self._prompts_only_outputs({{output}}, prompts_only_lengths)"

HELPERS = '''
def _prompts_only_inputs(self, data):
    """rlpatch verl-prompts-only-v1: cut every per-token field of the full sequence to the prompt."""
    # The v1 trainer's TransferQueue rows are jagged (one nested row per sample). Returns the
    # per-sample (prompt, full) lengths for _prompts_only_outputs, or None when nothing is cut
    # (switch off, the DataProto layout of trainer.use_v1=False, already prompts only, or LoRA's
    # reference pass: `no_lora_adapter`, whose ref_log_prob must stay whole as a reference worker's).
    import os

    compute_prompts_only = {{switch}}
    keys = data.keys()
    if not compute_prompts_only or "prompts" not in keys or "input_ids" not in keys:
        return None
    reference_pass = data.get("no_lora_adapter") if "no_lora_adapter" in keys else False
    if getattr(reference_pass, "data", reference_pass):
        return None
    prompts, input_ids = data["prompts"], data["input_ids"]
    if not (getattr(prompts, "is_nested", False) and getattr(input_ids, "is_nested", False)):
        return None
    prompt_lens = prompts.offsets().diff().tolist()
    full_lens = input_ids.offsets().diff().tolist()
    if prompt_lens == full_lens:
        return None
    for key in list(keys):
        value = data.get(key)
        if getattr(value, "is_nested", False):
            resized = self._prompts_only_resize(value, full_lens, prompt_lens)
            if resized is not value:
                data[key] = resized
    return prompt_lens, full_lens

def _prompts_only_outputs(self, output, lengths):
    """rlpatch verl-prompts-only-v1: pad each nested output of prompt length back to the full sequence."""
    # The trainer slices the response part out of the outputs with the rollout's response lengths:
    # zeros there keep those shapes. The prediction at the last prompt position is zeroed too (its
    # label lay past the cut).
    if lengths is None or output is None:
        return output
    prompt_lens, full_lens = lengths
    for key in list(output.keys()):
        value = output.get(key)
        if getattr(value, "is_nested", False):
            resized = self._prompts_only_resize(value, prompt_lens, full_lens, keep=[n - 1 for n in prompt_lens])
            if resized is not value:
                output[key] = resized
    return output

@staticmethod
def _prompts_only_resize(value, match, lengths, keep=None):
    """`value` with each row cut or zero-padded to `lengths` along its sequence dim, or `value` itself.

    The sequence dim is the one whose size is `match` in every row (the ragged dim first: mrope's
    `(4, seq)` rows of equal length come back from TransferQueue ragged along the 4).
    """
    import torch

    rows = value.unbind()
    ragged = getattr(value, "_ragged_idx", 1) - 1
    dims = [ragged] + [d for d in range(rows[0].dim()) if d != ragged] if rows else []
    dim = next((d for d in dims if all(row.size(d) == n for row, n in zip(rows, match))), None)
    if dim is None:
        return value
    resized_rows = []
    for index, row in enumerate(rows):
        kept = min(row.size(dim), lengths[index] if keep is None else keep[index])
        shape = list(row.shape)
        shape[dim] = lengths[index]
        resized = row.new_zeros(shape)
        resized.narrow(dim, 0, kept).copy_(row.narrow(dim, 0, kept))
        resized_rows.append(resized)
    return torch.nested.as_nested_tensor(resized_rows, layout=torch.jagged)
'''


class VerlPromptsOnlyV1(VerlV1Rule):
    """PROMPTS_ONLY=1 cuts the v1 trainer's log-prob recompute to the prompts (ActorRolloutRefWorker.compute_log_prob)."""

    id = "verl-prompts-only-v1"
    files = (ENGINE_WORKERS,)
    versions = "0.9.0+ (v1 trainer; anchor checked 0.9.0, 0.9.1 and main)"
    trainer = "v1 PPOTrainer (trainer.use_v1=True, the default from 0.9.0), in ActorRolloutRefWorker.compute_log_prob"
    markers = ("_prompts_only_inputs", "_prompts_only_outputs", "prompts_only_lengths")

    VALID = [
        PatchCase(
            """
class ActorRolloutRefWorker:
    def compute_log_prob(self, data):
        output = self.actor.infer_batch(data)

        return output.cpu() if output is not None else None
""",
            expected='''
class ActorRolloutRefWorker:
    def compute_log_prob(self, data):
        prompts_only_lengths = self._prompts_only_inputs(data)
        output = self.actor.infer_batch(data)
        output = self._prompts_only_outputs(output, prompts_only_lengths)

        return output.cpu() if output is not None else None

    def _prompts_only_inputs(self, data):
        """rlpatch verl-prompts-only-v1: cut every per-token field of the full sequence to the prompt."""
        # The v1 trainer's TransferQueue rows are jagged (one nested row per sample). Returns the
        # per-sample (prompt, full) lengths for _prompts_only_outputs, or None when nothing is cut
        # (switch off, the DataProto layout of trainer.use_v1=False, already prompts only, or LoRA's
        # reference pass: `no_lora_adapter`, whose ref_log_prob must stay whole as a reference worker's).
        import os

        compute_prompts_only = os.environ.get("PROMPTS_ONLY", "").strip().lower() in ("1", "true", "yes", "on")
        keys = data.keys()
        if not compute_prompts_only or "prompts" not in keys or "input_ids" not in keys:
            return None
        reference_pass = data.get("no_lora_adapter") if "no_lora_adapter" in keys else False
        if getattr(reference_pass, "data", reference_pass):
            return None
        prompts, input_ids = data["prompts"], data["input_ids"]
        if not (getattr(prompts, "is_nested", False) and getattr(input_ids, "is_nested", False)):
            return None
        prompt_lens = prompts.offsets().diff().tolist()
        full_lens = input_ids.offsets().diff().tolist()
        if prompt_lens == full_lens:
            return None
        for key in list(keys):
            value = data.get(key)
            if getattr(value, "is_nested", False):
                resized = self._prompts_only_resize(value, full_lens, prompt_lens)
                if resized is not value:
                    data[key] = resized
        return prompt_lens, full_lens

    def _prompts_only_outputs(self, output, lengths):
        """rlpatch verl-prompts-only-v1: pad each nested output of prompt length back to the full sequence."""
        # The trainer slices the response part out of the outputs with the rollout's response lengths:
        # zeros there keep those shapes. The prediction at the last prompt position is zeroed too (its
        # label lay past the cut).
        if lengths is None or output is None:
            return output
        prompt_lens, full_lens = lengths
        for key in list(output.keys()):
            value = output.get(key)
            if getattr(value, "is_nested", False):
                resized = self._prompts_only_resize(value, prompt_lens, full_lens, keep=[n - 1 for n in prompt_lens])
                if resized is not value:
                    output[key] = resized
        return output

    @staticmethod
    def _prompts_only_resize(value, match, lengths, keep=None):
        """`value` with each row cut or zero-padded to `lengths` along its sequence dim, or `value` itself.

    The sequence dim is the one whose size is `match` in every row (the ragged dim first: mrope's
    `(4, seq)` rows of equal length come back from TransferQueue ragged along the 4).
    """
        import torch

        rows = value.unbind()
        ragged = getattr(value, "_ragged_idx", 1) - 1
        dims = [ragged] + [d for d in range(rows[0].dim()) if d != ragged] if rows else []
        dim = next((d for d in dims if all(row.size(d) == n for row, n in zip(rows, match))), None)
        if dim is None:
            return value
        resized_rows = []
        for index, row in enumerate(rows):
            kept = min(row.size(dim), lengths[index] if keep is None else keep[index])
            shape = list(row.shape)
            shape[dim] = lengths[index]
            resized = row.new_zeros(shape)
            resized.narrow(dim, 0, kept).copy_(row.narrow(dim, 0, kept))
            resized_rows.append(resized)
        return torch.nested.as_nested_tensor(resized_rows, layout=torch.jagged)
''',
        ),
    ]

    INVALID = [
        # anchor call renamed
        PatchCase(
            VALID[0].source.replace("self.actor.infer_batch(data)", "self.actor.forward(data)"),
            refusal="verl/workers/engine_workers.py: ActorRolloutRefWorker.compute_log_prob: expected exactly one `output = self.actor.infer_batch(data)` statement, found 0",
        ),
        # method renamed
        PatchCase(
            VALID[0].source.replace("def compute_log_prob", "def compute_logprob"),
            refusal="verl/workers/engine_workers.py: class ActorRolloutRefWorker: expected exactly one method compute_log_prob, found 0 methods named compute_log_prob",
        ),
    ]

    def insertions(self, path: str, module: cst.Module) -> list[Insertion]:
        worker = find_class(module, WORKER_CLASS, path)
        method = find_method(worker, "compute_log_prob", path)
        where = f"{path}: {WORKER_CLASS}.compute_log_prob"
        block, anchor = exactly_one(
            find_statements(method, INFER_STATEMENT), where, "`output = self.actor.infer_batch(data)` statement"
        )
        data = first_parameter(_without_self(method, where), where)
        output = _assigned_name(anchor)
        if not isinstance(worker.body, cst.IndentedBlock):
            raise AnchorError(f"{path}: class {WORKER_CLASS}", "an indented class body", "one line")
        helpers = blank_line_before(parse_statements(HELPERS, switch=PROMPTS_ONLY_IS_ON))
        return [
            Insertion(block, anchor, "before", parse_statements(CUT_INPUTS, data=data),
                      f"{where}: cut the inputs to the prompts before the forward"),
            Insertion(block, anchor, "after", parse_statements(RESTORE_OUTPUTS, output=output),
                      f"{where}: pad the outputs back after the forward"),
            Insertion(worker.body, method, "after", helpers,
                      f"{path}: {WORKER_CLASS}: the _prompts_only_* methods after compute_log_prob"),
        ]


def _without_self(method: cst.FunctionDef, where: str) -> cst.FunctionDef:
    """The method with `self` dropped, so that its first parameter is the data it is given."""
    params = list(method.params.params)
    if not params or params[0].name.value != "self":
        raise AnchorError(where, "a method whose first parameter is self", "none")
    return method.with_changes(params=method.params.with_changes(params=params[1:]))


def _assigned_name(statement: cst.BaseStatement) -> str:
    assert isinstance(statement, cst.SimpleStatementLine)
    assign = statement.body[0]
    assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Name)
    return assign.targets[0].target.value
