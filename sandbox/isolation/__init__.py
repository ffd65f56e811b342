"""Where a job's process runs: the process sandbox (namespaces through bubblewrap, an unprivileged
user, cgroups) and the Docker sandbox, behind the ``Sandbox`` protocol."""
