"""API Priority and Fairness: the API server's overload gate (see `filter`)."""

from apiserver_mock.flowcontrol.filter import FlowControl, FlowControlConfig

__all__ = ["FlowControl", "FlowControlConfig"]
