"""kube-controller-manager's controllers, for `kse controller-manager`: one process, several
controllers, one Lease (`kube-system/kube-controller-manager`).

Each controller is its own module following its upstream controller (pkg/controller/<name>/ in
kubernetes/kubernetes) and is registered by name in `registry.py`; `base.py` is the contract
between a controller and the manager that runs it.
"""
