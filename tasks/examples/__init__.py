"""Candidates shipped with kernelevo: honest, readable examples for the built-in tasks."""
