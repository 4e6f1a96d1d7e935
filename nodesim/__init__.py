"""Fake kubelets (`kse nodesim`) and the workload generator (`kse workload`).

Library API (the chaos and benchmark code drives these in-process):

* `nodesim.simulator.NodeSimulator(clientset, NodeSimConfig(fleet=FleetConfig(...)))`:
  `await sim.run()` until `sim.stop()`, or `async with sim.running(): ...`;
* `nodesim.workload.Workload(clientset, WorkloadConfig(...))`: `await wl.run()` -> `WorkloadSummary`.
"""
