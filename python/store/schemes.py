"""Which URL schemes, roots and storage options a :class:`~pyspark_tstream.store.storage.Store` takes.

Checked when a store is built, before any store call (:func:`check_store`): fsspec passes a misspelt option on (s3fs
hands it to its session, which fails with a ``TypeError`` at the first call) or drops it
silently, and knows an unknown scheme only when the first call fails. Option values are never
echoed (they may be credentials).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, InvalidPathError
from .backends import BACKENDS, SCHEME_OF, backend_class

#: The schemes a stream lives on: those with a backend, whose ``put_if_absent`` is atomic (see
#: ``backends/base.py``'s invariants).
SCHEMES = tuple(BACKENDS)
PROTOCOL_ALIASES = {alias: scheme for alias, scheme in SCHEME_OF.items() if alias != scheme}
#: :data:`SCHEMES` and their aliases, as messages say it.
SCHEMES_TEXT = " and ".join((", ".join(b.url_text for b in list(BACKENDS.values())[:-1]),
                             list(BACKENDS.values())[-1].url_text))
#: Keywords every fsspec filesystem takes (its instance and listings caches).
_FSSPEC_KEYS = ("skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths")


def check_store(protocol: str, root: str, options: Mapping[str, Any]) -> None:
    """Refuse a scheme tstream does not store on (one without a backend, whose create-if-absent
    is not known to be atomic: refused rather than raced), a storage option its filesystem does
    not take, and a local root that is a file."""
    if backend_class(protocol) is None:
        raise InvalidPathError(f"{protocol}:// is not a storage scheme tstream knows; it stores streams on "
                               f"{SCHEMES_TEXT}")
    check_storage_options(protocol, options)
    if protocol == "file" and os.path.isfile(root):
        raise InvalidPathError(f"file://{root} is a file, not a stream folder; name the folder a stream lives "
                               "in, or a path that does not exist yet to create one there")


def check_storage_options(protocol: str, options: Mapping[str, Any]) -> None:
    """Refuse an unknown scheme, or a storage option its filesystem does not take."""
    if not options and protocol in SCHEMES:
        return  # nothing to check, and no fsspec import: every Spark task unpickles a store
    valid = _option_keys(protocol)
    if valid is None or not options:
        return
    for key in options:
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"storage option {key!r} is not one {protocol}:// takes{hint}; its options are "
                f"{', '.join(sorted(valid))} (storage.<key> in Spark, --storage-option KEY=VALUE in the CLI)",
                option=f"storage.{key}")
    defaults = _option_defaults(protocol)
    for key, value in options.items():
        _check_type(protocol, key, value, defaults.get(key))


#: Storage options whose values have one type whatever the filesystem's signature says.
_TEXT_KEYS = ("endpoint_url",)
#: Storage options with a boolean default that take other values too (gcsfs: a project id).
_NOT_ONLY_BOOL = ("requester_pays",)


def _check_type(protocol: str, key: str, value: Any, default: Any) -> None:
    """Refuse a value of a type the option never takes (fsspec would fail later with a bare
    ``TypeError`` or ``AttributeError``, or take ``"banana"`` for true). Values of dict-valued
    options are never echoed: they may hold credentials."""
    where = f"(storage.{key} in Spark, --storage-option {key}=... in the CLI)"
    if isinstance(default, bool) and not isinstance(value, bool) and key not in _NOT_ONLY_BOOL:
        raise ConfigError(f"storage option {key}={value!r} is not true or false; {protocol}:// takes a boolean "
                          f"there {where}", option=f"storage.{key}", value=value)
    if key.endswith("_kwargs") and not isinstance(value, Mapping):
        raise ConfigError(f"storage option {key} is a {type(value).__name__}, not a JSON object; give it as "
                          f'{{"name": "value", ...}} {where}', option=f"storage.{key}")
    if key in _TEXT_KEYS and not isinstance(value, str):
        raise ConfigError(f"storage option {key}={value!r} is not text; give the URL, like "
                          f"http://127.0.0.1:9000 {where}", option=f"storage.{key}", value=value)


@functools.cache
def _option_defaults(protocol: str) -> dict[str, Any]:
    """The keyword arguments of ``protocol``'s filesystem that have a default, and the default."""
    backend = backend_class(protocol)
    try:
        cls = backend.fs_class() if backend is not None else None
    except ImportError:
        return {}
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__ if cls is not None else ()):
        init = vars(klass).get("__init__")
        if init is not None:
            out.update((n, p.default) for n, p in inspect.signature(init).parameters.items()
                       if p.default is not inspect.Parameter.empty)
    return out


@functools.cache
def _option_keys(protocol: str) -> frozenset[str] | None:
    """The keyword arguments ``protocol``'s filesystem takes (None: its library is missing)."""
    import fsspec

    backend = backend_class(protocol)
    try:
        cls = backend.fs_class() if backend is not None else fsspec.get_filesystem_class(protocol)
    except ValueError as e:
        raise InvalidPathError(f"{protocol}:// is not a storage scheme tstream knows; it stores streams on "
                               f"{SCHEMES_TEXT}") from e
    except ImportError:
        return None  # a known scheme whose library is missing: Store.fs says which to install
    valid = {*_FSSPEC_KEYS, *(backend.passed_on_keys if backend is not None else ())}
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None:
            valid.update(n for n, p in inspect.signature(init).parameters.items() if n != "self" and p.kind in (
                inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY))
    return frozenset(valid)
