"""Benchmark logic that needs no node: a run's telemetry and energy, the client check, find-max."""
