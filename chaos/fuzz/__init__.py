"""A seeded structured fuzzer of the API server: `kse fuzz apiserver` (runner.py)."""
