"""How long a collection run lasts: gen stops the job after the last step it dumps."""

from __future__ import annotations

from rlpatch.gen.plan import Facts, Plan

TOTAL_STEPS = "trainer.total_training_steps"


def bound_inference_run(plan: Plan, facts: Facts, steps: list[int]) -> None:
    """Inference mode dumps vLLM steps (msprobe counts every execute_model from 0); every training step runs at
    least one on each process that gets a request, so steps 0..K are reached within K+1 training steps and the
    rest of the epochs would dump nothing: the job stops there (a smaller bound of the user's is kept)."""
    bound = max(steps, default=0) + 1
    user = facts.int_or(TOTAL_STEPS, 0)
    if 0 < user <= bound:
        return
    plan.add(TOTAL_STEPS, str(bound), f"stop after the training step that holds inference step {bound - 1} "
             "(each training step runs at least one vLLM step per process); later steps dump nothing",
             replaces=facts.user_value(TOTAL_STEPS))
