"""rlpatch: msprobe precision-debugging patches for verl RL runs, and a linter for their launch scripts."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Union

__version__ = "0.1.0.dev0"


def lazy_getattr(namespace: dict[str, Any], where: Mapping[str, Union[str, tuple[str, str]]]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) for a wing's `api`: each name of `where` loads on first use from
    the module of the api's own package that `where` gives (`module`, or `(module, its name there)`),
    and is then kept in `namespace` (the api's globals). A wing's door names its heavier parts this way
    so that a command that never uses them (a pre-commit hook's lint) never imports them."""
    package = str(namespace["__name__"]).rsplit(".", 1)[0]

    def __getattr__(name: str) -> Any:
        try:
            found = where[name]
        except KeyError:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}") from None
        module_name, attribute = (found, name) if isinstance(found, str) else found
        import importlib

        value = getattr(importlib.import_module(f"{package}.{module_name}"), attribute)
        namespace[name] = value
        return value

    return __getattr__
