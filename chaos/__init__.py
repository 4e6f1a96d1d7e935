"""Chaos testing, split as Jepsen does (DESIGN.md, "Chaos and measurement").

* a generator (the workload) creates pods and watches them;
* a nemesis injects faults (process kill / stop, partitions, restarts, certificate rotation) and
  writes one `FaultRecord` per fault;
* a checker (`chaos.checker`) reads the run's history afterwards and judges it.

The history (`chaos.history`) is the single truth: the API server's audit log (`kse.audit`), the
watch deliveries each observer recorded, the faults, the clients' RPC errors and a final snapshot of
the pods and nodes. The checker is a pure function of it.
"""
