"""docker-compose.yml against the code it runs, without Docker.

Every service's command must be a real `kse` subcommand whose flags parse with the real parser, and
every file a service reads must be one the `certs` service writes: the certs service's own command is
run here (into a temp dir standing for the /var/lib/kse volume) and each read path is looked up in
what it produced. A flag renamed in a component, a file moved in certs/layout.py or a SAN dropped
from a certificate shows up here rather than as a container that never becomes healthy.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from cli import main as kse_main
from cli.etcd_member_cmd import MemberTLS, parse_initial_cluster
from kse.config import ConnectionFile

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
VOLUME = "/var/lib/kse"
SERVICES = {
    "certs", "etcd-1", "etcd-2", "etcd-3", "apiserver", "scheduler-1", "scheduler-2", "scheduler-3",
    "nodesim", "workload", "chaos", "controller-manager-1", "controller-manager-2",
}  # fmt: skip
# Flags whose file a service writes (or creates), not reads.
WRITES = {"--ready-file", "--audit-log", "--report", "--data-dir", "--rpc-error-log"}
# Read if present, written later by someone else (the chaos backend writes the clock-skew file).
OPTIONAL = {"--clock-skew-file"}
# Conditions docker-compose 1.29 knows (compose/config/compose_spec.json of 1.29.2).
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any) -> Any:
    """Compose's variable substitution with every variable unset: `${X:-default}` -> default."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else (m.group(2) or ""), value)
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(interpolate(yaml.safe_load(COMPOSE_FILE.read_text())))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


@pytest.fixture(scope="module")
def volume(services: dict[str, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the certs service leaves in the volume: its own command, run with /var/lib/kse -> tmp."""
    root = tmp_path_factory.mktemp("volume")
    argv = [_to_tmp(a, root) for a in services["certs"]["command"]]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = kse_main.main(argv)
    assert code == 0, f"the certs service's command failed: {argv}\n{out.getvalue()}"
    # Run twice, as `docker compose up` after a `down` (volume kept) does: it must be idempotent.
    ca_before = (root / "pki" / "ca.crt").read_bytes()
    with contextlib.redirect_stdout(out):
        assert kse_main.main(argv) == 0, out.getvalue()
    assert (root / "pki" / "ca.crt").read_bytes() == ca_before, "a second run replaced the CA"
    return root


def _to_tmp(arg: str, root: Path) -> str:
    return arg.replace(VOLUME, str(root)) if VOLUME in arg else arg


def _in_volume(path: str, root: Path) -> Path:
    assert path.startswith(VOLUME + "/") or path == VOLUME, path
    return root / Path(path).relative_to(VOLUME)


def parse_kse(argv: list[str]) -> argparse.Namespace:
    """Parse `kse ARGV` with the parser the subcommand really uses (parse only, nothing runs)."""
    argv = list(argv)
    assert argv, "empty command"
    if argv[0] in kse_main.COMPONENTS:
        module = kse_main.COMPONENTS[argv[0]].module()
        parser = module.build_parser()
        rest = argv[1:]
    else:
        parser = kse_main.build_parser()
        rest = argv
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(rest)
    except SystemExit:
        pytest.fail(f"`kse {' '.join(argv)}` does not parse:\n{err.getvalue()}")


def flag_values(argv: list[str]) -> Iterator[tuple[str, str]]:
    """(flag, value) pairs of `--flag value` and `--flag=value` forms."""
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        if "=" in arg:
            flag, value = arg.split("=", 1)
            yield flag, value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            yield arg, argv[i + 1]


def sans(cert_file: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {*ext.get_values_for_type(x509.DNSName), *map(str, ext.get_values_for_type(x509.IPAddress))}


# ---------------------------------------------------------------------------------------------- tests


def test_dockerfile_base_image_is_a_build_argument_defaulting_to_python_slim() -> None:
    text = DOCKERFILE.read_text()
    args = re.findall(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", text, re.M)
    assert args == ["python:3.11-slim"], args
    assert re.search(r"^FROM \$\{BASE_IMAGE\}", text, re.M)
    assert re.search(r'^ENTRYPOINT \["kse"\]\s*$', text, re.M), "the services' commands are kse arguments"


def test_the_topology_has_every_service(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == SERVICES
    for name, svc in services.items():
        assert "entrypoint" not in svc, f"{name}: overrides the image's `kse` entrypoint"
        assert any(str(v).endswith(f":{VOLUME}") for v in svc.get("volumes", [])), f"{name}: no {VOLUME}"
    assert services["chaos"].get("profiles") == ["chaos"], "chaos must not start with a plain `up`"
    assert "/var/run/docker.sock:/var/run/docker.sock" in services["chaos"]["volumes"]
    assert all("profiles" not in s for n, s in services.items() if n != "chaos")


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_each_command_is_a_kse_subcommand_whose_flags_parse(
    name: str, services: dict[str, dict[str, Any]]
) -> None:
    argv = [str(a) for a in services[name]["command"]]
    parse_kse(argv)


def test_healthchecks_parse_and_dependencies_wait_for_them(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        test = (svc.get("healthcheck") or {}).get("test")
        if test and test[:2] == ["CMD", "kse"]:
            parse_kse([str(a) for a in test[2:]])
        for dep, spec in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            condition = spec["condition"]
            assert condition in CONDITIONS, f"{name} -> {dep}: {condition}"
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), (
                    f"{name} waits for {dep} to be healthy: no healthcheck"
                )
            if condition == "service_completed_successfully":
                assert services[dep].get("restart") == "no", f"{dep} is a one-shot: restart must be 'no'"
    # The order `kse up` starts things in.
    assert services["apiserver"]["depends_on"].keys() >= {"certs", "etcd-1", "etcd-2", "etcd-3"}
    for i in (1, 2, 3):
        assert services[f"etcd-{i}"]["depends_on"]["certs"]["condition"] == "service_completed_successfully"
        assert services[f"scheduler-{i}"]["depends_on"]["apiserver"]["condition"] == "service_healthy"
        assert services["workload"]["depends_on"][f"scheduler-{i}"]["condition"] == "service_healthy"


def test_every_file_a_service_reads_is_written_by_the_certs_service(
    services: dict[str, dict[str, Any]], volume: Path
) -> None:
    checked = 0
    for name, svc in services.items():
        argvs = [[str(a) for a in svc["command"]]]
        test = (svc.get("healthcheck") or {}).get("test")
        if test:
            argvs.append([str(a) for a in test[1:]])
        for argv in argvs:
            for flag, value in flag_values(argv):
                if not value.startswith(VOLUME) or flag in WRITES or flag in OPTIONAL:
                    continue
                path = _in_volume(value, volume)
                assert path.exists(), f"{name}: {flag} {value}: the certs service does not write it"
                checked += 1
                if flag in ("--connection-file", "--kubeconfig"):
                    conn = ConnectionFile.load(path)
                    for f in (conn.ca_file, conn.cert_file, conn.key_file):
                        assert f.is_file(), f"{name}: {value} names {f}, which does not exist"
                if flag == "--pki-dir" and argv[0] == "etcd-member":
                    assert not MemberTLS.from_pki_dir(path).missing(), f"{name}: etcd TLS files missing"
                if flag == "--attach":
                    assert (path / "run" / "cluster.json").is_file(), "chaos --attach needs run/cluster.json"
                    assert (path / "config.json").is_file()
    assert checked >= 20, f"only {checked} file reads found: has the compose file changed shape?"


def test_every_client_reaches_the_api_server_by_a_name_its_certificate_carries(
    services: dict[str, dict[str, Any]], volume: Path
) -> None:
    listen = dict(flag_values([str(a) for a in services["apiserver"]["command"]]))["--listen"]
    port = listen.rpartition(":")[2]
    api_sans = sans(volume / "pki" / "apiserver.crt")
    for conn_file in [volume / "config.json", *sorted((volume / "connections").glob("*.json"))]:
        conn = ConnectionFile.load(conn_file)
        host, _, conn_port = conn.server.rpartition(":")
        assert host in services, f"{conn_file.name}: {conn.server} is not a compose service"
        assert host == "apiserver" and conn_port == port, f"{conn_file.name}: {conn.server}"
        assert conn.tls_server_name in api_sans, f"{conn_file.name}: {conn.tls_server_name} not in {api_sans}"
    # Each scheduler replica and client has its own connection file (its own identity).
    for name in ("scheduler-1", "scheduler-2", "scheduler-3", "nodesim", "workload"):
        args = dict(flag_values([str(a) for a in services[name]["command"]]))
        assert args["--connection-file"] == f"{VOLUME}/connections/{name}.json", name


def test_etcd_runs_over_tls_with_names_the_serving_certificate_carries(
    services: dict[str, dict[str, Any]], volume: Path
) -> None:
    etcd_sans = sans(volume / "pki" / "etcd-server.crt")
    api = dict(flag_values([str(a) for a in services["apiserver"]["command"]]))
    for endpoint in api["--etcd-endpoints"].split(","):
        assert endpoint.startswith("https://"), endpoint
        assert endpoint[len("https://") :].rpartition(":")[0] in etcd_sans, endpoint
    for i in (1, 2, 3):
        argv = [str(a) for a in services[f"etcd-{i}"]["command"]]
        ns = parse_kse(argv)
        assert ns.name == f"etcd-{i}" and ns.pki_dir is not None, "a member without TLS"
        for member, url in parse_initial_cluster(ns.initial_cluster).items():
            assert member in services and url.startswith("https://"), url
            assert member in etcd_sans, f"{member} is not in the etcd serving certificate's SANs"


def test_the_chaos_service_attaches_with_the_docker_backend(services: dict[str, dict[str, Any]]) -> None:
    ns = parse_kse([str(a) for a in services["chaos"]["command"]])
    assert str(ns.attach) == VOLUME
    assert ns.backend == "docker"
    assert str(ns.report).startswith(f"{VOLUME}/")


def test_run_files_are_where_the_chaos_side_looks_for_them(services: dict[str, dict[str, Any]]) -> None:
    from chaos.docker_backend import DEFAULT_DATA_DIR, DockerBackend

    backend = DockerBackend(project="contract")
    assert str(DEFAULT_DATA_DIR) == VOLUME
    certs = dict(flag_values([str(a) for a in services["certs"]["command"]]))
    for name in ("scheduler-1", "scheduler-2", "scheduler-3", "nodesim", "workload"):
        args = dict(flag_values([str(a) for a in services[name]["command"]]))
        # The client name in the RPC error records is the stem after `rpc-errors-` (contract A).
        assert args.get("--rpc-error-log") == f"{VOLUME}/run/rpc-errors-{name}.jsonl", name
        if name.startswith("scheduler-"):
            # The docker backend writes clock skew here (contract C), on the shared volume.
            assert args["--clock-skew-file"] == f"{backend.container_run_dir}/clock-skew-{name}.json"
            # run/cluster.json records the lease duration the replicas really use.
            assert args["--leader-elect-lease-duration"] == certs["--lease-duration"]
            assert services[name].get("hostname") == name, "identity <hostname>_<uuid> names the replica"


def test_the_http_api_is_published_and_the_certs_service_writes_a_kubeconfig_for_it(
    services: dict[str, dict[str, Any]], volume: Path
) -> None:
    from urllib.parse import urlsplit

    api = dict(flag_values([str(a) for a in services["apiserver"]["command"]]))
    host, _, http_port = api["--http-listen"].rpartition(":")
    assert host == "0.0.0.0", "the HTTP API must listen beyond the container's loopback to be published"
    assert http_port != api["--listen"].rpartition(":")[2], "gRPC and HTTP cannot share a port"
    published = {str(p).rpartition(":")[2]: str(p).rpartition(":")[0] for p in services["apiserver"]["ports"]}
    assert http_port in published, f"the HTTP port {http_port} is not published: {published}"
    host_side = published[http_port]  # "127.0.0.1:6444" with the defaults
    kubeconfig = volume / "kubeconfig"
    assert kubeconfig.is_file(), "the certs service writes no kubeconfig"
    cfg = yaml.safe_load(kubeconfig.read_text())
    (cluster,) = cfg["clusters"]
    url = urlsplit(cluster["cluster"]["server"])
    assert url.scheme == "https" and str(url.port) == host_side.rpartition(":")[2], (url, host_side)
    api_sans = sans(volume / "pki" / "apiserver.crt")
    assert url.hostname in api_sans, f"{url.hostname} is not in the serving certificate's SANs {api_sans}"
    assert cluster["cluster"].get("tls-server-name", url.hostname) in api_sans
    # Paths relative to the kubeconfig: a copy of kubeconfig + pki/ out of the volume works anywhere.
    (user,) = cfg["users"]
    assert user["name"] == "kse:admin"
    for path in (
        cluster["cluster"]["certificate-authority"],
        user["user"]["client-certificate"],
        user["user"]["client-key"],
    ):
        assert not Path(path).is_absolute() and VOLUME not in path, path
        assert (kubeconfig.parent / path).is_file(), f"the kubeconfig names {path}, which is not written"
    attach = yaml.safe_load((volume / "run" / "cluster.json").read_text())
    assert Path(attach["kubeconfig"]).name == "kubeconfig"
