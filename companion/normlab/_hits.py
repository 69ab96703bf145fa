"""Which test items a run got right, as text a run record can hold (no torch needed).

A run record keeps its per-item hits so that two arms scored on the same test items can be
compared item by item (:func:`normlab.claims.pairing.paired_item_variance`).
"""

from __future__ import annotations

import base64

import numpy as np

__all__ = ["decode_hits", "encode_hits"]


def encode_hits(hits: np.ndarray) -> str:
    """``hits`` (bools) as text for a run record: ``<n>:<base64 of the packed bits>``."""
    flat = np.asarray(hits, dtype=bool).ravel()
    return f"{flat.size}:" + base64.b64encode(np.packbits(flat)).decode("ascii")


def decode_hits(text: str) -> np.ndarray:
    """The inverse of :func:`encode_hits`; a ValueError names what is malformed."""
    if not isinstance(text, str) or ":" not in text:
        raise ValueError(f"hits must be '<n>:<base64>', got {str(text)[:40]!r}")
    count, _, body = text.partition(":")
    if not count.isdigit():
        raise ValueError(f"hits: the item count {count[:20]!r} is not a whole number")
    n = int(count)
    try:
        packed = np.frombuffer(base64.b64decode(body, validate=True), dtype=np.uint8)
    except ValueError as err:
        raise ValueError(f"hits: not base64 ({err})") from None
    if packed.size != (n + 7) // 8:
        raise ValueError(f"hits: {packed.size} bytes cannot hold exactly {n} items")
    return np.unpackbits(packed, count=n).astype(bool)
