"""Code that runs inside the candidate's process (and, for the shared input generator and timed
call, inside the oracle's). Nothing here decides a verdict: a candidate can read and patch all of
it, so everything it reports is either raw data the trusted side checks, or a first filter that can
only reject."""

LAUNCH_COVER_MS = 0.26
"""How long the launch cover (``cover.py``) holds the GPU before a timed call's clock starts. Host
work of the call shorter than this is hidden, by design; the judge's clock allows it."""
