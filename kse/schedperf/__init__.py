"""scheduler_perf's config format, as upstream kubernetes/kubernetes test/integration/scheduler_perf
defines it, read and run by kse (`kse bench scheduler-perf`).

Shared by the in-process runner (scheduler.bench.perf_inprocess) and the end-to-end one
(harness.bench.scheduler_perf_e2e), which must not import each other, so it lives in the library:

* `config`: test cases, workloads, ops; `$param` substitution; upstream's validation.
* `decode`: field names matched as upstream's decoder (case-insensitive, unknown = error).
* `gotemplate`: Go text/template with scheduler_perf's helper functions.
* `objects`: nodes, pods and other objects from template files or upstream's defaults.
* `executor`: the ops, run against a `Cluster`.
* `metrics`: SchedulingThroughput sampled once per second, as upstream's throughputCollector.
* `runner`: running the selected workloads; JSON and table output.
"""
