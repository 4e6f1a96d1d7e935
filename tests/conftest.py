"""Shared fixtures live in tests/fixtures/, one module per concern (etcd, PKI, API server, ...)."""

pytest_plugins = [
    "tests.fixtures.etcd",
    "tests.fixtures.pki",
    "tests.fixtures.apiserver",
]
