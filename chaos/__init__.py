"""Chaos testing, split as Jepsen does (DESIGN.md, "Chaos and measurement"), one pipeline for
`kse chaos run`, soaks and `kse bench failover`:

* a generator says what to break and when: a scenario's timed and random faults and its rounds
  (`chaos.scenario`), or the failover benchmark's rounds (`chaos.failover_bench.failover_rounds`);
  the workload itself is the cluster's (`kse workload`);
* the run driver (`chaos.runner.Drive`) runs them: faults at their times, rounds step by step with
  the waits of `chaos.waits` (a stable leader, a new leader and its binds, a replica back), an
  informer recording what it delivers, and the final snapshot;
* a nemesis (`chaos.nemesis`) injects each fault through a backend (`chaos.local_backend`,
  `chaos.docker_backend`) and writes its `FaultRecord`s;
* a checker (`chaos.checker`) reads the run's history afterwards and judges it; reports
  (`chaos.checker.report`, `chaos.failover_report`) render the verdicts.

The history (`chaos.history`) is the single truth: the API server's audit log (`kse.audit`), the
watch deliveries each observer recorded, the faults, the clients' RPC errors and a final snapshot of
the pods and nodes. The checker is a pure function of it.
"""
