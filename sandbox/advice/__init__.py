"""Advice for the model, never a verdict: compile gates (nvcc, Triton), Nsight Compute profiles and
the one-line diagnosis."""
