"""msprobe's config.json: what mindstudio-probe 26.2 accepts, rejects and ignores, and where a run names it.

Owns the knowledge of msprobe's `config.json` without importing msprobe: the vocabulary it validates
against (tasks, levels, modes, the keys of each task section, the scope name patterns, the path rules:
`schema`), the value checks and the entry that reads a file, bounded (`checker`), the checks beyond one
value: cross-field rules, paths, ignored keys, what the run needs (`cross_checks`), JSON with source
positions so that a finding points inside the file (`jsonpos`), and, in its door (`api`), the kinds of
problem (`Problem`) and the overrides and env vars through which a verl run names its configs
(`references`). It answers in typed findings, a `Problem` kind each, never in lint codes: the
linter's RL5xx rules map the kinds they own to their codes, `dumps check` and `gen` use the
references. Other wings use `api` and nothing else of it. It reads runs through the front end's api
(`rlpatch.shell.api`) and imports nothing else of rlpatch but `rlpatch.errors` and the root package's
lazy door (`rlpatch.lazy_getattr`).
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "shell")
