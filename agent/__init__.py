"""How kernelevo decides: the optimizer graph and its policies (issue 3), and the command line."""
