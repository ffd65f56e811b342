"""Whole networks: capture, fusible regions, their runtime in context, reassembly, the end-to-end check
and export (``optimize-model``)."""
