"""Evaluation protocols: task definitions, scoring sheets, statistics and reports (no JAX)."""
