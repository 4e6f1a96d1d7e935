"""Scheduler extenders: HTTP(S) webhooks that filter, prioritize, bind and preempt for the
scheduler (upstream ``pkg/scheduler/extender.go`` and the extender parts of ``schedule_one.go``).

* ``types``: the JSON on the wire (upstream ``k8s.io/kube-scheduler/extender/v1``);
* ``http``: ``HTTPExtender``, one configured extender (aiohttp client, timeout, TLS);
* ``sample``: ``kse extender-sample``, a small extender to try them with.

Where the scheduler calls them is in ``scheduler.algorithm`` (Filter after the Filter plugins, and
Prioritize beside the Score plugins) and ``scheduler.scheduler`` (Bind before the Bind plugins).
"""

from __future__ import annotations

from .http import ExtenderError, HTTPExtender, build_extenders

__all__ = ["ExtenderError", "HTTPExtender", "build_extenders"]
