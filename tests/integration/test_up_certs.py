"""`kse up` with short-lived certificates (`cert_ttl`), with real processes and real mTLS.

A small cluster (etcd over mTLS, API server, 2 replicas, 5 nodes, a workload at 5 pods/s) whose every
leaf lives 30 s (the floor). The API server closes connections after 8 s (`--max-connection-age`), so
every client re-handshakes several times during the test, well after its first certificate expired:
a component that did not pick up its renewed pair would fail there.

* every leaf is issued with the TTL, and `kse up` runs a renewer per leaf identity;
* every identity is renewed at least once, at 70-90 % of its validity window (measured, printed);
* etcd serves its renewed `etcd-server` pair without a restart (a new TLS handshake sees the new
  serial: etcd 3.5 loads its serving pair per handshake), and so does the API server;
* the API server reaches etcd with the apiserver-etcd-client pair;
* pods keep being bound after the first certificates expired, and no process restarted;
* with `rpc_error_logs`, no client recorded a failed RPC;
* the `kse up --json` summary shows the renewals per identity and the next one.

Everything polls with a deadline.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from certs.layout import PKI
from certs.pki import leaf_backdate, leaf_ttl
from cli.up_cmd import build_summary
from harness.up import Cluster, ClusterPlan, ElectionPlan
from harness.up.pki import leaf_stems
from harness.up.supervisor import BackoffPolicy
from tests.fixtures.pki import served_certificate
from tests.fixtures.polling import truthy

TTL = 30.0
MAX_CONNECTION_AGE = 8.0
# What a refused or expired certificate, or a dropped channel, looks like to a client.
TRANSPORT_CODES = {
    "UNAVAILABLE",
    "UNAUTHENTICATED",
    "PERMISSION_DENIED",
    "DEADLINE_EXCEEDED",
    "CANCELLED",
    "UNKNOWN",
}


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def served_serial(address: str, pki: PKI, client_stem: str) -> int:
    """The serial of the certificate a TLS server presents to a new handshake (mTLS as `client_stem`)."""
    return served_certificate(address, pki[client_stem], pki.ca_bundle).serial_number


@pytest.mark.integration
@pytest.mark.timeout(120)
async def test_short_lived_certs_are_renewed_without_restarts(tmp_path: Path) -> None:
    plan = ClusterPlan(
        data_dir=tmp_path / "kse",
        replicas=2,
        nodes=5,
        rate=5,
        election=ElectionPlan(lease_duration=4, renew_deadline=3, retry_period=0.5),
        restart_policy=BackoffPolicy(initial=0.2, cap=1, reset_after=600),
        grace=5,
        cert_ttl=TTL,
        rpc_error_logs=True,
        apiserver_args=("--max-connection-age", f"{MAX_CONNECTION_AGE:g}"),
    )
    stems = leaf_stems(3)
    async with Cluster(plan) as cluster:
        assert cluster.pki is not None and cluster.etcd is not None and cluster.apiserver is not None
        pki = cluster.pki
        first = {stem: _cert(pki[stem].cert) for stem in stems}
        for stem, cert in first.items():
            assert leaf_ttl(cert).total_seconds() == TTL, stem
        assert sorted(cluster.renewers) == sorted(stems)
        argv = cluster.apiserver.argv
        assert argv[argv.index("--etcd-cert") + 1] == str(pki["apiserver-etcd-client"].cert)
        assert argv[argv.index("--etcd-key") + 1] == str(pki["apiserver-etcd-client"].key)
        assert cluster.etcd.endpoints[0].startswith("https://")
        etcd_endpoint = cluster.etcd.endpoints[0]
        served_etcd = served_serial(etcd_endpoint, pki, "apiserver-etcd-client")
        assert served_etcd == first["etcd-server"].serial_number
        starts = {name: (proc.pid, proc.starts) for name, proc in cluster.processes()}
        status = cluster.status
        assert status is not None
        await truthy(lambda: status.pod_totals()["bound"] > 0, 30, "the first bound pods")

        # Every identity renewed at least once, at 70-90 % of its window.
        await truthy(
            lambda: all(r.renewals >= 1 for r in cluster.renewers.values()),
            TTL + 15,
            "one renewal of every identity",
        )
        bound_at_renewal = status.pod_totals()["bound"]
        fractions: dict[str, tuple[float, float]] = {}
        for stem, renewer in cluster.renewers.items():
            old_serial, _planned, done_at = renewer.history[0]
            cert = first[stem]
            assert old_serial == cert.serial_number, stem
            start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
            of_window = (done_at - start) / (end - start)
            issued = start + leaf_backdate(timedelta(seconds=TTL))  # not_before is backdated
            of_ttl = (done_at - issued).total_seconds() / TTL
            fractions[stem] = (round(of_window, 3), round(of_ttl, 3))
            assert 0.69 <= of_window <= 0.95, (stem, of_window)
            assert _cert(pki[stem].cert).serial_number != cert.serial_number
        print("renewal at (fraction of the validity window, of the TTL from issue):", json.dumps(fractions))

        # etcd and the API server serve their renewed pairs to new handshakes, without a restart.
        now_etcd = _cert(pki["etcd-server"].cert).serial_number
        assert served_serial(etcd_endpoint, pki, "apiserver-etcd-client") == now_etcd != served_etcd
        now_api = _cert(pki["apiserver"].cert).serial_number
        assert served_serial(cluster.apiserver.address, pki, "admin") == now_api
        assert now_api != first["apiserver"].serial_number

        # Past the first certificates' expiry plus a forced re-handshake: pods are still bound.
        expired = max(c.not_valid_after_utc for c in first.values())
        await truthy(
            lambda: (datetime.now(UTC) - expired).total_seconds() > MAX_CONNECTION_AGE + 1,
            TTL + MAX_CONNECTION_AGE + 15,
            "the first certificates to expire and every connection to re-handshake",
            interval=0.2,
        )
        before = status.pod_totals()["bound"]
        await truthy(
            lambda: status.pod_totals()["bound"] >= before + 10,
            20,
            f"more pods bound after expiry (had {before}, {bound_at_renewal} at the first renewals)",
        )
        assert {name: (proc.pid, proc.starts) for name, proc in cluster.processes()} == starts
        assert all(r.restarts == 0 for r in cluster.replicas)
        assert all(r.last_error is None for r in cluster.renewers.values())

        # Failed RPCs: none that a certificate could cause (a NOT_FOUND for the Lease before the
        # first election is an answer, not a failure).
        logged = {
            n: plan.rpc_error_log_path(n) for n in ("scheduler-1", "scheduler-2", "nodesim", "workload")
        }
        records = [
            json.loads(line) for p in logged.values() if p.is_file() for line in p.read_text().splitlines()
        ]
        failed = [r for r in records if r["code"] in TRANSPORT_CODES]
        assert not failed, failed

        # The summary and the status line show the renewals.
        summary = build_summary(cluster, cluster.snapshot(), 1.0, "test", [])
        assert summary["cert_ttl_s"] == TTL
        assert set(summary["cert_renewals"]) == set(stems)
        assert all(v["renewals"] >= 1 and v["next_renewal"] for v in summary["cert_renewals"].values())
        snap = cluster.snapshot()
        assert snap is not None and snap.certs.startswith(f"certs: ttl {TTL:g}s")
        info = json.loads(plan.cluster_file.read_text())
        assert info["cert_ttl_s"] == TTL and info["pki_dir"] == str(plan.pki_dir)
    assert not cluster.leftovers
