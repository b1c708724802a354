"""What the book's notebooks use to write one class over several cells (not part of the model).

A notebook cell may hold some methods of a class defined in an earlier cell, decorated first
with ``@add_to_class(TheClass)``: the decorator attaches them while the notebook runs, and
``tools/export_package.py`` writes them into the class's body in the exported module, where no
trace of this helper is left.
"""
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable | property)


def add_to_class(cls: type) -> Callable[[F], F]:
    """Attach the decorated function to `cls` under its own name (a property under its
    getter's, since a property has no name of its own), and return it unchanged."""
    def attach(fn: F) -> F:
        name = fn.fget.__name__ if isinstance(fn, property) else fn.__name__
        setattr(cls, name, fn)
        return fn
    return attach
