"""The resource registry: one generic implementation of every verb, with per-kind strategy hooks."""

from apiserver_mock.registry.generic import Registry

__all__ = ["Registry"]
