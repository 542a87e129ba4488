"""Benchmark runs of every kind through one run API (run.py): serving, offline, group and accuracy."""
