"""The rehearsal: real upstream code (verl 0.9.1, patched by `rlpatch apply`) run end to end on CPU.

`rehearsal.training.run_training_side` writes the training side's msprobe dumps and
`update_actor_log.jsonl` for request ids the caller chooses (the `rehearsal` extra of setup.cfg
holds verl's runtime dependencies; verl itself is imported from a patched copy of its wheel).

What stays unexercised on CPU: the Megatron engine (verl 0.9.1 builds it with megatron-core and
CUDA; megatron-core is not in the `rehearsal` extra, so its patch is proved structurally by
tests/test_upstream_verl_engine.py), Ulysses sequence parallelism, dynamic batch sizes, the
`update_actor` phase (DUMP_PHASE=update_actor), rollout servers (rows are put by the real agent
loop's postprocess, not generated), and FSDP1's `sync_module_states` broadcast (turned off here:
see rehearsal.verl_cpu_platform).
"""
