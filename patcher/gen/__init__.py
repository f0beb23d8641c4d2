"""`rlpatch gen`: the collection script and its msprobe configs, written from the user's training script.

Owns the per-mode, per-version override tables (training, inference, consistency), the msprobe
config files it writes, the placement of the new overrides at the end of the real verl launch
command, what one run does (`api`: `generate_collection`) and its command line (`cli`). It reads the
original script only through the front end (`rlpatch.shell`: the same parse, evaluation and run
model as `lint`) and checks what it wrote with the linter's api (`rlpatch.lint.api`: options,
findings, the composed verl config), names the msprobe configs with the msprobe config wing's api,
and may import the upstream facts.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output", "lint", "upstream", "shell", "msprobe_config")
