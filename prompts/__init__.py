"""Prompt templates (Jinja2, StrictUndefined), loaded as package resources."""

from __future__ import annotations

from importlib import resources

from jinja2 import Environment, StrictUndefined

_env = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)

NAMES = ("system", "task", "playbook", "generation", "repair", "reflection")


def render(name: str, **values: object) -> str:
    """Render prompt ``name`` (a file ``prompts/<name>.md``) with ``values``; missing values raise."""
    text = resources.files(__package__).joinpath(f"{name}.md").read_text()
    return _env.from_string(text).render(**values)
