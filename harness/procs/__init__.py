"""Starting and controlling the processes of a local cluster: etcd, the API server, schedulers."""
