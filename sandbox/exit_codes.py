"""The exit codes every ``kernelevo`` command keeps to, in one place (the judge's errors carry them too).

0 success (accepted, or a run finished with a verified candidate); 1 rejected (or a run finished without
one, or the task is not covered); 2 bad usage or unreadable input; 3 something the environment lacks
(a GPU, CUDA in the sandbox, room on the disk): a run is left to resume once it is fixed; 4 interrupted
(a signal, an endpoint that stays down): resumable; 5 kernelevo's own error (a bug, not the input's or
the machine's): a run is left interrupted with the traceback in its folder's ``crash.log``."""

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5
