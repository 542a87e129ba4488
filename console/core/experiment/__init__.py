"""Experiments: a grid of layouts × load points, and its report."""
