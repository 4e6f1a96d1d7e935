"""The PKI of a `kse up` data dir: made or reused at start, and with `cert_ttl` short-lived leaves
kept fresh while the cluster runs.

With `ClusterPlan.cert_ttl`, every leaf of D/pki is (re)issued with that lifetime at start, and
`kse up` runs one `certs.rotation.CertRenewer` per leaf for as long as the cluster runs, renewing
it at a jittered 70-90 % of its life, as the kube-controller-manager's CSR signer serves a
kubelet's certificate manager (kse has no CSR API, and `kse up` holds the CA key path). The
components notice the new files themselves (their channel sources poll them every second; the API
server and etcd load their serving pairs per handshake).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from certs.layout import PKI, CertPaths, leaf_specs
from certs.pki import LEAF_TTL, init_pki, issue_spec, load_ca, write_pair
from certs.rotation import CertRenewer, pki_lock
from harness.up.plan import ClusterPlan, UpError

__all__ = ["CertRenewers", "ensure_pki", "leaf_stems"]

_CERT_MIN_VALIDITY = timedelta(hours=1)


def leaf_stems(replicas: int) -> list[str]:
    """The leaves `kse up` issues (and, with `cert_ttl`, renews), for `replicas` scheduler replicas."""
    return [spec.stem for spec in leaf_specs(scheduler_replicas=replicas)]


def ensure_pki(plan: ClusterPlan, replicas: int) -> tuple[PKI, list[str]]:
    """The PKI under D/pki: made if absent; reused otherwise, with any identity that is missing or
    expires within the hour (re)issued from the same CA. With `plan.cert_ttl`, every leaf is
    (re)issued now with that lifetime (no process runs yet; the renewers keep them fresh from here).
    Returns it and what was done."""
    pki_dir = plan.pki_dir
    specs = leaf_specs(scheduler_replicas=replicas)
    short = None if plan.cert_ttl is None else timedelta(seconds=plan.cert_ttl)
    if not (pki_dir / "ca.crt").is_file() or not (pki_dir / "ca.key").is_file():
        pki = init_pki(
            pki_dir,
            scheduler_replicas=replicas,
            overwrite=(pki_dir / "ca.crt").exists(),
            leaf_ttl=short or LEAF_TTL,
        )
        lifetime = "" if short is None else f", leaves valid {plan.cert_ttl:g}s"
        return pki, [f"PKI written to {pki_dir}{lifetime}"]
    from cryptography import x509

    with pki_lock(pki_dir):  # a `kse certs rotate-ca` running against this dir must not interleave
        ca = load_ca(pki_dir)
        if ca.certificate.not_valid_after_utc < datetime.now(UTC) + _CERT_MIN_VALIDITY:
            raise UpError(f"the CA in {pki_dir} has expired (or expires within the hour); run with --fresh")
        done: list[str] = []
        for spec in specs:
            paths = CertPaths.in_dir(pki_dir, spec.stem)
            reason = ""
            if not paths.cert.is_file() or not paths.key.is_file():
                reason = "missing"
            elif short is not None:
                reason = f"short-lived, {plan.cert_ttl:g}s"
            else:
                cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
                if cert.not_valid_after_utc < datetime.now(UTC) + _CERT_MIN_VALIDITY:
                    reason = "expiring"
            if reason:
                write_pair(paths, issue_spec(ca, spec, ttl=short or LEAF_TTL))
                done.append(f"issued {spec.stem} ({reason})")
    if short is not None and done:
        done = [f"issued {len(done)} leaves valid {plan.cert_ttl:g}s in {pki_dir}"]
    return PKI.from_dir(pki_dir), done or [f"PKI reused from {pki_dir}"]


class CertRenewers:
    """One `CertRenewer` per leaf stem, for as long as the cluster runs (with `cert_ttl`; without,
    none and every method a no-op). `renewers` is stem -> renewer."""

    def __init__(self, ttl: float | None) -> None:
        self.ttl = ttl
        self.renewers: dict[str, CertRenewer] = {}
        self._stack = contextlib.AsyncExitStack()

    async def start(self, pki: PKI, replicas: int, progress: Callable[[str], None]) -> None:
        """Start a renewer for every leaf of `replicas` replicas that the PKI holds."""
        if self.ttl is None:
            return
        for stem in leaf_stems(replicas):
            if stem in pki:
                renewer = CertRenewer(pki.dir, stem, timedelta(seconds=self.ttl))
                self.renewers[stem] = renewer
                await self._stack.enter_async_context(renewer)
        progress(f"renewing {len(self.renewers)} short-lived certificates at 70-90 % of {self.ttl:g}s")

    async def aclose(self) -> None:
        """Stop every renewer (last in a shutdown: every certificate stays valid while anything runs)."""
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    def renewals(self) -> dict[str, dict[str, Any]]:
        """Per leaf stem: renewals done so far and the next planned one (ISO time)."""
        out: dict[str, dict[str, Any]] = {}
        for stem, r in sorted(self.renewers.items()):
            out[stem] = {
                "renewals": r.renewals,
                "next_renewal": r.deadline.isoformat(timespec="seconds") if r.deadline else None,
            }
            if r.last_error is not None:
                out[stem]["last_error"] = str(r.last_error)
        return out

    def status_line(self) -> str:
        """One status line: renewals so far and the next one ("" without short-lived certs)."""
        if not self.renewers:
            return ""
        total = sum(r.renewals for r in self.renewers.values())
        planned = [(r.deadline, stem) for stem, r in self.renewers.items() if r.deadline is not None]
        line = f"certs: ttl {self.ttl:g}s, {total} renewals across {len(self.renewers)} identities"
        if planned:
            when, stem = min(planned)
            line += f", next {stem} in {max(0.0, (when - datetime.now(UTC)).total_seconds()):.0f}s"
        failing = sorted(stem for stem, r in self.renewers.items() if r.last_error is not None)
        if failing:
            line += f"; renewal errors: {', '.join(failing)}"
        return line
