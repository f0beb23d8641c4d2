"""The try/finally wrap edit: insert, locate and strip, with byte-exact strip."""

from __future__ import annotations

import libcst as cst
import pytest

from rlpatch.patch import edits
from rlpatch.patch.rule import Insertion, body_of, find_class, find_method, parse_statements

# Shapes whose bytes a careless re-indent would change: comments at column 0 and at block level,
# parenthesised and backslash continuations, multi-line strings, nested blocks, tabs, CRLF.
SOURCES = {
    "plain": "class R:\n    def f(self, x):\n        if x:\n            return 1\n        return 2\n",
    "docstring-and-comments": (
        "class R:\n"
        "    def f(self, x):\n"
        '        """Doc."""\n'
        "\n"
        "        # leads the first statement\n"
        "        if x:  # trailing\n"
        "            return 1\n"
        "# column-0 comment\n"
        "        y = (1 +\n"
        "             2)\n"
        '        s = """multi\n'
        'line"""\n'
        "        z = 1 + \\\n"
        "    2\n"
        "        return y  # end\n"
        "    # footer comment\n"
        "\n"
        "    def g(self):\n"
        "        pass\n"
    ),
    "nested": (
        "class R:\n"
        "    def f(self, x):\n"
        "        def inner():\n"
        "            return [\n"
        "                1,\n"
        "            ]\n"
        "        with open(x) as h:\n"
        "            for line in h:\n"
        "                if line:\n"
        "                    return line\n"
        "        raise ValueError(x)\n"
    ),
    "tabs": "class R:\n\tdef f(self, x):\n\t\tif x:\n\t\t\treturn 1\n\t\treturn 2\n",
    "crlf": "class R:\r\n    def f(self, x):\r\n        # c\r\n        return x\r\n",
}


def _wrap(module: cst.Module, head: str = "start()\n", keep: int | None = None) -> edits.Wrap:
    method = find_method(find_class(module, "R", "t.py"), "f", "t.py")
    body = body_of(method)
    if keep is None:
        first = body.body[0]
        keep = int(m_is_docstring(first))
    return edits.Wrap(
        body, keep, parse_statements(head) if head else (), parse_statements("stop()\nstep()\n"), "in R.f"
    )


def m_is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString)
    )


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("head", ["start()\n", "", "a = 1\nb = 2\n"])
def test_wrap_round_trip_is_byte_exact(name: str, head: str) -> None:
    source = SOURCES[name]
    original = cst.parse_module(source)
    assert edits.locate(original, _wrap(original, head)).state == "absent"
    patched_code = edits.insert(original, [_wrap(original, head)]).code
    compile(patched_code, name, "exec")
    patched = cst.parse_module(patched_code)
    site = edits.locate(patched, _wrap(patched, head))
    assert site.state == "applied"
    assert "try:" in patched_code and "finally:" in patched_code
    assert edits.strip(patched, [site]).code == source


def test_wrapped_body_runs_final_statements_on_every_exit() -> None:
    original = cst.parse_module(SOURCES["plain"])
    namespace: dict = {"calls": []}
    exec(compile(edits.insert(original, [_wrap(original)]).code, "plain", "exec"), namespace)
    for name in ("start", "stop", "step"):
        namespace[name] = lambda name=name: namespace["calls"].append(name)
    runner = namespace["R"]()
    assert runner.f(True) == 1 and runner.f(False) == 2
    assert namespace["calls"] == ["start", "stop", "step"] * 2


def test_statement_after_the_try_is_drift() -> None:
    original = cst.parse_module(SOURCES["plain"])
    patched_code = edits.insert(original, [_wrap(original)]).code
    edited = patched_code.replace("            step()\n", "            step()\n        extra()\n")
    patched = cst.parse_module(edited)
    assert edits.locate(patched, _wrap(patched)).state == "drifted"


def test_edited_finally_is_drift() -> None:
    original = cst.parse_module(SOURCES["plain"])
    edited = edits.insert(original, [_wrap(original)]).code.replace("step()", "step(1)")
    patched = cst.parse_module(edited)
    assert edits.locate(patched, _wrap(patched)).state == "drifted"


def test_user_try_finally_is_not_ours() -> None:
    source = "class R:\n    def f(self):\n        try:\n            pass\n        finally:\n            close()\n"
    module = cst.parse_module(source)
    assert edits.locate(module, _wrap(module, "", keep=0)).state == "absent"


def test_second_wrap_of_one_block_is_refused() -> None:
    module = cst.parse_module(SOURCES["plain"])
    with pytest.raises(ValueError):
        edits.insert(module, [_wrap(module), _wrap(module)])


def test_insertion_in_a_wrapped_block_is_refused() -> None:
    module = cst.parse_module(SOURCES["plain"])
    wrap = _wrap(module)
    insertion = Insertion(wrap.block, wrap.block.body[0], "before", parse_statements("x = 1\n"), "before if")
    with pytest.raises(ValueError):
        edits.insert(module, [wrap, insertion])


def test_insertions_elsewhere_in_the_module_still_work_with_a_wrap() -> None:
    source = SOURCES["plain"] + "\ny = 0\n"
    module = cst.parse_module(source)
    anchor = module.body[-1]
    insertion = Insertion(module, anchor, "after", parse_statements("z = 1\n"), "after y")
    patched = cst.parse_module(edits.insert(module, [_wrap(module), insertion]).code)
    new_insertion = Insertion(patched, patched.body[-2], "after", parse_statements("z = 1\n"), "after y")
    sites = [edits.locate(patched, _wrap(patched)), edits.locate(patched, new_insertion)]
    assert [site.state for site in sites] == ["applied", "applied"]
    assert edits.strip(patched, sites).code == source
