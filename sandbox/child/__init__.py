"""Code that runs inside the candidate's process (and, for the shared input generator and timed
call, inside the oracle's). Nothing here decides a verdict: a candidate can read and patch all of
it, so everything it reports is either raw data the trusted side checks, or a first filter that can
only reject."""
