"""SEARCH/REPLACE edits to a candidate's source (pure text handling).

A model improving a kernel changes a few lines; sending the whole file again costs tokens and invites
unrelated drift. An edit names the exact lines to replace::

    <<<<<<< SEARCH
    BLOCK = 256
    =======
    BLOCK = 1024
    >>>>>>> REPLACE

Blocks apply in order, each to the result of the one before; the text under SEARCH must occur in the
source exactly once. When it does not, the error shows the closest lines of the source, so the model
can copy them right the next time.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

BLOCK = re.compile(r"^<{5,9} SEARCH[ \t]*\n(.*?)\n^={5,9}[ \t]*\n(.*?)\n?^>{5,9} REPLACE[ \t]*$",
                   re.DOTALL | re.MULTILINE)
"""Markers only at the start of their own line: a banner comment of '=' signs inside an edit stays text."""


class EditError(ValueError):
    """An edit that cannot be applied, with what the model needs to fix it."""


@dataclass
class Edit:
    search: str
    replace: str


def parse_edits(text: str) -> list[Edit]:
    """The SEARCH/REPLACE blocks of ``text``, in order; EditError when there is none."""
    edits = [Edit(search=m.group(1), replace=m.group(2)) for m in BLOCK.finditer(text)]
    if not edits:
        raise EditError("no edit found: write blocks as '<<<<<<< SEARCH', the exact lines, '=======', the new "
                        "lines, '>>>>>>> REPLACE'")
    return edits


def apply_edits(source: str, edits: list[Edit]) -> str:
    """``source`` with every edit applied in order."""
    for number, edit in enumerate(edits, 1):
        if not edit.search.strip():
            raise EditError(f"edit {number}: the SEARCH part is empty")
        count = source.count(edit.search)
        if count == 1:
            source = source.replace(edit.search, edit.replace, 1)
            continue
        if count > 1:
            raise EditError(f"edit {number}: the SEARCH text occurs {count} times; include more lines around it "
                            "so that it names one place")
        raise EditError(f"edit {number}: the SEARCH text is not in the source. The closest lines are:\n"
                        + closest_lines(source, edit.search))
    return source


def closest_lines(source: str, wanted: str, context: int = 0) -> str:
    """The run of ``source``'s lines most like ``wanted`` (as many lines), numbered."""
    lines = source.splitlines()
    size = max(1, len(wanted.splitlines()))
    best, best_ratio = 0, -1.0
    for start in range(max(1, len(lines) - size + 1)):
        window = "\n".join(lines[start:start + size])
        ratio = difflib.SequenceMatcher(None, window, wanted, autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    first, last = max(0, best - context), min(len(lines), best + size + context)
    return "\n".join(f"{n + 1:4d}| {lines[n]}" for n in range(first, last))
