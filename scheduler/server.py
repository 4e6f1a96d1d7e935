"""The scheduler's ``/healthz``, ``/readyz`` and ``/metrics`` server: `kse.healthserver`'s, which
the controller-manager shares (kept importable here for the scheduler's callers)."""

from kse.healthserver import Check, HealthServer, parse_address, ping

__all__ = ["Check", "HealthServer", "parse_address", "ping"]
