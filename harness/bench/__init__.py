"""Benchmarks run by `kse bench ...`: each starts what it measures, reports a table or JSON, cleans up."""
