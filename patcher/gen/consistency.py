"""consistency mode: rlpatch's training-engine patch plus the vLLM-Ascend inference dump.

By default (verl >= 0.9.0) the script keeps its own rollout TP, batch sizes, micro-batches, `n`,
`max_num_seqs`, prefix caching and dynamic batching: the engine patch logs where each request's
tokens sit in every micro-batch, the dispatch logger where they sit in every packed step, and
`rlpatch dumps pair` pairs request by request (rebuilding rollout TP shards against FSDP). What must
still change changes with its reason: eager mode, Ulysses SP / Megatron CP off (no rows there), the
Megatron TP alignment, the dumped phase and step, a response of one token (the prefill is what is
compared). `--minimal` (and every verl before 0.9.0, whose engine micro-batch gives no rows) writes
the smoke configuration instead: one prompt, one mini-batch, no gradient accumulation, rollout TP 1,
so that every training rank's forward pairs with one single-request prefill.

The arithmetic is checked before anything is written: an impossible combination (left by the
user's own `-- overrides`, or a world size that no layout fits) is an error naming the numbers.
"""

from __future__ import annotations

from rlpatch.errors import InputError
from rlpatch.gen.modes import (
    FULLY_ASYNC_ENTRY,
    PHASES,
    V080,
    V090,
    Request,
    check_device,
    force_eager,
    msprobe_config,
    neutralise_sglang,
    other_value,
    rollout_backend,
    vllm_dump,
    with_config,
)
from rlpatch.gen.plan import ApplyStep, Facts, Plan
from rlpatch.gen.size import dump_size_notes, refuse_replica_over_one_card
from rlpatch.msprobe_config.api import ACTOR_CONFIG_ENV
from rlpatch.shell.api import ACTOR, REF, ROLLOUT
from rlpatch.upstream.api import Version

CONSISTENCY_FROM = Version.parse("0.7.0")  # the first verl the consistency set patches (rlpatch rules)
ROWS_FROM = Version.parse("0.9.0")  # nested input_ids in the engine micro-batch: the engine patch logs rows
_ONE = "one prompt, one mini-batch, one micro-batch: each rank pairs with one request"


def plan_consistency(facts: Facts, request: Request, folder: str, extra: dict[str, str]) -> Plan:
    backend = rollout_backend(facts)
    if backend != "vllm":
        raise InputError(f"consistency mode pairs the training engine patch with the vLLM-Ascend inference dump; "
                         f"this script rolls out with {backend!r}: roll out with vLLM-Ascend "
                         f"({ROLLOUT}.name=vllm), or dump one side: inference mode (the {backend} rollout) or "
                         "training mode (verl >= 0.8.0)")
    if request.verl < CONSISTENCY_FROM:
        raise InputError(f"consistency mode needs verl >= {CONSISTENCY_FROM}: rlpatch's consistency set cannot take "
                         f"effect on verl {request.verl} (no engine workers before 0.6.0; 0.6.x actors run the legacy "
                         "workers the dump does not reach), so `rlpatch apply` would patch nothing; use verl 0.7.0 to "
                         "0.9.1, or inference mode (the rollout alone, no verl patch)")
    plan = Plan()
    check_device(facts, plan)
    keep = _keeps_the_configuration(plan, request)
    megatron = facts.run.megatron
    world = facts.need_int("trainer.n_gpus_per_node") * facts.need_int("trainer.nnodes")
    if not keep and not megatron:  # a whole replica on each card
        refuse_replica_over_one_card(facts, "drop --minimal (the script's own rollout TP and batch)" if request.minimal
                                     else f"use verl >= {ROWS_FROM}, where the script keeps its rollout TP")
    dp = _megatron_layout(plan, facts, world) if megatron else _fsdp_layout(plan, facts, world, keep)
    if keep:
        requests = _keep_batch(plan, facts, request)
    else:
        _batch_chain(plan, facts, dp)
        requests = dp  # one prompt, n = DP responses
    _trainer_and_correction(plan, facts, request, keep)
    _env_and_configs(plan, facts, request, folder)
    _extras_keep_layout(plan, extra)
    if not keep:  # the script's own batch is verl's to check; gen's batch of one is checked here
        _check_arithmetic(plan, extra, dp)
    _check_rollout_tp(plan, facts, extra, world, megatron)
    _bound(plan, facts)
    plan.notes.extend(dump_size_notes(facts, request, requests, _rollout_tp(plan, facts, extra),
                                      plan.assumptions))
    plan.apply = ApplyStep("consistency", ("verl", "vllm_ascend"))
    return plan


def _keeps_the_configuration(plan: Plan, request: Request) -> bool:
    """True when the script keeps its own rollout TP and batch (verl >= 0.9.0, not --minimal)."""
    if request.minimal:
        return False
    if request.verl < ROWS_FROM:
        plan.notes.append(f"verl {request.verl}: the engine micro-batch has no nested input_ids, so the engine patch "
                          "logs no rows and only single-request micro-batches pair with single-request prefills: "
                          f"written as --minimal (rollout TP 1, batch 1); verl >= {ROWS_FROM} keeps the script's own "
                          "rollout TP and batch")
        return False
    return True


def _bound(plan: Plan, facts: Facts) -> None:
    """Only the single-request prefill is compared: no decode step, no validation, no checkpoint."""
    plan.add("data.max_response_length", "1", "one generated token: the prefill is all that is compared "
             "(every decode step would be dumped too)", replaces=other_value(facts, "data.max_response_length", "1"))
    if facts.user_value(f"{ROLLOUT}.response_length") is not None:
        plan.add(f"{ROLLOUT}.response_length", "1", "the rollout's own response length, set by the script",
                 replaces=other_value(facts, f"{ROLLOUT}.response_length", "1"))
    plan.add("trainer.test_freq", "-1", "validation at the last step would call generate (more inference dumps)",
             replaces=other_value(facts, "trainer.test_freq", "-1"))
    plan.add("trainer.save_freq", "-1", "no checkpoint of a one-step collection run",
             replaces=other_value(facts, "trainer.save_freq", "-1"))


def _fsdp_layout(plan: Plan, facts: Facts, world: int, keep: bool) -> int:
    for role in (ACTOR, REF):
        for key in (f"{role}.ulysses_sequence_parallel_size", f"{role}.fsdp_config.ulysses_sequence_parallel_size"):
            plan.add(key, "1", "Ulysses SP gives each rank a slice of the packed tokens: the engine patch logs no "
                     "rows under it (both spellings: verl copies the old key only if > 1)",
                     replaces=other_value(facts, key, "1"))
    plan.add(f"{ROLLOUT}.data_parallel_size", "1", "rollout DP > 1 runs DP groups the dispatch log does not name",
             replaces=other_value(facts, f"{ROLLOUT}.data_parallel_size", "1"))
    if keep:  # rlpatch dumps pair rebuilds the rollout's TP shards against the FSDP ranks' full tensors
        return world  # FSDP DP = world / SP, SP = 1
    # msprobe's `compare --consistent_check --backend fsdp` only concatenates the training side's
    # q/k/v and gate/up outputs into vLLM's fused qkv/gate_up (pt_compare.py, BACKEND_CAT_RULES); it
    # never joins inference TP shards. So every card is a full-model rollout replica (verl then runs
    # n_gpus replicas) and each training rank's forward pairs with one whole prefill.
    plan.add(f"{ROLLOUT}.tensor_model_parallel_size", "1",
             "msprobe --consistent_check --backend fsdp never joins inference TP shards: one full replica per card",
             replaces=other_value(facts, f"{ROLLOUT}.tensor_model_parallel_size", "1"))
    plan.assumptions.append("FSDP: rollout tensor_model_parallel_size=1, so the whole model must fit one card "
                            "for inference (gen cannot know the memory)")
    return world  # FSDP DP = world / SP, SP = 1


def _megatron_layout(plan: Plan, facts: Facts, world: int) -> int:
    tp = facts.int_or(f"{ROLLOUT}.tensor_model_parallel_size", 1)
    ep = facts.int_or(f"{ROLLOUT}.expert_parallel_size", 1)
    rollout_dp = facts.int_or(f"{ROLLOUT}.data_parallel_size", 1)
    if world % tp:
        raise InputError(f"Megatron needs the world size ({world}) divisible by TP*PP*CP = {tp}*1*1 = {tp}: give "
                         f"{ROLLOUT}.tensor_model_parallel_size=N with N dividing {world}")
    if ep > 1 and ep != tp * rollout_dp:
        raise InputError(f"rollout expert_parallel_size={ep} must equal tensor_model_parallel_size*data_parallel_size "
                         f"= {tp}*{rollout_dp} = {tp * rollout_dp}")
    sizes = {"tensor_model_parallel_size": ("tensor_model_parallel_size", tp),
             "pipeline_model_parallel_size": ("pipeline_model_parallel_size", 1),
             "expert_model_parallel_size": ("expert_parallel_size", ep)}
    for name, (rollout_name, value) in sizes.items():
        for role in (ACTOR, REF):
            key = f"{role}.megatron.{name}"
            plan.add(key, str(value), f"training {name} = rollout {rollout_name}",
                     replaces=other_value(facts, key, str(value)))
    for role in (ACTOR, REF):
        key = f"{role}.megatron.context_parallel_size"
        plan.add(key, "1", "context parallelism gives each rank zigzag chunks of every request: the engine patch "
                 "logs no rows, and the rollout has no CP", replaces=other_value(facts, key, "1"))
        key = f"{role}.megatron.virtual_pipeline_model_parallel_size"
        if other_value(facts, key, "null") is not None:
            plan.add(key, "null", "a virtual pipeline needs PP > 1 (PP is 1 here)", replaces=other_value(facts, key, "null"))
        key = f"{role}.megatron.expert_tensor_parallel_size"
        etp = "1" if ep > 1 else str(tp)
        if other_value(facts, key, etp) is not None:
            plan.add(key, etp, "vLLM shards experts by TP without expert parallelism, and not at all with it",
                     replaces=other_value(facts, key, etp))
    plan.add(f"{ROLLOUT}.pipeline_model_parallel_size", "1", "verl raises NotImplementedError for rollout PP > 1",
             replaces=other_value(facts, f"{ROLLOUT}.pipeline_model_parallel_size", "1"))
    return world // tp


_PARALLEL = ("_parallel_size", "ulysses_sequence_parallel_size")


def _extras_keep_layout(plan: Plan, extra: dict[str, str]) -> None:
    """An override given after `--` comes last and wins: one that undoes a parallel size gen aligned
    is refused, naming the override that makes the run valid (what gen checks is what runs)."""
    for override in plan.overrides:
        given = extra.get(override.key)
        if override.key.endswith(_PARALLEL) and given is not None and given.strip("'\"") != override.value:
            raise InputError(f"{override.key}={given} given after -- undoes gen's alignment ({override.why}): "
                             f"drop it or give {override.key}={override.value}")


def _keep_batch(plan: Plan, facts: Facts, request: Request) -> int | None:
    """The script's own batch chain stays; returns how many requests one step sends (None: unknown).

    Every request of the step is dumped on both sides; only the phase matters here: the log-prob pass
    runs on the rollout's weights before any update, an update_actor dump from the second mini-batch
    on runs on weights the rollout never had (RL204)."""
    if (request.stages or ["log_prob"])[0] != "log_prob":
        batch = facts.value("data.train_batch_size")
        if batch is not None:
            plan.add(f"{ACTOR}.ppo_mini_batch_size", batch, "the update is dumped: one mini-batch, so that it runs "
                     "on the weights the rollout generated with", replaces=other_value(facts, f"{ACTOR}.ppo_mini_batch_size", batch))
    plan.add("actor_rollout_ref.model.use_remove_padding", "True", "the training forward runs packed, as the rollout "
             "does (a padded forward runs other attention kernels)",
             replaces=other_value(facts, "actor_rollout_ref.model.use_remove_padding", "True"))
    batch, n = facts.value("data.train_batch_size"), facts.value(f"{ROLLOUT}.n")
    tp = facts.value(f"{ROLLOUT}.tensor_model_parallel_size")
    plan.notes.append(f"kept the script's rollout TP ({tp or '?'}), batch (data.train_batch_size {batch or '?'} x "
                      f"rollout.n {n or '?'}), micro-batches and dynamic batching: the engine patch and the dispatch "
                      "logger log each request's rows and `rlpatch dumps pair` pairs request by request; gen "
                      "--minimal writes the smoke configuration (rollout TP 1, one request per prefill, batch 1)")
    try:
        return int(batch or "") * int(n or "")
    except ValueError:
        return None


def _batch_chain(plan: Plan, facts: Facts, dp: int) -> None:
    for key in ("data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size", f"{ACTOR}.ppo_micro_batch_size_per_gpu",
                f"{REF}.log_prob_micro_batch_size_per_gpu", f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu"):
        plan.add(key, "1", _ONE, replaces=other_value(facts, key, "1"))
    plan.add(f"{ROLLOUT}.n", str(dp), f"one response per training DP rank (DP = {dp})",
             replaces=other_value(facts, f"{ROLLOUT}.n", str(dp)))
    plan.add(f"{ROLLOUT}.agent.num_workers", "1", "one agent-loop worker sends the one prompt",
             replaces=other_value(facts, f"{ROLLOUT}.agent.num_workers", "1"))
    for key in (f"{ACTOR}.ppo_micro_batch_size", f"{REF}.log_prob_micro_batch_size",
                f"{ROLLOUT}.log_prob_micro_batch_size"):
        plan.add(key, "null", "the deprecated twin must be null (verl: \"You have set both ...\")",
                 replaces=other_value(facts, key, "null"))
    for key in (f"{ACTOR}.use_dynamic_bsz", f"{REF}.log_prob_use_dynamic_bsz", f"{ROLLOUT}.log_prob_use_dynamic_bsz"):
        plan.add(key, "False", "dynamic batch size regroups the samples", replaces=other_value(facts, key, "False"))
    plan.add("actor_rollout_ref.model.use_remove_padding", "True", "no padding in the training forward",
             replaces=other_value(facts, "actor_rollout_ref.model.use_remove_padding", "True"))
    plan.add(f"{ROLLOUT}.max_num_seqs", "1", "one request per prefill step (vLLM would batch the n requests)")
    plan.add(f"{ROLLOUT}.enable_prefix_caching", "False", "a cached prefix skips part of the prefill")


def _trainer_and_correction(plan: Plan, facts: Facts, request: Request, keep: bool) -> None:
    if not keep:  # single-request pairing goes rank by rank; the rows pairing follows the request ids
        plan.add("trainer.balance_batch", "False", "balancing reorders samples across ranks",
                 replaces=other_value(facts, "trainer.balance_batch", "False"))
    for key, value, why in (
        ("trainer.val_before_train", "False", "validation calls generate and shifts the dumped steps"),
        ("trainer.total_training_steps", "1", "one step is enough to compare"),
        ("algorithm.rollout_correction.rollout_is", "null", "rollout correction off"),
        ("algorithm.rollout_correction.rollout_rs", "null", "rollout correction off"),
        ("algorithm.rollout_correction.rollout_rs_threshold", "null", "rollout correction off"),
        ("algorithm.rollout_correction.rollout_is_batch_normalize", "False", "rollout correction off"),
    ):
        plan.add(key, value, why, replaces=other_value(facts, key, value))
    version = request.verl
    if version >= V090:
        plan.add("skip.rollout.enable", "False", "a replayed rollout has no inference forward to dump",
                 replaces=other_value(facts, "skip.rollout.enable", "False"))
        # No trainer switch: the consistency set covers the v1 trainer (the default from 0.9.0,
        # verl-prompts-only-v1, verl-request-id-v1) and the legacy one alike, so the script keeps the
        # trainer it selects; RL607 checks that the applied set covers it.
    elif version >= V080:
        plan.add(f"{ROLLOUT}.skip.enable", "False", "a replayed rollout has no inference forward to dump",
                 replaces=other_value(facts, f"{ROLLOUT}.skip.enable", "False"))
    else:
        plan.add("trainer.use_legacy_worker_impl", "disable", "verl 0.7.x runs the patched engine workers only "
                 "with the legacy worker switched off", replaces=other_value(facts, "trainer.use_legacy_worker_impl",
                                                                         "disable"))
    if facts.run.launch.entry == FULLY_ASYNC_ENTRY:
        plan.add("actor_rollout_ref.hybrid_engine", "False", "the fully-async trainer separates rollout and training")
        plan.add("algorithm.rollout_correction.bypass_mode", "False", "bypass mode skips the log-prob recompute",
                 replaces=other_value(facts, "algorithm.rollout_correction.bypass_mode", "False"))


def _env_and_configs(plan: Plan, facts: Facts, request: Request, folder: str) -> None:
    phase = "log_prob"
    if request.stages is not None:
        if len(request.stages) != 1 or request.stages[0] not in PHASES:
            raise InputError(f"--stages in consistency mode is one DUMP_PHASE: {', '.join(PHASES)}")
        phase = request.stages[0]
    steps = request.steps if request.steps is not None else []
    train_dump = f"{request.dump_root}/train"
    train_path, train_shell = with_config(plan, msprobe_config(request, "train", steps, train_dump), folder)
    plan.export("DUMP_ON", "1", "switches the engine patch's dump on")
    plan.export("PROMPTS_ONLY", "1", "training recomputes log-probs on the prompts only (pairs with the prefill)")
    plan.export("DUMP_PHASE", phase, "which training phase the engine patch dumps")
    plan.export(ACTOR_CONFIG_ENV, train_path, "the training side's msprobe config", shell_value=train_shell)
    force_eager(plan, facts)
    vllm_dump(plan, facts, request, folder, steps, "infer", dispatch_logger=True)
    neutralise_sglang(plan, facts)
    plan.dump_dirs = {"train": train_dump, **plan.dump_dirs}
    plan.dumps.insert(0, f"training: {train_dump}/step{{N}}/rank{{R}}/ and {train_dump}/{{pid}}/update_actor_log.jsonl "
                         "(rlpatch engine patch; one step per dumped micro-batch)")
    task, level = request.task or "tensor", request.level or "L0"
    if (task, level) != ("tensor", "L0"):
        plan.notes.append(f"written: task {task}, level {level}; msprobe compare --consistent_check (26.2.0) fails on "
                          "level mix (\"Conflicting comparison data\") and compares L0; task tensor compares values")


def _rollout_tp(plan: Plan, facts: Facts, extra: dict[str, str]) -> int | None:
    """The rollout TP the run will have (the user's `-- overrides` win), None when unknown."""
    key = f"{ROLLOUT}.tensor_model_parallel_size"
    values = {o.key: o.value for o in plan.overrides} | extra
    text = values.get(key, facts.value(key))
    if text is None:
        return None
    try:
        return int(text.strip("'\""))
    except ValueError:
        raise InputError(f"{key}={text!r} is not a number") from None


def _check_rollout_tp(plan: Plan, facts: Facts, extra: dict[str, str], world: int, megatron: bool) -> None:
    """FSDP: the rollout TP the run will have (gen's, the script's, or an override after `--`) must
    divide the world (Megatron's layout checked it against training TP already)."""
    tp = _rollout_tp(plan, facts, extra)
    if not megatron and tp is not None and (tp <= 0 or world % tp):
        raise InputError(f"the world size ({world}) is not divisible by rollout tensor_model_parallel_size={tp}")


def _check_arithmetic(plan: Plan, extra: dict[str, str], dp: int) -> None:
    """The batch arithmetic verl checks late, on the values the run will really have (the user's
    own `-- overrides` come last and win)."""
    values = {o.key: o.value for o in plan.overrides}
    values.update(extra)

    def number(key: str) -> int:
        try:
            return int(values[key])
        except (KeyError, ValueError):
            raise InputError(f"{key}={values.get(key)!r} is not a number") from None

    batch, mini = number("data.train_batch_size"), number(f"{ACTOR}.ppo_mini_batch_size")
    micro, n = number(f"{ACTOR}.ppo_micro_batch_size_per_gpu"), number(f"{ROLLOUT}.n")
    workers = number(f"{ROLLOUT}.agent.num_workers")
    if batch < mini:
        raise InputError(f"data.train_batch_size={batch} < actor.ppo_mini_batch_size={mini}: no mini-batch fits")
    if (batch * n) % (micro * dp):
        raise InputError(f"train_batch_size*rollout.n = {batch}*{n} = {batch * n} is not divisible by the minimal "
                         f"batch micro*DP = {micro}*{dp} = {micro * dp}")
    if batch // mini != 1 or (mini * n) // (micro * dp) != 1:
        raise InputError(f"one mini-batch and no gradient accumulation need train_batch_size/ppo_mini_batch_size = "
                         f"{batch}/{mini} = 1 and mini*n/micro/DP = {mini}*{n}/{micro}/{dp} = 1")
    if batch % workers:
        raise InputError(f"data.train_batch_size={batch} is not divisible by rollout.agent.num_workers={workers}")
