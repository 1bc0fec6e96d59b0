"""numpy, imported the first time a value needs it.

Importing numpy takes tens of milliseconds, most of a short command's start-up, and most
commands never hold a numpy value. A generated module therefore binds the name ``numpy``
to a :class:`LazyNumpy` and leaves its dtype constants unbound. The first attribute read
on it (``numpy.frombuffer``, ``numpy.asarray``) imports numpy, binds the dtype constants
and then rebinds ``numpy`` itself in the module's namespace, so every later call looks up
the real objects with no extra cost. Python evaluates a call's callee before its
arguments, so in ``numpy.frombuffer(mv, _DT3, n, pos)`` the constant is bound by the
time it is read; a constant read anywhere else goes through ``numpy.dtype(...)`` or
the module's ``__getattr__`` (:meth:`LazyNumpy.attr`). The module also holds an
``import numpy`` under ``if TYPE_CHECKING:``, never run: an import statement for the name
makes CPython compile ``numpy.f(...)`` to the module-attribute call it uses for imported
modules, a little quicker than a method call on an ordinary global.
"""

from __future__ import annotations

from typing import Any


class LazyNumpy:
    """Stands for ``numpy`` in one module's namespace until an attribute is read."""

    __slots__ = ("_namespace", "_dtypes")

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._dtypes: dict[str, Any] = {}  # constant name -> numpy dtype spec

    def dtype_later(self, name: str, spec: Any) -> None:
        """Bind ``name`` to ``numpy.dtype(spec)`` in the namespace when numpy comes in."""
        if self._namespace.get("numpy") is self:
            self._dtypes[name] = spec
        else:  # already loaded: bind now
            self._namespace[name] = self._namespace["numpy"].dtype(spec)

    def load(self) -> Any:
        """Import numpy and bind it and the dtype constants in the namespace."""
        ns = self._namespace
        if ns.get("numpy") is not self:  # loaded already (a copy of the stand-in was kept)
            return ns["numpy"]
        import numpy

        # the constants first: a thread that sees the real numpy sees them bound
        for name, spec in self._dtypes.items():
            ns[name] = numpy.dtype(spec)
        ns["numpy"] = numpy
        return numpy

    @property
    def names(self) -> dict[str, Any]:
        """The dtype constants' names (a mapping: ``in`` is all it is for)."""
        return self._dtypes

    def attr(self, name: str) -> Any:
        """The dtype constant ``name`` (one of :attr:`names`), numpy imported if need be:
        for the module's ``__getattr__``, which a read from outside reaches while the
        constant is unbound (``module.X_DTYPE``, ``from module import X_DTYPE``)."""
        self.load()
        return self._namespace[name]

    def __getattr__(self, name: str) -> Any:
        if name in LazyNumpy.__slots__:  # an instance made without __init__ (a copy)
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __repr__(self) -> str:
        return "<numpy, imported on first use>"
