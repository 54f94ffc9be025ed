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

from .generate import (
    CODEC,
    DEFAULT,
    EMPTY,
    NEVER,
    NONE,
    TRANSIENT,
    DictRecord,
    ListRecord,
    Spec,
    generated,
    record,
    stored,
)
from .types import (
    ANY,
    BOOL,
    INT,
    INT_TYPES,
    LIST,
    NAT,
    STR,
    Type,
    bad,
    custom,
    dict_of,
    diffs_from,
    is_int,
    list_of,
    need,
    opt,
    rec,
    tuple_of,
)

__all__ = ["ANY", "BOOL", "CODEC", "DEFAULT", "EMPTY", "INT", "INT_TYPES", "LIST", "NAT", "NEVER", "NONE", "STR",
           "TRANSIENT", "DictRecord", "ListRecord", "Spec", "Type", "bad", "custom", "dict_of", "diffs_from",
           "generated", "is_int", "list_of", "need", "opt", "rec", "record", "stored", "tuple_of"]
