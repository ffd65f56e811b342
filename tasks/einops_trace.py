"""``einops`` inside a forward traced with its shapes fixed.

``einops.rearrange`` and its kin pick a backend by the type of the tensor they are given and refuse
any type they do not know, a tracer's proxy included. At fixed shapes a proxy answers ``shape`` with
the example's real sizes, so torch's own backend works on it unchanged: its reshapes, permutes and
einsums are recorded as plain torch calls, and the captured graph holds no einops at all.
"""

from __future__ import annotations

import sys

_backend: type | None = None
"""The backend class, held here: einops finds backends as subclasses, which Python keeps only weakly."""


def teach_einops(proxy_type: type) -> None:
    """Let einops treat ``proxy_type`` as a torch tensor; nothing to do where the model never
    imported einops (then no forward of it calls einops either)."""
    global _backend
    if _backend is not None or "einops" not in sys.modules:
        return
    try:
        from einops._backends import TorchBackend
    except ImportError:  # a release without this layout: einops calls then fail with their own message
        return

    class TracedTorchBackend(TorchBackend):
        # einops only instantiates a backend whose framework_name is an imported module's name
        framework_name = __name__

        def is_appropriate_type(self, tensor: object) -> bool:
            return isinstance(tensor, proxy_type)

    _backend = TracedTorchBackend
