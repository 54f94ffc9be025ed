"""One definition of a stored record: its dataclass fields, each with how it is stored.

One job: derive a record's stored (JSON) form, its decoding and its shape check from its
fields, so each stored key or position, type, default and omission rule is written once. A
record is a dataclass whose stored fields are declared with :func:`stored` (a type from this
module: :data:`INT`, :func:`list_of`, :func:`rec`, ...) and whose class is decorated with
:func:`record` over ``@dataclass``; it is stored as a JSON object keyed by field name (or the
field's ``key``), or, for a :class:`ListRecord`, as a JSON list in field order whose trailing
fields may be left out. The decorator writes three functions on the class from the fields:

* ``to_json(obj)``: the stored form (fresh containers: a caller may change it);
* ``from_json(stored)``: the record of a stored form that passed the check (it does not check
  again: decoding a state to copy it is on the commit path);
* ``check_json(stored, what)``: ``TypeError`` naming ``what`` and the field when the stored form
  does not have the record's shape (the decoder turns it into a ``CorruptMetadataError`` naming
  the object); ``json_ok(stored)`` is the same test as a bool, for records nested in others.

The functions are generated source (as ``dataclasses`` generates ``__init__``): the cold open
and the commit decode every record of a state, and a wide entry thousands of chunks, so each is
straight-line code with no per-field loop. A class that declares its stored shape this way must
not also write ``to_json``/``from_json`` by hand (refused here; tests/test_codec.py checks the
package).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any, ClassVar, TypeVar, cast, overload

#: Field metadata key of a stored field's :class:`Spec`.
CODEC = "tstream.codec"
#: Field metadata of a field never stored (bookkeeping of a live object).
TRANSIENT: dict[str, Any] = {CODEC: None}

_R = TypeVar("_R")
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
    """A record of this module (decorated by :func:`record`), stored as its ``to_json``."""
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
    return tuple(accumulate(diffs, initial=base))[1:]


def _diff(values: tuple[int, ...], base: int) -> list[int]:
    return [m - p for m, p in zip(values, (base,) + values[:-1])]


def diffs_from(base: str) -> Type:
    """A tuple of integers stored as the differences from the one before, the first from field
    ``base`` (a chunk's marks from its ``lo``)."""
    return _Diffs(base)


#: When a field is left out of the stored form: never, when its stored value is empty (None,
#: ``[]``, ``{}``), when it is None, or when it equals its default's stored form. A
#: :class:`ListRecord` leaves out trailing fields only.
NEVER, EMPTY, NONE, DEFAULT = "never", "empty", "none", "default"


@dataclasses.dataclass(frozen=True)
class Spec:
    """How one field is stored (see :func:`stored`)."""

    type: Type
    key: str | None
    omit: str
    missing: Any
    required: bool


def stored(t: Type, *, key: str | None = None, default: Any = dataclasses.MISSING,
           factory: Callable[[], Any] | Any = dataclasses.MISSING, omit: str = NEVER,
           missing: Any = _MISS, required: bool = False) -> Any:
    """A stored field of type ``t``, under ``key`` (default: the field's name).

    ``default``/``factory`` are the dataclass default; an absent key or trailing position reads
    as it, or as ``missing`` when given (the value an older build's absent field means).
    ``required``: absent is corrupt even though the field has a default. ``omit``: when the
    field is left out (:data:`NEVER`, :data:`EMPTY`, :data:`NONE`, :data:`DEFAULT`).
    """
    meta = {CODEC: Spec(t, key, omit, missing, required)}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    key: str
    spec: Spec
    absent: str | None  # source of the value an absent field reads as (None: absent is corrupt)
    absent_value: Any  # that value (a fresh one, when made by a factory)
    omit_test: str | None  # source testing stored value ``{v}`` for omission
    t: Type


def _fields(cls: type, g: _Gen) -> list[_Field]:
    out: list[_Field] = []
    for f in dataclasses.fields(cls):
        if CODEC not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name}: declare it with codec.stored(...) or "
                            "metadata=codec.TRANSIENT (never stored)")
        spec = f.metadata[CODEC]
        if spec is None:
            continue
        absent: str | None = None
        value: Any = None
        if spec.missing is not _MISS:
            absent, value = g.ref(spec.missing), spec.missing
        elif f.default is not dataclasses.MISSING:
            absent, value = g.ref(f.default), f.default
        elif f.default_factory is not dataclasses.MISSING:
            absent, value = f"{g.ref(f.default_factory)}()", f.default_factory()
        if spec.required:
            absent = None
        omit_test = {NEVER: None, EMPTY: "not {v}", NONE: "{v} is None"}.get(spec.omit)
        if spec.omit == DEFAULT:
            omit_test = "{v} == " + g.ref(_encode_value(spec.type, _default(f.name, cls)))
        out.append(_Field(f.name, spec.key or f.name, spec, absent, value, omit_test, spec.type))
    return out


def _default(name: str, cls: type) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    return cast(Callable[[], Any], f.default_factory)()


def _encode_value(t: Type, value: Any) -> Any:
    if isinstance(t, _List):
        return [_encode_value(t.t, x) for x in value]
    if isinstance(t, _Diffs):
        return list(value)  # an empty default: its differences are itself
    if value is None or t.identity:
        return value
    g = _Gen()
    return eval(t.enc("_v", g), {**g.ns, "_v": value})


def _compile(g: _Gen, src: str, name: str) -> Any:
    exec(src, g.ns)  # noqa: S102 - source this module generated from field declarations
    fn = g.ns[name]
    fn.__source__ = src  # what it runs, for a reader (print(Chunk.from_json.__source__))
    return fn


def _keyed(cls: type, fields: list[_Field], g: _Gen, init: list[str]) -> None:
    cname = g.ref(cls)
    g.sib = {f.name: f"o.{f.name}" for f in fields}
    lead = next((i for i, f in enumerate(fields) if f.omit_test is not None), len(fields))
    literal = ", ".join(f"{f.key!r}: {f.t.enc(f'o.{f.name}', g)}" for f in fields[:lead])
    lines = ["def to_json(o):", f"    d = {{{literal}}}"]
    for f in fields[lead:]:
        value = f.t.enc(f"o.{f.name}", g)
        if f.omit_test is None:
            lines.append(f"    d[{f.key!r}] = {value}")
        else:
            keep = {EMPTY: "v", NONE: "v is not None"}.get(f.spec.omit) or f"not ({f.omit_test.format(v='v')})"
            lines += [f"    v = {value}", f"    if {keep}:", f"        d[{f.key!r}] = v"]
    lines.append("    return d")
    to_json = _compile(g, "\n".join(lines), "to_json")

    args, positional = [], True
    for i, f in enumerate(fields):
        if f.absent is None:
            value = f.t.dec(f"d[{f.key!r}]", g)
        elif f.t.identity:
            value = f"d.get({f.key!r}, {f.absent})"
        else:
            x = g.var()
            value = f"({f.t.dec(x, g)} if ({x} := d.get({f.key!r}, _MISS)) is not _MISS else {f.absent})"
        positional = positional and i < len(init) and init[i] == f.name
        args.append(value if positional else f"{f.name}={value}")
    from_json = _compile(g, f"def from_json(d):\n    return {cname}({', '.join(args)})", "from_json")

    terms: list[str] = []
    chk_lines = ["def check_json(d, what):", "    if json_ok(d): return",
                 "    if type(d) is not dict: raise _bad(what)"]
    for f in fields:
        x = g.var()
        test = f.t.ok(x, g)
        if test == "True" and f.absent is not None:
            continue
        get = f"    {x} = d.get({f.key!r}, _MISS)"
        cond = f"{x} is _MISS or not {test}" if f.absent is None else f"{x} is not _MISS and not {test}"
        chk_lines += [get, f"    if {cond}: raise _bad(what + {'.' + f.key!r})"]
        terms.append(_term(f, x, test, g))
    ok = _compile(g, f"def json_ok(d):\n    return type(d) is dict and {' and '.join(terms) or 'True'}", "json_ok")
    g.ns["json_ok"] = ok
    _install(cls, to_json, from_json, ok, _compile(g, "\n".join(chk_lines), "check_json"))


def _term(f: _Field, x: str, test: str, g: _Gen) -> str:
    """``test`` of field ``f``'s stored value (named ``x`` in it) as one expression over ``d``:
    the value read once, and absent passing unless the field is required."""
    probe = _compile(g, f"def _probe({x}):\n    return {test}", "_probe")
    absent = None if f.absent is None else _encode_value(f.t, f.absent_value)
    name = re.compile(rf"\b{x}\b")
    once = len(name.findall(test)) == 1
    if once and f.absent is None and not probe(None):  # absent reads as None, which fails
        return name.sub(lambda _: f"d.get({f.key!r})", test)
    if once and f.absent is not None and probe(absent):  # absent reads as a value that passes
        return name.sub(lambda _: f"d.get({f.key!r}, {g.ref(absent)})", test)
    if f.absent is None:
        return f"(({x} := d.get({f.key!r}, _MISS)) is not _MISS and {test})"
    return f"(({x} := d.get({f.key!r}, _MISS)) is _MISS or {test})"


def _positional(cls: type, fields: list[_Field], g: _Gen, init: list[str],
                invariants: dict[str, str]) -> None:
    cname = g.ref(cls)
    if [f.name for f in fields] != init[:len(fields)]:
        raise TypeError(f"{cls.__name__}: a list record's stored fields come first, in __init__ order")
    need_n = sum(1 for f in fields if f.absent is None)
    if any(f.absent is None for f in fields[need_n:]):
        raise TypeError(f"{cls.__name__}: a list record's required fields come first")
    for f in fields[:need_n]:
        if f.omit_test is not None:
            raise TypeError(f"{cls.__name__}.{f.name}: only trailing fields may be left out")
    # to_json: every value, then the trailing ones left out while their omission holds
    g.sib = {f.name: f"o.{f.name}" for f in fields}
    values = ", ".join(f.t.enc(f"o.{f.name}", g) for f in fields)
    lines = ["def to_json(o):", f"    r = [{values}]"]
    tail = [f for f in fields if f.omit_test is not None]
    if tail:
        if fields[-len(tail):] != tail:
            raise TypeError(f"{cls.__name__}: only trailing fields may be left out")
        keep = len(fields) - len(tail)
        if all(f.spec.omit == DEFAULT for f in tail):  # compare with the stored defaults
            omitted = g.ref(tuple(_encode_value(f.t, _default(f.name, cls)) for f in tail))
            lines += [f"    while len(r) > {keep} and r[-1] == {omitted}[len(r) - {keep + 1}]:", "        r.pop()"]
        else:
            omits = g.ref(tuple(_compile(g, f"def _t(v):\n    return {cast(str, f.omit_test).format(v='v')}", "_t")
                                for f in tail))
            lines += [f"    while len(r) > {keep} and {omits}[len(r) - {keep + 1}](r[-1]):", "        r.pop()"]
    lines.append("    return r")
    to_json = _compile(g, "\n".join(lines), "to_json")
    # from_json: the stored list is the arguments, those stored otherwise decoded in place (a
    # field they are relative to is read as stored: it must be a plain value)
    g.sib = {f.name: f"v[{i}]" for i, f in enumerate(fields)}
    prefix = next((i for i, f in enumerate(fields) if not f.t.identity), len(fields))
    lines = ["def from_json(v):"]
    if prefix < len(fields):
        lines += [f"    if len(v) <= {prefix}: return {cname}(*v)", "    n, v = len(v), list(v)"]
        for i, f in enumerate(fields[prefix:], prefix):
            if not f.t.identity:
                lines.append(f"    if n > {i}: v[{i}] = {f.t.dec(f'v[{i}]', g)}")
    lines.append(f"    return {cname}(*v)")
    from_json = _compile(g, "\n".join(lines), "from_json")
    # the shape: one expression (the common case), then a field-by-field search for the message
    sib = {f.name: (f"v[{i}]" if i < need_n else f"(v[{i}] if n > {i} else {f.absent})") for i, f in enumerate(fields)}
    tests = [f"{need_n} <= (n := len(v)) <= {len(fields)}"]
    named: list[tuple[str, str]] = []
    for i, f in enumerate(fields):
        test = f.t.ok(f"v[{i}]", g)
        if test == "True":
            continue
        test = test if i < need_n else f"(n <= {i} or {test})"
        tests.append(test)
        named.append((f.name, test))
    for name, inv in invariants.items():
        test = f"({inv.format(**sib)})"
        tests.append(test)
        named.append((name, test))
    ok = _compile(g, f"def json_ok(v):\n    return type(v) is list and {' and '.join(tests)}", "json_ok")
    chk = ["def check_json(v, what):", "    if type(v) is list and json_ok(v): return",
           f"    if type(v) is not list or not ({tests[0]}): raise _bad(what)"]
    chk += [f"    if not {test}: raise _bad(what + \"'s {name}\")" for name, test in named]
    g.ns["json_ok"] = ok
    _install(cls, to_json, from_json, ok, _compile(g, "\n".join(chk), "check_json"))


def _install(cls: type, to_json: Any, from_json: Any, json_ok: Any, check_json: Any) -> None:
    for fn in (to_json, from_json, json_ok, check_json):
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
        fn.__codec__ = True
    cls.to_json = to_json  # type: ignore[attr-defined]
    cls.from_json = staticmethod(from_json)  # type: ignore[attr-defined]
    cls.json_ok = staticmethod(json_ok)  # type: ignore[attr-defined]
    cls.check_json = staticmethod(check_json)  # type: ignore[attr-defined]


def generated(fn: Any) -> bool:
    """Whether ``fn`` is a function this module generated from field declarations."""
    return getattr(fn, "__codec__", False) is True


_C = TypeVar("_C", bound=type)


@overload
def record(cls: _C, *, invariants: dict[str, str] | None = None) -> _C: ...


@overload
def record(cls: None = None, *, invariants: dict[str, str] | None = None) -> Callable[[_C], _C]: ...


def record(cls: _C | None = None, *, invariants: dict[str, str] | None = None) -> Any:
    """Class decorator (over ``@dataclass``): generate the class's ``to_json``, ``from_json``,
    ``json_ok`` and ``check_json`` from its :func:`stored` fields (see the module docstring).
    A :class:`ListRecord` is stored as a list in field order; ``invariants`` (message name ->
    expression over its field names in braces) are checked on its stored values too."""
    def wrap(c: _C) -> _C:
        for name in ("to_json", "from_json"):
            if name in vars(c):
                raise TypeError(f"{c.__name__} declares its stored fields with codec.stored: it must not also "
                                f"define {name} by hand")
        g = _Gen()
        init = [f.name for f in dataclasses.fields(c) if f.init and not f.kw_only]
        fields = _fields(c, g)
        if issubclass(c, ListRecord):
            _positional(c, fields, g, init, invariants or {})
        else:
            if invariants:
                raise TypeError("invariants are checked on list records only")
            _keyed(c, fields, g, init)
        c.STORED = tuple(f.key for f in fields)  # type: ignore[attr-defined]
        return c
    return wrap if cls is None else wrap(cls)


class _Record:
    """What :func:`record` generates on a class, typed (each stub is replaced)."""

    #: The stored keys (a :class:`ListRecord`'s field names), in stored order.
    STORED: ClassVar[tuple[str, ...]] = ()

    @staticmethod
    def json_ok(stored: Any) -> bool:
        """Whether ``stored`` has the record's stored shape."""
        raise NotImplementedError

    @staticmethod
    def check_json(stored: Any, what: str) -> None:
        """``TypeError`` naming ``what`` (and the field) unless ``stored`` has the stored shape."""
        raise NotImplementedError

    @classmethod
    def checked(cls: type[_R], stored: Any, what: str) -> _R:
        """The record of ``stored`` after :meth:`check_json` (``TypeError`` naming ``what``)."""
        cls.check_json(stored, what)  # type: ignore[attr-defined]
        return cls.from_json(stored)  # type: ignore[attr-defined,no-any-return]


class DictRecord(_Record):
    """A record stored as a JSON object."""

    def to_json(self) -> dict[str, Any]:
        """The stored object."""
        raise NotImplementedError

    @classmethod
    def from_json(cls: type[_R], d: dict[str, Any]) -> _R:
        """The record of a stored object that passed :meth:`check_json`."""
        raise NotImplementedError


class ListRecord(_Record):
    """A record stored as a JSON list in field order (trailing fields may be left out)."""

    def to_json(self) -> list[Any]:
        """The stored list."""
        raise NotImplementedError

    @classmethod
    def from_json(cls: type[_R], v: list[Any]) -> _R:
        """The record of a stored list that passed :meth:`check_json`."""
        raise NotImplementedError
