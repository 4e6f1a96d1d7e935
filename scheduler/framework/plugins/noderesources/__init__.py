"""The node-resources plugins, as upstream's `pkg/scheduler/framework/plugins/noderesources/`:
NodeResourcesFit (`fit.py`), NodeResourcesBalancedAllocation (`balanced_allocation.py`) and the
resource-allocation scoring they share, with the LeastAllocated / MostAllocated /
RequestedToCapacityRatio strategies (`resource_allocation.py`)."""
