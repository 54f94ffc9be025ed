"""The stored types a record field declares (python/codec): how one stored value is encoded,
decoded and checked, as source expressions the record's generated functions inline.

:data:`INT`, :data:`NAT`, :data:`STR`, :data:`BOOL`, :data:`ANY`, :data:`LIST` and the
containers :func:`opt`, :func:`list_of`, :func:`tuple_of`, :func:`dict_of`; :func:`rec` (another
record), :func:`custom` (a value with its own stored form) and :func:`diffs_from` (integers
stored as differences). Also the errors a wrong-shaped stored value raises (:func:`bad`, :func:`need`).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate
from typing import Any

#: An absent key (``dict.get``'s default where None is a value).
_MISS = object()
#: The element types a list of JSON integers holds (one C-level test: ``INT_TYPES.issuperset(map(type, v))``).
INT_TYPES = frozenset({int})


def bad(what: str) -> TypeError:
    """The error of a wrong-shaped stored value ``what`` (a decoder reports it as corrupt metadata)."""
    return TypeError(f"{what} has the wrong type")


def is_int(v: Any) -> bool:
    """A JSON integer (``True``/``False`` are not)."""
    # exactly int, as json.loads makes them: one type test (opening a stream checks ~300 ints)
    return type(v) is int


def need(ok: bool, what: str) -> None:
    """Raise ``TypeError`` naming ``what`` unless ``ok``."""
    if not ok:
        raise bad(what)


class _Gen:
    """Names of the objects generated source refers to, and fresh variable names."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"_MISS": _MISS, "_bad": bad}
        self.n = 0
        #: field name -> the source of its value, in the function being generated
        self.sib: dict[str, str] = {}

    def ref(self, obj: Any) -> str:
        name = f"_o{len(self.ns)}"
        self.ns[name] = obj
        return name

    def var(self) -> str:
        self.n += 1
        return f"_x{self.n}"


class Type:
    """How one stored value is encoded, decoded and checked, as source expressions over ``e``."""

    #: Whether the stored value is the Python value itself (decoding and encoding copy nothing).
    identity = False
    #: The one Python type a stored value has when its check is a type test alone (else None):
    #: a list of them is checked in one C-level pass.
    exact: type | None = None

    def dec(self, e: str, g: _Gen) -> str:
        return e

    def enc(self, e: str, g: _Gen) -> str:
        return e

    def ok(self, e: str, g: _Gen) -> str:
        return "True"


class _Scalar(Type):
    identity = True

    def __init__(self, test: str, exact: type | None = None) -> None:
        self.test, self.exact = test, exact

    def ok(self, e: str, g: _Gen) -> str:
        return self.test.format(e=e)


#: A JSON integer (``True``/``False`` are not: exactly ``int``, as ``json.loads`` makes them).
INT: Type = _Scalar("type({e}) is int", int)
#: A JSON integer >= 0.
NAT: Type = _Scalar("(type({e}) is int and {e} >= 0)")
STR: Type = _Scalar("type({e}) is str", str)
BOOL: Type = _Scalar("type({e}) is bool", bool)
#: Any JSON value, stored as it is and not checked; ``LIST`` any JSON list, so (shared, not copied).
ANY: Type = _Scalar("True")
LIST: Type = _Scalar("type({e}) is list", list)


class _Optional(Type):
    def __init__(self, t: Type) -> None:
        self.t = t
        self.identity = t.identity

    def dec(self, e: str, g: _Gen) -> str:
        return e if self.t.identity else f"(None if {e} is None else {self.t.dec(e, g)})"

    def enc(self, e: str, g: _Gen) -> str:
        return e if self.t.identity else f"(None if {e} is None else {self.t.enc(e, g)})"

    def ok(self, e: str, g: _Gen) -> str:
        return f"({e} is None or {self.t.ok(e, g)})"


def opt(t: Type) -> Type:
    """``t`` or JSON null (None)."""
    return _Optional(t)


class _List(Type):
    def __init__(self, t: Type, tuple_: bool) -> None:
        self.t, self.tuple = t, tuple_
        if t is ANY:
            self.exact = list

    def dec(self, e: str, g: _Gen) -> str:
        make = "tuple" if self.tuple else "list"
        if self.t.identity:
            return f"{make}({e})"
        x = g.var()
        inner = f"{self.t.dec(x, g)} for {x} in {e}"
        return f"tuple({inner})" if self.tuple else f"[{inner}]"

    def enc(self, e: str, g: _Gen) -> str:
        x = g.var()
        inner = self.t.enc(x, g)
        if inner == x:  # a list of values stored as they are is stored as the list it is
            return f"list({e})" if self.tuple else e
        return f"[{inner} for {x} in {e}]"

    def ok(self, e: str, g: _Gen) -> str:
        if self.t is ANY:
            return f"type({e}) is list"
        if self.t.exact is not None:  # one C-level type test of the elements
            return f"(type({e}) is list and {g.ref(frozenset({self.t.exact}))}.issuperset(map(type, {e})))"
        x = g.var()
        return f"(type({e}) is list and all({self.t.ok(x, g)} for {x} in {e}))"


def list_of(t: Type) -> Type:
    """A JSON list of ``t``, a Python ``list``."""
    return _List(t, False)


def tuple_of(t: Type) -> Type:
    """A JSON list of ``t``, a Python ``tuple``."""
    return _List(t, True)


class _Dict(Type):
    def __init__(self, int_keys: bool, t: Type) -> None:
        self.int_keys, self.t = int_keys, t

    def _each(self, e: str, g: _Gen, key: str, value: Callable[[str, _Gen], str]) -> str:
        if not self.int_keys and self.t.identity:
            return f"dict({e})"
        k, v = g.var(), g.var()
        return f"{{{key.format(k) if self.int_keys else k}: {value(v, g)} for {k}, {v} in {e}.items()}}"

    def dec(self, e: str, g: _Gen) -> str:
        return self._each(e, g, "int({})", self.t.dec)

    def enc(self, e: str, g: _Gen) -> str:
        return self._each(e, g, "str({})", self.t.enc)

    def ok(self, e: str, g: _Gen) -> str:
        if self.t.exact is not None:
            return (f"(type({e}) is dict and {g.ref(frozenset({str}))}.issuperset(map(type, {e})) and "
                    f"{g.ref(frozenset({self.t.exact}))}.issuperset(map(type, {e}.values())))")
        k, v = g.var(), g.var()
        return f"(type({e}) is dict and all(type({k}) is str and {self.t.ok(v, g)} for {k}, {v} in {e}.items()))"


def dict_of(t: Type, *, int_keys: bool = False) -> Type:
    """A JSON object of ``t`` values, a Python ``dict``; ``int_keys``: its keys are integers
    (stored as their text)."""
    return _Dict(int_keys, t)


class _Rec(Type):
    def __init__(self, cls: type) -> None:
        self.cls = cls

    def dec(self, e: str, g: _Gen) -> str:
        return f"{g.ref(self.cls)}.from_json({e})"  # looked up per call: a test may count the calls

    def enc(self, e: str, g: _Gen) -> str:
        return f"{e}.to_json()"

    def ok(self, e: str, g: _Gen) -> str:
        return f"{g.ref(self.cls.json_ok)}({e})"  # type: ignore[attr-defined]


def rec(cls: type) -> Type:
    """A record of this module (decorated by :func:`~pyspark_tstream.codec.generate.record`),
    stored as its ``to_json``."""
    if not hasattr(cls, "json_ok"):
        raise TypeError(f"{cls.__name__} is not a codec record (decorate it with codec.record)")
    return _Rec(cls)


class _Custom(Type):
    def __init__(self, enc: Callable[[Any], Any], dec: Callable[[Any], Any], ok: Callable[[Any], bool] | None) -> None:
        self.encode, self.decode, self.test = enc, dec, ok

    def dec(self, e: str, g: _Gen) -> str:
        return f"{g.ref(self.decode)}({e})"

    def enc(self, e: str, g: _Gen) -> str:
        return f"{g.ref(self.encode)}({e})"

    def ok(self, e: str, g: _Gen) -> str:
        return "True" if self.test is None else f"{g.ref(self.test)}({e})"


def custom(enc: Callable[[Any], Any], dec: Callable[[Any], Any], ok: Callable[[Any], bool] | None = None) -> Type:
    """A value with its own stored form (a record with its own codec): ``enc``/``dec`` convert
    it, ``ok`` tests a stored value's shape (None: ``dec`` checks, raising ``TypeError``)."""
    return _Custom(enc, dec, ok)


class _Diffs(Type):
    """Integers stored as differences, the first from field ``base``'s value."""

    def __init__(self, base: str) -> None:
        self.base = base

    def dec(self, e: str, g: _Gen) -> str:
        return f"{g.ref(_undiff)}({e}, {g.sib[self.base]})"

    def enc(self, e: str, g: _Gen) -> str:
        return f"{g.ref(_diff)}({e}, {g.sib[self.base]})"

    def ok(self, e: str, g: _Gen) -> str:
        return _List(INT, False).ok(e, g)


def _undiff(diffs: list[int], base: int) -> tuple[int, ...]:
    # most chunks of fresh data are small and have no marks: skip building an accumulator
    return tuple(accumulate(diffs, initial=base))[1:] if diffs else ()


def _diff(values: tuple[int, ...], base: int) -> list[int]:
    return [m - p for m, p in zip(values, (base,) + values[:-1])]


def diffs_from(base: str) -> Type:
    """A tuple of integers stored as the differences from the one before, the first from field
    ``base`` (a chunk's marks from its ``lo``)."""
    return _Diffs(base)
