"""The linter: `rlpatch lint`, `rlpatch detect`, `rlpatch rule`.

Owns the lint engine (`engine`: files -> runs -> findings, `--jobs`), what a lint rule is
(`rule`: `LintRule`, `LintContext`, `Finding`), the shared checks rules build on (`checks`), the
reporters (`report`: concise, full, json, github, sarif), `[tool.rlpatch]` configuration
(`config`), the Hydra knowledge behind RL3xx (`hydra_schema`, its entry, over
`schema_discovery`: finding verl's config directory, `schema_grammar`: Hydra's parse of each
override, `schema_compose`: the composed config and the override replay, `schema_cache`: the
on-disk cache), an msprobe config given on its own (`config_files`: `rlpatch lint config.json`) and
the version facts behind RL6xx (`versions_family`). The rules themselves live in `rlpatch.rules` and
reach the linter through `rlpatch.registry`; the msprobe config.json knowledge behind RL5xx is the
msprobe config wing's (`rlpatch.msprobe_config.api`: typed findings, which the RL5xx rules map to
their codes). It reads scripts only through the front end (`rlpatch.shell`) and may import the
upstream facts and the msprobe config wing's api; it never
imports the patch engine (nor libcst) on its own path: RL605/RL607 ask the patch wing's api
(`rlpatch.patch.api.verify_payload`), imported inside the function only when a run needs a patch state.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output", "registry", "upstream", "shell", "patch", "msprobe_config")
