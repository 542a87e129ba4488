"""Serving: the `vllm serve` argv, its log stages and the rules a start must keep."""
