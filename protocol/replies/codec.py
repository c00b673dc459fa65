"""Decoding a reply's data into its Struct, and the base of the composite replies' parts."""

from typing import TypeVar

import msgspec

T = TypeVar("T")


class ReplyMismatch(ValueError):
    """A reply's data is not of the shape this client reads (another version's daemon)."""


def decode(data: object, kind: type[T]) -> T:
    """The reply's data (as `Ok.data` arrived: JSON builtins) as its Struct."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as e:
        raise ReplyMismatch(str(e)) from None


class Part(msgspec.Struct, kw_only=True):
    """The base of the parts of `Status` and `Report` (keyword-only, like every reply)."""
