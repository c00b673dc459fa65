"""Checksums that keep a file readable as plain JSON: a sealed JSON object ends with one more
field, `"crc"`, the CRC32 (eight hex digits) of the object as it was without that field. A
decoder that does not know the field ignores it; a flipped byte or an edited value anywhere in
the object fails the check."""

import zlib

_TAG = b',"crc":"'
_SEALED_TAIL = len(_TAG) + 10  # the tag, eight hex digits, the closing quote and brace


def seal(body: bytes) -> bytes:
    """`body` (one JSON object, no trailing whitespace) with its CRC32 as its last field."""
    return b'%s,"crc":"%08x"}' % (body[:-1], zlib.crc32(body))


def check(data: bytes) -> bool | None:
    """True when `data` is sealed and its checksum holds, False when it is sealed and does
    not, None when it carries no seal (written by an older version, or mangled past telling)."""
    if not (data.endswith(b'"}') and data[-_SEALED_TAIL:-10] == _TAG):
        return None
    try:
        crc = int(data[-10:-2], 16)
    except ValueError:
        return False
    # the crc of the body without copying it: a start checks every journal line
    return zlib.crc32(b"}", zlib.crc32(memoryview(data)[:-_SEALED_TAIL])) == crc
