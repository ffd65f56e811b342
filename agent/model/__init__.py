"""Whole networks (``optimize-model``): time the fusible regions ``tasks/regions.py`` captures, run their
searches, reassemble the network, check it end to end, and export it with ``optimize(model)``."""
