"""Versioned API types of the scheduler (upstream ``pkg/scheduler/apis``)."""
