"""The patch engine: `rlpatch apply`, `verify`, `status`, `revert`, `diff`, `rules`.

Owns what a patch rule is (`rule`: anchors, `Insertion`, `KeywordHoist`, `NewFile`,
`Gate`), the engine that turns a rule's edits into new file contents, states and reverts
(`engine`, `edits` with `Wrap`), the crash-safe all-or-nothing writes of a tree (`transaction`, over
the output wing's durable write), what is applied (`manifest`), the journal and the recovery of an
interrupted command (`journal`), the tree's lock (`lock`) and the state folder (`statefiles`), git awareness (`gitinfo`), unified diffs (`difftext`), which rules on which trees
(`selection`, with the frozen options of `options`), the commands' engine without a command line
(`commands`: apply, verify, revert, diff, returning typed results), what a rule finds and what a
command did with it, and which findings refuse (`states`), and what verify reports (`reporting`). `api` is the wing's door: the command line (`cli`) only turns flags into options,
calls it and prints; the other wings (doctor; the linter's RL605/RL607, importing it lazily so that a plain lint never
loads libcst) use it and nothing else of this wing. The rules themselves live in `rlpatch.rules` and reach the engine
through `rlpatch.registry`. It may import the upstream facts (which tree, which version) and nothing of
the linter or the front end. `--ray ADDRESS` on apply/verify/status/revert hands over to the
cluster wing (its options, and a lazy import of its driver only with `--ray`), which runs the same
command on every node through the CLI and never imports this wing.
"""

MAY_IMPORT: tuple[str, ...] = ("errors", "output", "registry", "upstream", "cluster")
