"""Prompt templates (Jinja2, StrictUndefined), loaded as package resources."""

from __future__ import annotations

import re
from importlib import resources

from jinja2 import Environment, StrictUndefined

_env = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)

def fence(code: str, limit: int | None = None) -> str:
    """``code`` in a Markdown code block whose fence is longer than any run of backticks inside it, so a
    source that itself contains a fence cannot end the block early; ``limit`` cuts it to that many
    characters."""
    text = code if limit is None or len(code) <= limit else code[:limit] + "\n# ... (cut)"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}python\n{text.rstrip()}\n{ticks}"


_env.filters["fence"] = fence

NAMES = ("system", "task", "playbook", "generation", "repair", "reflection")


def render(name: str, **values: object) -> str:
    """Render prompt ``name`` (a file ``prompts/<name>.md``) with ``values``; missing values raise."""
    text = resources.files(__package__).joinpath(f"{name}.md").read_text()
    return _env.from_string(text).render(**values)
