"""Helpers shared by the plugins, one module a topic, as upstream's
`pkg/scheduler/framework/plugins/helper/` (normalize_score.go, shape_score.go, taint.go) plus the
scheduling helpers of component-helpers (node affinity, taints and tolerations, pod priority):

* `gomath`: Go's integer division and rounding, which the scores depend on
* `normalize_score`: DefaultNormalizeScore
* `shape_score`: the broken-linear shape functions of RequestedToCapacityRatio
* `selectors`: label selectors on the scheduler's hot path
* `node_affinity`: required / preferred node affinity and nodeSelector
* `taints`: tolerations against taints (with the Gt/Lt operators)
* `priority`: a pod's priority
* `queueing_hints`: typed (old, new) objects of an event
* `status`: the Error statuses of missing cycle state

Selectors are compiled once per pod (and cached on its PodInfo) with kse.objects.labels, so a
Filter call for one node is a few dict lookups. Semantics are upstream's, including its integer
arithmetic (Go's `/` truncates toward zero; `gomath.go_div` does the same).
"""
