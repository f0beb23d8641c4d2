"""The rehearsal: real upstream code (verl 0.9.1, patched by `rlpatch apply`) run end to end on CPU.

`rehearsal.training.run_training_side` writes the training side's msprobe dumps and
`update_actor_log.jsonl` for request ids the caller chooses.
"""
