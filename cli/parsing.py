"""Parsing of list-valued flags (``whatif --gpus 8..1024``, ``--seq-len 4096,32768``): text in,
typed values out, one-line ``MegasolveError`` on bad input. The solver takes the lists."""

from __future__ import annotations

from megasolve.models.errors import MegasolveError

MAX_RANGE_POINTS = 24  # 8..1024 is 8 points; a range longer than this is a typo


def parse_gpu_counts(text: str) -> list[int]:
    """GPU counts from ``--gpus``: a list ``64,128,256`` or a doubling range ``8..1024``.

    >>> parse_gpu_counts("8..128")
    [8, 16, 32, 64, 128]
    >>> parse_gpu_counts("256, 64,128,64")
    [64, 128, 256]
    """
    text = str(text).strip()
    if ".." in text:
        low_text, high_text = (part.strip() for part in text.split("..", 1))
        low, high = _positive("--gpus", low_text), _positive("--gpus", high_text)
        if high < low:
            raise MegasolveError(field="--gpus", value=text, rule="a range must go up (LOW..HIGH)",
                                 fix="e.g. --gpus 8..1024")
        counts = [low << k for k in range(MAX_RANGE_POINTS + 1) if low << k <= high]
        if len(counts) > MAX_RANGE_POINTS:
            raise MegasolveError(field="--gpus", value=text, rule=f"more than {MAX_RANGE_POINTS} sizes",
                                 fix="narrow the range")
        return counts
    return sorted({_positive("--gpus", part) for part in _items("--gpus", text)})


def parse_int_list(flag: str, text: str) -> list[int]:
    """``--seq-len 4096,32768`` -> [4096, 32768] (order kept, duplicates dropped).

    >>> parse_int_list("--seq-len", "32768,4096,4096")
    [32768, 4096]
    """
    return list(dict.fromkeys(_positive(flag, part) for part in _items(flag, str(text))))


def parse_name_list(flag: str, text: str) -> list[str]:
    """``--gpu a100-80g,h100`` -> ["a100-80g", "h100"]."""
    return list(dict.fromkeys(_items(flag, str(text))))


def _items(flag: str, text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise MegasolveError(field=flag, value=text, rule="must be a comma-separated list without empty items",
                             fix=f"e.g. {flag} {EXAMPLES.get(flag, '64,128')}")
    return parts


EXAMPLES = {"--gpus": "64,128,256", "--seq-len": "4096,32768", "--gbs": "256,512"}


def _positive(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise MegasolveError(field=flag, value=text, rule="must be a positive integer",
                             fix=f"e.g. {flag} {EXAMPLES.get(flag, '64')}")
    return value
