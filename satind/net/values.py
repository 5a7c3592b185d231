"""Application values: job arguments and results, in CBOR, never pickled.

Plain CBOR plus a tag that keeps tuples tuples (a stolen job must see the same argument types
as a local one) and tags that plugins register for their own types (``register_type``). A
value that must travel is encoded by the compute side, and refused there when it is too large
for one frame (``max_frame``), where the error can say why; the network side passes values on
as ``Encoded`` bytes.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

import cbor2

from satind.net.errors import DecodeError, EncodeError

TUPLE_TAG = 39001
# Plugins' own types: tag -> code version -> (class, to_plain, from_plain). Tags below 40000
# are satind's. A class's code version is the package of the shipped version that defines it
# (satind_shipped_<hash>, plugin/shipped.py), "" for installed code: each shipped version of a
# plugin registers its own class under the tag, and a value of a run decodes to its version's.
_Entry = tuple[type, Callable[[Any], Any], Callable[[Any], Any]]
_APP_TAGS: dict[int, dict[str, _Entry]] = {}
_APP_TYPES: dict[type, tuple[int, Callable[[Any], Any]]] = {}
SHIPPED_PREFIX = "satind_shipped_"
# The code version whose registrations a decode uses first (``decode_value``'s ``version``).
_DECODING: contextvars.ContextVar[str] = contextvars.ContextVar("satind_decoding", default="")
# satind's own references (shared objects, satind/shared.py): base class -> (tag, to_ref),
# and tag -> from_ref. A reference travels instead of the object; encoding one can be recorded
# (``encode_value(..., refs=[])``) so that a thief knows what it must have to decode.
_REF_TYPES: dict[type, tuple[int, Callable[[Any], Any]]] = {}
_REF_TAGS: dict[int, Callable[[Any], Any]] = {}


def register_reference(
    base: type, tag: int, to_ref: Callable[[Any], Any], from_ref: Callable[[Any], Any]
) -> None:
    """Instances of ``base`` (and its subclasses) travel as ``to_ref(obj)`` under ``tag``
    (below 40000: satind's); ``from_ref`` finds the object again where they arrive."""
    _REF_TYPES[base] = (tag, to_ref)
    _REF_TAGS[tag] = from_ref


def register_type(
    cls: type, tag: int, to_plain: Callable[[Any], Any], from_plain: Callable[[Any], Any]
) -> None:
    """Let instances of ``cls`` travel as job arguments and results, under CBOR ``tag``.

    ``to_plain`` turns an instance into CBOR-able data; ``from_plain`` turns that back.

    Raises:
        ValueError: the tag is below 40000 (reserved) or taken by another class.
    """
    if tag < 40000:
        raise ValueError(f"application tags start at 40000, got {tag}")
    versions = _APP_TAGS.setdefault(tag, {})
    version = version_of(cls.__module__)
    known = versions.get(version)
    if known is not None and known[0] is not cls and not _same_class(known[0], cls):
        raise ValueError(f"CBOR tag {tag} is already registered for {known[0].__qualname__}")
    versions.pop(version, None)  # the newest registration last (see ``_entry``)
    versions[version] = (cls, to_plain, from_plain)
    _APP_TYPES[cls] = (tag, to_plain)


def version_of(module: str) -> str:
    """The code version of a module: its shipped version's package, or "" (installed)."""
    return module.partition(".")[0] if module.startswith(SHIPPED_PREFIX) else ""


def _same_class(old: type, new: type) -> bool:
    # The same class defined again by its module imported again (a plugin reloaded): the new
    # one replaces it.
    return (old.__module__, old.__qualname__) == (new.__module__, new.__qualname__)


def forget_version(version: str) -> None:
    """A shipped version unloaded (plugin/shipped.py): its registrations go with it."""
    for tag in list(_APP_TAGS):
        versions = _APP_TAGS[tag]
        entry = versions.pop(version, None)
        if entry is not None:
            _APP_TYPES.pop(entry[0], None)
        if not versions:
            del _APP_TAGS[tag]


def _entry(tag: int) -> _Entry | None:
    """The registration a decode uses for ``tag``: the decoding version's, else installed
    code's, else the newest (a value decoded outside any run: a client's, a test's)."""
    versions = _APP_TAGS.get(tag)
    if not versions:
        return None
    found = versions.get(_DECODING.get()) or versions.get("")
    return found if found is not None else next(reversed(versions.values()))


def is_registered(cls: type) -> bool:
    """Whether instances of ``cls`` may travel (``register_type``)."""
    return cls in _APP_TYPES


def _encode_tuple(encoder: Any, value: tuple[Any, ...]) -> None:
    encoder.encode(cbor2.CBORTag(TUPLE_TAG, list(value)))


def _default(encoder: Any, value: Any, refs: list[Any] | None = None) -> None:
    entry = _APP_TYPES.get(type(value))
    if entry is None and type(value).__module__ == "numpy":
        if _numpy_support():  # NumPy is imported already: the value is one of its
            entry = _APP_TYPES.get(type(value))
        if entry is None and hasattr(value, "item") and getattr(value, "shape", None) == ():
            encoder.encode(value.item())  # a NumPy scalar travels as the Python number
            return
    if entry is None:
        for base, (tag, to_ref) in _REF_TYPES.items():
            if isinstance(value, base):
                ref = to_ref(value)
                if refs is not None:
                    refs.append(ref)
                encoder.encode(cbor2.CBORTag(tag, ref))
                return
        raise EncodeError(
            f"cannot send a {type(value).__qualname__} between peers: use plain data "
            "(int, float, str, bytes, list, tuple, dict, set, None) or register the type "
            "with satind.register_type"
        )
    tag, to_plain = entry
    encoder.encode(cbor2.CBORTag(tag, to_plain(value)))


def _decode_tuple(value: Any, immutable: bool) -> Any:
    # An array inside a set or a map key arrives already immutable (a tuple).
    if type(value) is not list and type(value) is not tuple:
        raise DecodeError("tuple tag must hold an array")
    return tuple(value)


def _tag_hook(tag: Any, immutable: bool) -> Any:
    resolve = _REF_TAGS.get(tag.tag)
    if resolve is not None:
        return resolve(tag.value)
    entry = _entry(tag.tag)
    if entry is None and tag.tag == NDARRAY_TAG:
        if not _numpy_support(load=True):
            raise DecodeError("a NumPy array arrived, but NumPy is not installed here")
        entry = _entry(tag.tag)
    if entry is None:
        raise DecodeError(f"unknown CBOR tag {tag.tag} in an application value")
    return entry[2](tag.value)


# NumPy arrays (when NumPy is installed) travel under satind's own tag: dtype, shape and the
# raw bytes. Registered on first use — an array met while encoding (NumPy is imported then),
# the tag met while decoding (NumPy imported then) — so a peer that never sees one never
# imports NumPy. Encoding copies the data once (into the message); decoding does not: the
# array is a read-only view of the message's bytes (``.copy()`` to change it).
NDARRAY_TAG = 39003


def _numpy_support(load: bool = False) -> bool:
    """Register NumPy arrays (see above); whether NumPy is there. ``load``: import it."""
    if NDARRAY_TAG in _APP_TAGS:
        return True
    numpy = sys.modules.get("numpy")
    if numpy is None and load:
        try:
            numpy = importlib.import_module("numpy")
        except ImportError:
            return False
    if numpy is None:
        return False

    def to_plain(array: Any) -> list[Any]:
        if array.dtype.hasobject:
            raise EncodeError("a NumPy array of Python objects cannot travel: use a numeric dtype")
        return [array.dtype.str, list(array.shape), array.tobytes()]

    def from_plain(plain: Any) -> Any:
        try:
            dtype_str, shape, data = plain
            dtype = numpy.dtype(dtype_str)
            if dtype.hasobject or not isinstance(data, bytes):
                raise ValueError("not a numeric array")
            return numpy.frombuffer(data, dtype=dtype).reshape([int(n) for n in shape])
        except (ValueError, TypeError) as exc:
            raise DecodeError(f"bad NumPy array: {exc}") from None

    _APP_TAGS[NDARRAY_TAG] = {"": (numpy.ndarray, to_plain, from_plain)}
    _APP_TYPES[numpy.ndarray] = (NDARRAY_TAG, to_plain)
    return True


# Room a frame keeps for what travels beside an application value (ids, paths, a traceback).
ENVELOPE_BYTES = 64 * 1024


# Types that cbor2 writes the same with our tuple encoder and without it. Given any
# ``encoders`` at all, cbor2's C encoder looks every item up by type through Python: a list
# of floats encodes three times slower (17 ms against 6 for heat2d's 1 MB entity state). A
# value made only of these types is encoded without it.
_PLAIN_LEAVES = frozenset({int, float, str, bytes, bool, type(None)})
_PLAIN = _PLAIN_LEAVES | {list, dict}
# A value with more containers than this is not scanned (the scan would cost what it saves).
_PLAIN_SCAN_MAX = 100_000


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of ``_PLAIN`` types: no tuple, set or plugin type
    anywhere, and no list or dict met twice (shared or cyclic: cbor2 says what is wrong)."""
    todo = [value]
    seen: set[int] = set()
    while todo:
        v = todo.pop()
        t = type(v)
        if t is list:
            types = set(map(type, v))
            inner: Any = v
        elif t is dict:
            types = set(map(type, v)) | set(map(type, v.values()))
            inner = v.values()
        else:
            if t in _PLAIN_LEAVES:
                continue
            return False
        if id(v) in seen or len(seen) >= _PLAIN_SCAN_MAX or not types <= _PLAIN:
            return False
        seen.add(id(v))
        if list in types or dict in types:
            todo.extend(x for x in inner if type(x) is list or type(x) is dict)
    return True


def encode_value(value: Any, max_frame: int | None = None, refs: list[Any] | None = None) -> bytes:
    """CBOR of an application value (job arguments, results).

    ``max_frame``: the frame cap (net.max_frame_bytes) the value must travel within; a value
    too large for it is refused here, where the error can name the cause, rather than sent
    and refused by the receiver (which would only close the connection, again and again).

    Raises:
        EncodeError: the value holds something CBOR cannot carry, or is too large.
    """
    try:
        if _plain(value):
            data = bytes(cbor2.dumps(value))  # the same bytes, three times faster (below)
        else:
            default = _default if refs is None else functools.partial(_default, refs=refs)
            data = bytes(cbor2.dumps(value, encoders={tuple: _encode_tuple}, default=default))
    except EncodeError:
        raise
    except Exception as exc:
        raise EncodeError(f"cannot encode {type(value).__qualname__}: {exc}") from None
    if max_frame is not None and len(data) > max_frame - ENVELOPE_BYTES:
        raise EncodeError(
            f"a {type(value).__qualname__} of {len(data):,} bytes (encoded) is more than one "
            f"message carries (net.max_frame_bytes is {max_frame:,}): return or pass less "
            "data, or raise net.max_frame_bytes on every peer"
        )
    return data


def decode_value(data: bytes, max_depth: int = 200, version: str = "") -> Any:
    """Inverse of ``encode_value``. ``version``: the code version (``version_of``) of the run
    the value belongs to, whose registered types it is made of.

    Raises:
        DecodeError: not valid CBOR or an unknown tag.
    """
    token = _DECODING.set(version)
    try:
        return cbor2.loads(
            data,
            max_depth=max_depth,
            semantic_decoders={TUPLE_TAG: _decode_tuple},
            tag_hook=_tag_hook,
        )
    except DecodeError:
        raise
    except Exception as exc:
        cause = exc.__cause__
        if isinstance(cause, DecodeError):
            raise cause from None
        raise DecodeError(f"bad application value: {exc}") from None
    finally:
        _DECODING.reset(token)


class Encoded:
    """An application value in its CBOR form (``encode_value``), as it arrived or as it will
    leave. The network side passes values on in this form; only the compute side, which runs
    plugin code, decodes and encodes them (a large value takes seconds, which a network side
    must not spend while probes wait for an answer)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def decode(self, max_depth: int = 200, version: str = "") -> Any:
        """See ``decode_value``. Raises DecodeError."""
        return decode_value(self.data, max_depth, version)

    def __repr__(self) -> str:
        return f"<Encoded {len(self.data)} bytes>"
