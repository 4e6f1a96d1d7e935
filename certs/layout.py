"""The file layout of a PKI directory: the one place that names every file and every identity.

Processes are handed a PKI directory (or a `CertPaths`) and must agree on what lives in it, so the
names are decided here and nowhere else. The identity table (`leaf_specs`) sits beside the paths
because a stem and the identity it carries are one decision: `scheduler-2.crt` *is* the second
`system:kube-scheduler` replica.

```
ca.crt, ca.key              the signing CA (ca.key never leaves this directory)
ca-bundle.crt               the trust bundle every server and client loads; a CA rotation puts
                            old + new CA in it, so it is not always a copy of ca.crt
ca-next.crt, ca-next.key    during a CA rotation, after `add`: the CA that `switch` will sign with
ca-prev.crt                 during a CA rotation, after `switch`: the old CA, trusted until `remove`
.lock                       taken by every writer that signs (rotation, renewal), see certs.rotation
apiserver.crt/.key          serving cert of the API server
etcd-server.crt/.key        etcd serving + peer cert
apiserver-etcd-client.*     the API server's client cert towards etcd
scheduler-<i>.*             one per kube-scheduler replica (own key, own serial)
controller-manager.*        system:kube-controller-manager (every controller-manager replica)
admin, chaos, workload, nodesim, node-<name>   client identities
```
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CA_STEM = "ca"
CA_NEXT_STEM = "ca-next"  # the incoming CA of a rotation (`kse certs rotate-ca --phase add`)
CA_PREV_STEM = "ca-prev"  # the outgoing CA of a rotation, after `switch`, until `remove`
CA_STEMS = frozenset({CA_STEM, CA_NEXT_STEM, CA_PREV_STEM})
CA_BUNDLE_FILE = "ca-bundle.crt"
CERT_SUFFIX = ".crt"
KEY_SUFFIX = ".key"

APISERVER = "apiserver"
ETCD_SERVER = "etcd-server"
APISERVER_ETCD_CLIENT = "apiserver-etcd-client"
ADMIN = "admin"
CHAOS = "chaos"
WORKLOAD = "workload"
NODESIM = "nodesim"
CONTROLLER_MANAGER = "controller-manager"
SCHEDULER_PREFIX = "scheduler-"
NODE_PREFIX = "node-"

# Kubernetes node names are DNS subdomains; holding to that also keeps a stem a safe file name.
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def cert_path(pki_dir: Path, stem: str) -> Path:
    """Path of the certificate for `stem` (a stem is the file name without suffix)."""
    return Path(pki_dir) / f"{stem}{CERT_SUFFIX}"


def key_path(pki_dir: Path, stem: str) -> Path:
    """Path of the private key for `stem`."""
    return Path(pki_dir) / f"{stem}{KEY_SUFFIX}"


def ca_bundle_path(pki_dir: Path) -> Path:
    """Path of the trust bundle; load this, not ca.crt, so CA rotation needs no code change."""
    return Path(pki_dir) / CA_BUNDLE_FILE


def scheduler_stem(replica: int) -> str:
    """Stem of scheduler replica `replica` (1-based, as the processes are numbered)."""
    if replica < 1:
        raise ValueError(f"scheduler replicas are numbered from 1, got {replica}")
    return f"{SCHEDULER_PREFIX}{replica}"


def node_stem(node_name: str) -> str:
    """Stem of the kubelet identity for `node_name`; validates the name since it becomes a file name."""
    validate_node_name(node_name)
    return f"{NODE_PREFIX}{node_name}"


def validate_node_name(node_name: str) -> None:
    """Reject names Kubernetes would reject, before they become file names and CNs."""
    if not _NODE_NAME.match(node_name):
        raise ValueError(
            f"invalid node name {node_name!r}: must be a DNS subdomain "
            "(lower-case letters, digits, '-' and '.', starting and ending alphanumeric)"
        )


@dataclass(frozen=True)
class LeafSpec:
    """What one leaf certificate says: who it is, where it may be used, which names it serves."""

    stem: str
    common_name: str
    organizations: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    server: bool = False
    client: bool = True


def leaf_specs(
    *, scheduler_replicas: int = 3, nodes: Sequence[str] = (), server_hosts: Sequence[str] = ()
) -> list[LeafSpec]:
    """Every leaf `kse certs init` issues. CN is the user and O the groups (Kubernetes' x509 authn).

    `server_hosts` are extra names or IPs the API server is reached by (a container name, a host IP);
    each is sorted into a DNS or IP SAN.
    """
    if scheduler_replicas < 0:
        raise ValueError(f"scheduler replicas must be >= 0, got {scheduler_replicas}")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"duplicate node names in {list(nodes)}")
    extra_dns, extra_ips = split_hosts(server_hosts)
    specs = [
        LeafSpec(
            APISERVER,
            "kube-apiserver",
            dns_names=_unique(("localhost", "apiserver", *extra_dns)),
            ip_addresses=_unique(("127.0.0.1", "::1", *extra_ips)),
            server=True,
            client=False,
        ),
        LeafSpec(
            ETCD_SERVER,
            "etcd-server",
            dns_names=("localhost", "etcd", "etcd-1", "etcd-2", "etcd-3"),
            ip_addresses=("127.0.0.1", "::1"),
            server=True,
            client=True,  # etcd members use their serving pair for peer connections too
        ),
        LeafSpec(APISERVER_ETCD_CLIENT, "kube-apiserver-etcd-client"),
    ]
    specs += [LeafSpec(scheduler_stem(i), "system:kube-scheduler") for i in range(1, scheduler_replicas + 1)]
    # As kubeadm's controller-manager.conf: the user system:kube-controller-manager, no groups.
    specs.append(LeafSpec(CONTROLLER_MANAGER, "system:kube-controller-manager"))
    specs += [
        LeafSpec(ADMIN, "kse:admin", ("system:masters",)),
        LeafSpec(CHAOS, "kse:chaos", ("kse:chaos",)),
        LeafSpec(WORKLOAD, "kse:workload", ("kse:workloads",)),
        # One nodesim process simulates many nodes, so it gets a group identity, not system:node:<x>.
        LeafSpec(NODESIM, "kse:nodesim", ("kse:nodesims",)),
    ]
    specs += [LeafSpec(node_stem(n), f"system:node:{n}", ("system:nodes",)) for n in nodes]
    return specs


def split_hosts(hosts: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Sort host strings into (DNS names, IP addresses) for a SubjectAlternativeName."""
    dns: list[str] = []
    ips: list[str] = []
    for host in hosts:
        try:
            ips.append(str(ipaddress.ip_address(host)))
        except ValueError:
            if not host or any(c.isspace() or c == "/" for c in host):
                raise ValueError(f"invalid host name {host!r}") from None
            dns.append(host)
    return tuple(dns), tuple(ips)


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class CertPaths:
    """The three files a process needs for one identity: its pair and the bundle it trusts."""

    stem: str
    cert: Path
    key: Path
    ca_bundle: Path

    @classmethod
    def in_dir(cls, pki_dir: Path, stem: str) -> CertPaths:
        """Paths for `stem` under `pki_dir` (whether or not the files exist yet)."""
        return cls(stem, cert_path(pki_dir, stem), key_path(pki_dir, stem), ca_bundle_path(pki_dir))


@dataclass(frozen=True)
class PKI:
    """A PKI directory and the identities in it, looked up by stem or by role."""

    dir: Path
    leaves: Mapping[str, CertPaths] = field(default_factory=dict, hash=False)

    @classmethod
    def from_dir(cls, pki_dir: Path) -> PKI:
        """Discover the identities present in an existing directory (every `X.crt` with an `X.key`).

        For processes that are given only a directory, e.g. `kse certs show` or a later rotation.
        """
        pki_dir = Path(pki_dir)
        if not cert_path(pki_dir, CA_STEM).is_file():
            raise FileNotFoundError(f"no CA in {pki_dir} (expected {cert_path(pki_dir, CA_STEM)})")
        stems = sorted(
            p.name[: -len(CERT_SUFFIX)]
            for p in pki_dir.glob(f"*{CERT_SUFFIX}")
            if p.name != CA_BUNDLE_FILE and p.name[: -len(CERT_SUFFIX)] not in CA_STEMS
        )
        return cls(
            pki_dir,
            {s: CertPaths.in_dir(pki_dir, s) for s in stems if key_path(pki_dir, s).is_file()},
        )

    @property
    def ca_cert(self) -> Path:
        return cert_path(self.dir, CA_STEM)

    @property
    def ca_key(self) -> Path:
        return key_path(self.dir, CA_STEM)

    @property
    def ca_bundle(self) -> Path:
        return ca_bundle_path(self.dir)

    def __getitem__(self, stem: str) -> CertPaths:
        return self.get(stem)

    def __contains__(self, stem: object) -> bool:
        return stem in self.leaves

    def __iter__(self) -> Iterator[CertPaths]:
        return iter(self.leaves.values())

    def get(self, stem: str) -> CertPaths:
        """Look up an identity by stem; the error lists what exists, which is what one needs next."""
        try:
            return self.leaves[stem]
        except KeyError:
            raise KeyError(f"no identity {stem!r} in {self.dir}; have: {', '.join(self.leaves)}") from None

    @property
    def apiserver(self) -> CertPaths:
        return self.get(APISERVER)

    @property
    def etcd_server(self) -> CertPaths:
        return self.get(ETCD_SERVER)

    @property
    def apiserver_etcd_client(self) -> CertPaths:
        return self.get(APISERVER_ETCD_CLIENT)

    @property
    def admin(self) -> CertPaths:
        return self.get(ADMIN)

    @property
    def chaos(self) -> CertPaths:
        return self.get(CHAOS)

    @property
    def workload(self) -> CertPaths:
        return self.get(WORKLOAD)

    @property
    def nodesim(self) -> CertPaths:
        return self.get(NODESIM)

    def scheduler(self, replica: int) -> CertPaths:
        """Identity of scheduler replica `replica` (1-based)."""
        return self.get(scheduler_stem(replica))

    @property
    def schedulers(self) -> tuple[CertPaths, ...]:
        """All scheduler replicas, in replica order."""
        found = [
            (int(s[len(SCHEDULER_PREFIX) :]), p)
            for s, p in self.leaves.items()
            if s.startswith(SCHEDULER_PREFIX) and s[len(SCHEDULER_PREFIX) :].isdigit()
        ]
        return tuple(p for _, p in sorted(found))

    def node(self, node_name: str) -> CertPaths:
        """Kubelet identity (`system:node:<name>`) for `node_name`."""
        return self.get(node_stem(node_name))
