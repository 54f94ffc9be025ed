"""Generating a record's stored form, decoding and shape check from its fields (python/codec).

:func:`stored` declares a field, :func:`record` generates the class's functions; see the package
docstring.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast, overload

from .types import _MISS, ANY, Type, _Custom, _Diffs, _Gen, _List, _Optional

#: Field metadata key of a stored field's :class:`Spec`.
CODEC = "tstream.codec"
#: Field metadata of a field never stored (bookkeeping of a live object).
TRANSIENT: dict[str, Any] = {CODEC: None}

_R = TypeVar("_R")

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
           missing: Any = _MISS, required: bool = False, kw_only: bool = False) -> Any:
    """A stored field of type ``t``, under ``key`` (default: the field's name).

    ``default``/``factory`` are the dataclass default; an absent key or trailing position reads
    as it, or as ``missing`` when given (the value an older build's absent field means).
    ``required``: absent is corrupt even though the field has a default. ``omit``: when the
    field is left out (:data:`NEVER`, :data:`EMPTY`, :data:`NONE`, :data:`DEFAULT`).
    ``kw_only``: a keyword-only ``__init__`` argument, so a defaulted field may be stored before
    fields without a default (stored order is declaration order).
    """
    meta = {CODEC: Spec(t, key, omit, missing, required)}
    # (unset unless asked: the class's own ``kw_only``/``KW_ONLY`` then applies)
    kw: Any = True if kw_only else dataclasses.MISSING
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta, kw_only=kw)
    return dataclasses.field(default=default, metadata=meta, kw_only=kw)


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
    _install(cls, to_json, from_json, ok, _searcher(g, ok, "\n".join(chk_lines)))


def _term(f: _Field, x: str, test: str, g: _Gen) -> str:
    """``test`` of field ``f``'s stored value (named ``x`` in it) as one expression over ``d``:
    the value read once, and absent passing unless the field is required (a field's default
    passes its own test)."""
    name = re.compile(rf"\b{x}\b")
    if len(name.findall(test)) == 1:
        if f.absent is not None:  # absent reads as the default's stored form, which passes
            default = g.ref(_encode_value(f.t, f.absent_value))
            return name.sub(lambda _: f"d.get({f.key!r}, {default})", test)
        if not _passes_none(f.t):  # absent reads as None, which fails
            return name.sub(lambda _: f"d.get({f.key!r})", test)
    if f.absent is None:
        return f"(({x} := d.get({f.key!r}, _MISS)) is not _MISS and {test})"
    return f"(({x} := d.get({f.key!r}, _MISS)) is _MISS or {test})"


def _passes_none(t: Type) -> bool:
    return isinstance(t, _Optional) or t is ANY or (isinstance(t, _Custom) and (t.test is None or t.test(None)))


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
    if _plain(cls, fields):
        # a list record is decoded once a stored slice on the read path: its fields go into the
        # instance's dict in one literal, not through the frozen class's __init__ (one guarded
        # object.__setattr__ a field, most of the decode)
        items = []
        for i, f in enumerate(fields):
            value = f"v[{i}]" if f.t.identity else f.t.dec(f"v[{i}]", g)
            items.append(f"{f.name!r}: {value if f.absent is None else f'({value} if n > {i} else {f.absent})'}")
        lines += ["    n = len(v)", f"    o = _new({cname})", f"    _set(o, '__dict__', {{{', '.join(items)}}})",
                  "    return o"]
        g.ns["_new"], g.ns["_set"] = object.__new__, object.__setattr__
    elif prefix < len(fields):
        lines += [f"    if len(v) <= {prefix}: return {cname}(*v)", "    n, v = len(v), list(v)"]
        for i, f in enumerate(fields[prefix:], prefix):
            if not f.t.identity:
                lines.append(f"    if n > {i}: v[{i}] = {f.t.dec(f'v[{i}]', g)}")
    if not _plain(cls, fields):
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
    _install(cls, to_json, from_json, ok, _searcher(g, ok, "\n".join(chk)))


def _plain(cls: type, fields: list[_Field]) -> bool:
    """Whether an instance of ``cls`` is its stored fields and nothing else (no field left to
    ``__init__`` or ``__post_init__``), so decoding may fill its dict directly."""
    every = dataclasses.fields(cls)
    return (not hasattr(cls, "__post_init__") and "__slots__" not in vars(cls) and len(every) == len(fields)
            and all(f.init and not f.kw_only for f in every))


def _searcher(g: _Gen, ok: Any, src: str) -> Any:
    """``check_json``: ``json_ok``, then, on a wrong shape only, the field-by-field search
    for the message, compiled the first time it is needed (every process that opens a stream
    generates the records; few ever read a wrong-shaped one)."""
    search: list[Any] = []

    def check_json(stored: Any, what: str) -> None:
        if ok(stored):
            return
        if not search:
            search.append(_compile(g, src, "check_json"))
        search[0](stored, what)

    check_json.__source__ = src  # type: ignore[attr-defined]
    return check_json


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
