"""The name-resolution checker used on patched files: it must catch the mistakes it exists for."""

from __future__ import annotations

from scopecheck import scope_problems

_ORIGINAL = (
    'import logging\nlogger = logging.getLogger(__file__)\n\n\ndef f(data):\n    """doc"""\n    x = 1\n    return data\n'
)
_DOC = '    """doc"""\n'


def test_catches_a_missing_import_os() -> None:
    patched = _ORIGINAL.replace(_DOC, _DOC + '    if os.environ.get("PROMPTS_ONLY"):\n        return {}\n')
    assert any("'os'" in problem and "bound nowhere" in problem for problem in scope_problems(_ORIGINAL, patched))
    fixed = patched.replace(_DOC, _DOC + "    import os\n")
    assert scope_problems(_ORIGINAL, fixed) == []


def test_catches_an_import_that_shadows_earlier_uses() -> None:
    original = _ORIGINAL.replace("    x = 1\n", "    x = os.sep\n").replace("import logging\n", "import logging\nimport os\n")
    patched = original.replace("    return data\n", "    import os\n    return data\n")
    assert any("changed scope" in problem for problem in scope_problems(original, patched))


def test_catches_a_use_before_the_local_binding() -> None:
    patched = _ORIGINAL.replace("    x = 1\n", "    y = later\n    later = 1\n    x = 1\n")
    assert any("bound only after" in problem for problem in scope_problems(_ORIGINAL, patched))


def test_comprehension_targets_and_closures_resolve() -> None:
    patched = _ORIGINAL.replace(_DOC, _DOC + "    if not all(\n        key in data\n        for key in (1, 2)\n    ):\n        return {}\n")
    assert scope_problems(_ORIGINAL, patched) == []


def test_an_except_handler_binds_its_name() -> None:
    # `except E as error` binds `error` for the handler's body (ast keeps it as a plain str, not a Name).
    handler = "    try:\n        x = 2\n    except ValueError as error:\n        x = str(error)\n"
    patched = _ORIGINAL.replace("    x = 1\n", handler)
    assert scope_problems(_ORIGINAL, patched) == []
    misused = _ORIGINAL.replace("    x = 1\n", "    x = str(error)\n" + handler)
    assert any("'error'" in problem and "bound only after" in problem for problem in scope_problems(_ORIGINAL, misused))
