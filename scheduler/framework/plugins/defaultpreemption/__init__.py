"""DefaultPreemption (upstream ``pkg/scheduler/framework/plugins/defaultpreemption``)."""

from .default_preemption import NAME, DefaultPreemption, filter_pods_with_pdb_violation, new

__all__ = ["NAME", "DefaultPreemption", "filter_pods_with_pdb_violation", "new"]
