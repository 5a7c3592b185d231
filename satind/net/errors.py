"""Errors of the wire format, shared by messages (codec.py) and application values
(values.py)."""


class DecodeError(ValueError):
    """Bytes that are not a valid message or value. The message says what was wrong."""


class EncodeError(ValueError):
    """A value CBOR cannot carry (for example an object of an unregistered class)."""
