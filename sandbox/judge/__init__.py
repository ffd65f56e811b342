"""The trusted side: static checks, the oracle process (the task's own Model on inputs it chose),
the comparison of raw outputs, the session that drives a candidate's process and checks its times
against its own clock, the forensic kernel trace and the verdict. Never imported into a process that
runs candidate code."""
