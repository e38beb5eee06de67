"""Benchmarks behind ``dynbucket bench ...``: side by side in one run, medians, ratios."""
