"""The per-mode, per-version tables of gen, applied to one launch.

Each `plan_*` function reads the launch's effective settings (`Facts`) and returns a `Plan`: the
overrides with the reason for each, the environment switches, the msprobe configs and the next
steps. Version facts live here and nowhere else in gen; refusals raise `InputError` (exit 2,
nothing written) with the numbers or versions that make the request impossible.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlpatch.errors import InputError
from rlpatch.gen.bounds import bound_inference_run
from rlpatch.gen.plan import ApplyStep, ConfigFile, Facts, Plan
from rlpatch.msprobe_config.api import SGLANG_CONFIG_ENV_PREFIX, TRAINING_CONFIG_KEY
from rlpatch.shell.api import ACTOR, REF, ROLLOUT
from rlpatch.upstream.api import Version

TRAIN_STAGES = ("actor_compute_log_prob", "ref_compute_log_prob", "actor_update")
PHASES = ("log_prob", "update_actor", "all")
VLLM_KWARGS = f"{ROLLOUT}.engine_kwargs.vllm"
VLLM_DUMP_PATH_KEY = f"{VLLM_KWARGS}.additional_config.dump_config_path"
VLLM_DUMP_KEY = f"{VLLM_KWARGS}.additional_config.dump_config"
SGLANG_DUMP_KEY = f"{ROLLOUT}.engine_kwargs.sglang.msprobe_dump_config"
RUNTIME_ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"
FULLY_ASYNC_ENTRY = "verl.experimental.fully_async_policy.fully_async_main"
V080, V090 = Version.parse("0.8.0"), Version.parse("0.9.0")
SGLANG_NATIVE = Version.parse("0.5.11")
VLLM_ASCEND_FIRST_DUMP, VLLM_ASCEND_DUMP_PATH = Version.parse("0.12.0rc1"), Version.parse("0.13.0rc1")


@dataclass
class Request:
    """What the user asked for, beyond the script."""

    mode: str
    dump_root: str  # absolute
    config_names: dict[str, str]  # role -> file name
    stages: list[str] | None
    steps: list[int] | None
    level: str | None
    task: str | None
    verl: Version
    sglang: Version | None
    vllm_ascend: Version | None
    force: bool = False
    minimal: bool = False  # consistency: the smoke configuration (rollout TP 1, batch 1) over the script's own


def _list(items) -> str:
    return "[" + ",".join(str(item) for item in items) + "]"


def default_level(mode: str) -> str:
    """msprobe 26.2.0: `msprobe compare --consistent_check` fails on `level: mix` dumps ("Conflicting
    comparison data") and compares L0 ones, so both sides of a consistency run dump L0."""
    return "L0" if mode == "consistency" else "mix"


def msprobe_config(request: Request, role: str, steps: list[int], dump_path: str | None) -> ConfigFile:
    task = request.task or ("tensor" if request.mode == "consistency" else "statistics")
    content: dict = {"task": task}
    if dump_path is not None:
        content["dump_path"] = dump_path
    content.update({"rank": [], "step": steps, "level": request.level or default_level(request.mode),
                    task: {"scope": [], "list": [], "data_mode": ["all"]}})
    return ConfigFile(request.config_names[role], role, content)


def with_config(plan: Plan, config: ConfigFile, folder: str) -> tuple[str, str]:
    plan.configs.append(config)
    return f"{folder}/{config.name}", '"${RLPATCH_GEN_DIR}/' + config.name + '"'


# ---- training mode: verl's own precision_debugger tool --------------------------------------------------
def plan_training(facts: Facts, request: Request, folder: str) -> Plan:
    version = request.verl
    if version < V080:
        raise InputError(f"training mode needs verl >= 0.8.0 (verl {version} has no precision_debugger tool: "
                         "the run would dump nothing)")
    megatron = facts.run.megatron
    if megatron and version < V090 and not request.force:
        raise InputError(f"training mode with Megatron needs verl >= 0.9.0 (verl {version} finds no model to dump "
                         "on Megatron; --force writes it anyway)")
    plan = Plan()
    if megatron and version < V090:
        plan.notes.append(f"warning: verl {version} finds no model to dump on Megatron (written because of --force)")
    elif megatron:
        plan.notes.append("Megatron: verl's tool dumps the first model chunk only")
    has_ref = facts.flag(f"{ACTOR}.use_kl_loss") or facts.flag("algorithm.use_kl_in_reward")
    stages = _training_stages(facts, request, has_ref, plan)
    steps = request.steps or [1]
    save_path = f"{request.dump_root}/train"
    config = msprobe_config(request, "train", [], None)
    path, shell_path = with_config(plan, config, folder)
    plan.add("global_profiler.tool", "precision_debugger", "verl's own msprobe tool dumps the training stages",
             replaces=other_value(facts, "global_profiler.tool", "precision_debugger"))
    plan.add("global_profiler.steps", _list(steps), "global steps to dump (verl counts from 1; null dumps nothing)")
    plan.add("global_profiler.save_path", save_path, "dumps land in save_path/step_N/STAGE/")
    plan.add(TRAINING_CONFIG_KEY, path,
             "the msprobe config (absolute: each Ray worker has its own working directory)", shell_value=shell_path)
    plan.add("global_profiler.global_tool_config.precision_debugger.stages", _list(stages),
             "only these stages are annotated in verl 0.8.0 to 0.9.1")
    plan.add("trainer.total_training_steps", str(max(steps)),
             "stop after the last dumped step (verl 0.8.0 to 0.9.1 end the run there; it also sets the LR "
             "schedule's length)", replaces=other_value(facts, "trainer.total_training_steps", str(max(steps))))
    plan.add(f"{ACTOR}.profiler.enable", "True", "the actor's stages are dumped only with its profiler on")
    if "ref_compute_log_prob" in stages:
        plan.add(f"{REF}.profiler.enable", "True", "ref_compute_log_prob is dumped only with the ref profiler on")
    for key in facts.user_keys(lambda k: k.endswith(".profiler.tool") and not k.startswith("global_profiler")):
        plan.add(key, "precision_debugger", "a role-level profiler tool would replace precision_debugger",
                 replaces=facts.user_value(key))
    if facts.flag("global_profiler.profile_continuous_steps"):
        plan.add("global_profiler.profile_continuous_steps", "False", "continuous profiling merges steps",
                 replaces="True")
    plan.dump_dirs["train"] = save_path
    plan.dumps.append(f"training: {save_path}/step_{{G}}/{{stage}}/step0/rank{{R}}/ (G in {_list(steps)}, "
                      f"stage in {_list(stages)})")
    return plan


def _training_stages(facts: Facts, request: Request, has_ref: bool, plan: Plan) -> list[str]:
    if request.stages is not None:
        wrong = [s for s in request.stages if s not in TRAIN_STAGES]
        if wrong:
            raise InputError(f"--stages {','.join(wrong)}: training mode dumps only {', '.join(TRAIN_STAGES)} "
                             "(critic and reward stages are never annotated in verl 0.8.0 to 0.9.1)")
        stages = list(request.stages)
        if "ref_compute_log_prob" in stages and not has_ref:
            plan.notes.append("ref_compute_log_prob dumps nothing: this run has no ref model "
                              f"({ACTOR}.use_kl_loss and algorithm.use_kl_in_reward are off)")
    else:
        stages = [s for s in TRAIN_STAGES if has_ref or s != "ref_compute_log_prob"]
        if not has_ref:
            plan.notes.append("no ref model in this run (no KL loss or KL reward): ref_compute_log_prob left out")
    if "actor_compute_log_prob" in stages and facts.flag("algorithm.rollout_correction.bypass_mode"):
        plan.notes.append("actor_compute_log_prob does not run with algorithm.rollout_correction.bypass_mode=True: "
                          "that stage dumps nothing")
    return stages


def other_value(facts: Facts, key: str, wanted: str) -> str | None:
    value = facts.user_value(key)
    return value if value is not None and value.strip("'\"") != wanted else None


# ---- inference mode -------------------------------------------------------------------------------------
def rollout_backend(facts: Facts) -> str:
    name = facts.need(f"{ROLLOUT}.name")  # NeedValue when only the environment knows it
    if name in ("???", "null", ""):
        raise InputError(f"{ROLLOUT}.name is not set in the script: gen cannot tell vLLM from SGLang")
    return name


def plan_inference(facts: Facts, request: Request, folder: str) -> Plan:
    backend = rollout_backend(facts)
    if backend not in ("vllm", "sglang"):
        raise InputError(f"inference mode dumps vLLM-Ascend or SGLang rollouts; this script uses {backend!r}")
    plan = Plan()
    force_eager(plan, facts)
    plan.add("trainer.val_before_train", "False", "validation calls generate and shifts the dumped steps",
             replaces=other_value(facts, "trainer.val_before_train", "False"))
    steps = request.steps if request.steps is not None else [0]
    bound_inference_run(plan, facts, steps)
    if backend == "vllm":
        check_device(facts, plan)
        vllm_dump(plan, facts, request, folder, steps, "infer")
        neutralise_sglang(plan, facts)
    else:
        sglang_dump(plan, facts, request, folder, steps)
        neutralise_vllm(plan, facts)
    return plan


_NPU_ENV_MARKS = ("ASCEND", "HCCL")


def check_device(facts: Facts, plan: Plan) -> None:
    """The vLLM dump keys gen writes are vLLM-Ascend's: CUDA vLLM ignores them and dumps nothing.
    A script that says `trainer.device=cuda` is refused; one that says nothing of an NPU (no
    `trainer.device=npu`, no ASCEND_*/HCCL_* variable) gets a warning."""
    device = (facts.value("trainer.device") or "").strip().strip("'\"").lower()
    if facts.is_set("trainer.device") and device in ("cuda", "gpu"):
        raise InputError(f"this script runs on CUDA (trainer.device={device}): the vLLM dump gen writes "
                         "(additional_config.dump_config_path) is read only by vLLM-Ascend, CUDA vLLM ignores it "
                         "and dumps nothing")
    marked = device == "npu" or any(mark in name for name in facts.run.env for mark in _NPU_ENV_MARKS)
    if not marked:
        plan.notes.append("warning: nothing in this script says NPU (no trainer.device=npu, no ASCEND_*/HCCL_* "
                          "variable): the vLLM dump keys gen writes are read only by vLLM-Ascend; on a CUDA "
                          "machine vLLM ignores them and the inference side dumps nothing")


def force_eager(plan: Plan, facts: Facts) -> None:
    plan.add(f"{ROLLOUT}.enforce_eager", "True", "graph mode cannot be dumped (SGLang: disable_cuda_graph)",
             replaces=other_value(facts, f"{ROLLOUT}.enforce_eager", "True"))
    plan.export("TORCHDYNAMO_DISABLE", "1", "a compiled forward is not hooked by msprobe")


def vllm_dump(plan: Plan, facts: Facts, request: Request, folder: str, steps: list[int], role: str,
              dispatch_logger: bool = False) -> None:
    version = request.vllm_ascend
    if version is not None and version < VLLM_ASCEND_FIRST_DUMP:
        raise InputError(f"vLLM-Ascend {version} has no msprobe dump (the dump key is silently ignored): "
                         "use vLLM-Ascend >= 0.12.0rc1")
    dump_path = f"{request.dump_root}/{role}"
    path, shell_path = with_config(plan, msprobe_config(request, role, steps, dump_path), folder)
    old_route = version is not None and version < VLLM_ASCEND_DUMP_PATH
    key, other = (VLLM_DUMP_KEY, VLLM_DUMP_PATH_KEY) if old_route else (VLLM_DUMP_PATH_KEY, VLLM_DUMP_KEY)
    why = "vLLM-Ascend 0.12.x reads additional_config.dump_config" if old_route else \
        "vLLM-Ascend >= 0.13 reads additional_config.dump_config_path"
    plan.add(key, path, why, free_form=True, shell_value=shell_path)
    if facts.user_value(other) is not None:
        plan.add(other, "null", "both dump keys set is an error (vLLM-Ascend >= 0.20.2rc1 raises)", free_form=True,
                 replaces=facts.user_value(other))
    for user_key in facts.user_keys(lambda k: k.startswith(f"{VLLM_KWARGS}.compilation_config.cudagraph_")):
        plan.add(user_key, "null", "CUDA/ACL graphs are not dumped", free_form=True, replaces=facts.user_value(user_key))
    if not old_route:
        plan.export("VLLM_USE_V2_MODEL_RUNNER", "0", "the V2 model runner has no msprobe dump hooks")
    plan.dump_dirs[role] = dump_path
    if dispatch_logger:  # rlpatch's patched runner moves msprobe's dump path into {dump_path}/{pid}
        plan.dumps.append(f"inference: {dump_path}/{{pid}}/step{{N}}/rank{{R}}/ next to "
                          f"{dump_path}/{{pid}}/dispatch_log.jsonl (one {{pid}} folder per vLLM-Ascend process)")
    else:
        plan.dumps.append(f"inference: {dump_path}/step{{N}}/rank{{R}}/ (vLLM-Ascend; N counts every dumped "
                          "execute_model, decode steps too)")


def sglang_dump(plan: Plan, facts: Facts, request: Request, folder: str, steps: list[int]) -> None:
    version = request.sglang
    native = version is None or version >= SGLANG_NATIVE
    if native:
        dump_path = f"{request.dump_root}/infer"
        path, shell_path = with_config(plan, msprobe_config(request, "infer", steps, dump_path), folder)
        plan.add(SGLANG_DUMP_KEY, path, "SGLang >= 0.5.11 dumps natively (needs mindstudio-probe >= 26.0)",
                 free_form=True, shell_value=shell_path)
        plan.dump_dirs["infer"] = dump_path
        plan.dumps.append(f"inference: {dump_path}/step{{N}}/rank{{R}}/ (SGLang; the server warm-up passes are "
                          "the first steps)")
        return
    if facts.user_value(SGLANG_DUMP_KEY) is not None:
        plan.add(SGLANG_DUMP_KEY, "null", f"SGLang {version} raises TypeError on this key", free_form=True,
                 replaces=facts.user_value(SGLANG_DUMP_KEY))
    disaggregated = facts.value(f"{ROLLOUT}.engine_kwargs.sglang.disaggregation_mode") not in (None, "null", "")
    roles = [("infer-prefill", "_PREFILL"), ("infer-decode", "_DECODE")] if disaggregated else [("infer", "")]
    for role, suffix in roles:
        dump_path = f"{request.dump_root}/{role}"
        path, shell_path = with_config(plan, msprobe_config(request, role, steps, dump_path), folder)
        plan.dump_dirs[role] = dump_path
        plan.export(f"{SGLANG_CONFIG_ENV_PREFIX}{suffix}", path, f"read by rlpatch's ModelRunner patch (SGLang {version})",
                    shell_value=shell_path)
        plan.dumps.append(f"inference: {dump_path}/step{{N}}/rank{{R}}/ (SGLang{suffix.lower().replace('_', ' ')})")
    if disaggregated:
        plan.export("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "0", "health probes would be dumped as requests")
    plan.apply = ApplyStep("inference", ("sglang",))


def neutralise_sglang(plan: Plan, facts: Facts) -> None:
    if facts.user_value(SGLANG_DUMP_KEY) is not None:
        plan.add(SGLANG_DUMP_KEY, "null", "never both backends' dump keys (the rollout is vLLM)", free_form=True,
                 replaces=facts.user_value(SGLANG_DUMP_KEY))


def neutralise_vllm(plan: Plan, facts: Facts) -> None:
    for key in (VLLM_DUMP_PATH_KEY, VLLM_DUMP_KEY):
        if facts.user_value(key) is not None:
            plan.add(key, "null", "never both backends' dump keys (the rollout is SGLang)", free_form=True,
                     replaces=facts.user_value(key))
