"""Importing a candidate's file, under a module name chosen afresh in each process.

A fixed name (the same in every judged process) would let a candidate tell the judge from a user's
import by reading its own module's name (``repr(ModelNew)`` shows it) and be honest only there. A
fresh random name carries nothing the candidate could compare against. This is one tripwire among
several: inside its process a candidate can find other signs of being judged, which
docs/EVALUATION.md lists as a limit."""

from __future__ import annotations

import importlib.util
import secrets
import sys
from pathlib import Path
from types import ModuleType


def import_candidate(path: Path) -> ModuleType:
    """``path`` imported as a module named ``kernel_<random>``, registered in ``sys.modules`` (Triton's
    and torch's compilers look modules up by name)."""
    name = f"kernel_{secrets.token_hex(6)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
