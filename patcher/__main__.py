"""`python -m rlpatch`: the same command line as the `rlpatch` script (for environments where the
console script is not on PATH, and to pick the interpreter explicitly)."""

from rlpatch.cli import main

if __name__ == "__main__":
    main()
