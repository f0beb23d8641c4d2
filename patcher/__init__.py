"""rlpatch: msprobe precision-debugging patches for verl RL runs, and a linter for their launch scripts."""

__version__ = "0.1.0.dev0"
