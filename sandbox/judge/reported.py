"""What a number the candidate's process reports must be before the judge uses it (pure logic).

Its replies cross the channel as JSON, which it writes as it likes: a time or a count that is not a
plain number in range would pass comparisons it should fail (NaN), divide by zero, or travel on into
the verdict. Each is a ValueError here, which the session turns into the candidate's failure.
"""

from __future__ import annotations

import math
from typing import Any


def reported_ms(reply: dict[str, Any], key: str) -> float:
    """A time a process reported: a finite number of milliseconds, not negative (NaN would pass every
    comparison with the judge's clock, and sort anywhere), else ValueError."""
    value = reply[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} is {value!r}")
    return float(value)


MAX_COUNT = 10**9
"""More launches, ops or values read than any call makes: a count past it is not a count."""


def reported_count(value: Any) -> int:
    """A count the candidate's process reported: an int from 0 to ``MAX_COUNT``, else ValueError (the
    candidate's failure: a string, a bool, a negative or a 4000-digit number would travel on into the
    verdict)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"a count of {str(value)[:40]!r}")
    return value
