"""rocm-console: a terminal control console for vLLM on AMD Instinct GPU nodes."""

__version__ = "0.1.0"
