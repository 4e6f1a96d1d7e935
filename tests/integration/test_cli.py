"""`kse apply | get | delete` end to end: the real `kse` command against a real API server.

Each test writes a connection file for an identity of the session PKI and runs `python -m kse ...`
as a subprocess, so argument parsing, output, exit codes and "never a traceback" are all checked as
a user sees them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kse.client.clientset import Clientset
from kse.config import ConnectionFile
from proto import kse_pb2 as pb
from tests.fixtures.apiserver import ApiServer

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "k8s-examples"
POD_NGINX = EXAMPLES / "pods" / "pod-nginx.yaml"
DEADLINE = 20.0


@dataclass
class Result:
    code: int
    out: str
    err: str


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("KSE_CONFIG", None)
    return env


async def kse(*args: str, stdin: str | None = None) -> Result:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kse",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
        env=_env(),
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    result = Result(proc.returncode or 0, out.decode(), err.decode())
    assert "Traceback" not in result.err, result.err
    return result


@pytest.fixture
def config(apiserver: ApiServer, tmp_path: Path) -> str:
    path = tmp_path / "admin.json"
    apiserver.connection("admin").save(path)
    return str(path)


def nginx_manifest() -> Path:
    if not POD_NGINX.is_file():
        pytest.skip(f"the shared Kubernetes examples are absent ({POD_NGINX})")
    return POD_NGINX


async def test_apply_get_delete_a_real_pod_manifest(config: str, tmp_path: Path) -> None:
    manifest = nginx_manifest()

    r = await kse("apply", "-f", str(manifest), "--config", config)
    assert (r.code, r.out) == (0, "pod/nginx created\n"), r.err
    r = await kse("apply", "-f", str(manifest), "--config", config)
    assert (r.code, r.out) == (0, "pod/nginx unchanged\n"), r.err

    changed = tmp_path / "pod-nginx.yaml"
    changed.write_text(manifest.read_text().replace('env: "test"', 'env: "prod"'))
    r = await kse("apply", "-f", str(changed), "--config", config)
    assert (r.code, r.out) == (0, "pod/nginx configured\n"), r.err

    r = await kse("get", "pods", "--config", config)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split()[:2] == ["nginx", "0/1"]

    r = await kse("get", "pods", "-o", "yaml", "--config", config)
    assert r.code == 0, r.err
    listed = yaml.safe_load(r.out)
    assert listed["kind"] == "List"
    [item] = listed["items"]
    assert item["kind"] == "Pod"
    assert item["metadata"]["name"] == "nginx"
    assert item["metadata"]["labels"] == {"env": "prod"}
    assert item["spec"]["nodeSelector"] == {"disktype": "ssd"}
    assert item["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"

    r = await kse("get", "pod", "nginx", "-o", "json", "--config", config)
    assert json.loads(r.out)["metadata"]["uid"] == item["metadata"]["uid"]
    r = await kse("get", "po", "-o", "name", "--config", config)
    assert r.out == "pod/nginx\n"
    r = await kse("get", "pods", "-o", "wide", "--config", config)
    assert r.out.splitlines()[1].split()[5:] == ["<none>", "<none>", "<none>"]

    r = await kse("delete", "pod", "nginx", "--config", config)
    assert (r.code, r.out) == (0, 'pod "nginx" deleted\n'), r.err
    r = await kse("get", "pod", "nginx", "--config", config)
    assert r.code == 1
    assert r.err.strip() == 'Error from server (NotFound): pods "nginx" not found'
    r = await kse("get", "pods", "--config", config)
    assert (r.code, r.out, r.err.strip()) == (0, "", "No resources found in default namespace.")


async def test_apply_multi_document_stdin_continues_past_an_unsupported_kind(config: str) -> None:
    stream = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000000
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: 2
---
apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: team
spec:
  containers:
  - name: c
    image: nginx
"""
    r = await kse("apply", "-f", "-", "--config", config, stdin=stream)
    assert r.code == 1
    assert r.out.splitlines() == ["priorityclass.scheduling.k8s.io/high created", "pod/p1 created"]
    assert "document 2" in r.err and "StatefulSet" in r.err
    r = await kse("get", "pods", "-A", "--config", config)
    assert r.out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert r.out.splitlines()[1].split()[:2] == ["team", "p1"]
    r = await kse("get", "priorityclasses", "--config", config)
    assert r.out.splitlines()[1].split()[:3] == ["high", "1000000", "false"]


async def test_apply_and_delete_a_directory(config: str, tmp_path: Path) -> None:
    d = tmp_path / "manifests"
    d.mkdir()
    for name in ("a", "b"):
        (d / f"{name}.yaml").write_text(
            f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {name}}}\n"
            "spec:\n  containers:\n  - name: c\n    image: nginx\n"
        )
    (d / "notes.txt").write_text("not a manifest")
    r = await kse("apply", "-f", str(d), "--config", config)
    assert (r.code, r.out.splitlines()) == (0, ["pod/a created", "pod/b created"]), r.err
    r = await kse("get", "pods", "-l", "app=b", "-o", "name", "--config", config)
    assert r.out == "pod/b\n"
    r = await kse("get", "pods", "--field-selector", "metadata.name=a", "-o", "name", "--config", config)
    assert r.out == "pod/a\n"
    r = await kse("delete", "-f", str(d), "--config", config)
    assert (r.code, r.out.splitlines()) == (0, ['pod "a" deleted', 'pod "b" deleted']), r.err
    r = await kse("delete", "-f", str(d), "--config", config)
    assert r.code == 1
    assert 'Error from server (NotFound): error when deleting "' in r.err
    r = await kse("delete", "-f", str(d), "--ignore-not-found", "--config", config)
    assert (r.code, r.out, r.err) == (0, "", "")


async def test_errors_print_the_servers_message_and_exit_1(
    apiserver: ApiServer, config: str, tmp_path: Path
) -> None:
    workload = tmp_path / "workload.json"
    apiserver.connection("workload").save(workload)
    r = await kse("delete", "node", "n1", "--config", str(workload))
    assert r.code == 1
    assert r.err.startswith("Error from server (Forbidden): ")

    bad = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: empty\nspec:\n  containers: []\n"
    r = await kse("apply", "-f", "-", "--config", config, stdin=bad)
    assert r.code == 1
    assert r.err.startswith('Error from server (Invalid): error when creating "STDIN": ')

    r = await kse("get", "widgets", "--config", config)
    assert (r.code, r.err.strip()) == (1, 'error: the server doesn\'t have a resource type "widgets"')

    r = await kse("get", "pods", "--config", str(tmp_path / "missing.json"))
    assert r.code == 1
    assert r.err.startswith("error: connection file ") and "does not exist" in r.err

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    conn = ConnectionFile.load(config)
    down = tmp_path / "down.json"
    ConnectionFile(dead, conn.ca_file, conn.cert_file, conn.key_file).save(down)
    r = await kse("get", "pods", "--config", str(down), "--request-timeout", "1")
    assert r.code == 1
    assert r.err.startswith("Unable to connect to the server: ")


async def test_config_from_environment(apiserver: ApiServer, config: str) -> None:
    env_before = os.environ.get("KSE_CONFIG")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kse",
        "get",
        "nodes",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
        env={**_env(), "KSE_CONFIG": config},
    )
    _, err = await proc.communicate()
    assert proc.returncode == 0, err
    assert err.decode().strip() == "No resources found."
    assert os.environ.get("KSE_CONFIG") == env_before


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_get_watch_prints_rows_until_interrupted(apiserver: ApiServer, config: str) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    await cs.pods.create(
        pb.Pod(
            metadata=pb.ObjectMeta(name="pod-a", namespace="default"),
            spec=pb.PodSpec(containers=[pb.Container(name="c", image="i")]),
        )
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kse",
        "get",
        "pods",
        "-w",
        "--config",
        config,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO_ROOT,
        # A process that does not exit is told to abort, and faulthandler prints every thread.
        env={**_env(), "PYTHONFAULTHANDLER": "1"},
        # Ctrl-C at a terminal: SIGINT at its default. A shell without job control starts
        # background jobs (`nohup ... &`, some CI runners) with SIGINT ignored, and Python keeps an
        # inherited SIG_IGN, so without this the child would never see the signal.
        preexec_fn=_sigint_default,
    )
    assert proc.stdout is not None and proc.stderr is not None
    # Read stderr all along: a child blocked on a full stderr pipe would never exit.
    stderr = asyncio.create_task(proc.stderr.read())
    try:
        async with asyncio.timeout(DEADLINE):
            header = (await proc.stdout.readline()).decode()
            first = (await proc.stdout.readline()).decode()
        assert header.split()[:2] == ["NAME", "READY"]
        assert first.split()[0] == "pod-a"
        await cs.pods.create(
            pb.Pod(
                metadata=pb.ObjectMeta(name="pod-b", namespace="default"),
                spec=pb.PodSpec(containers=[pb.Container(name="c", image="i")]),
            )
        )
        async with asyncio.timeout(DEADLINE):
            second = (await proc.stdout.readline()).decode()
        assert second.split()[0] == "pod-b"
        # Rows printed later keep the table's column positions.
        assert second.index(second.split()[1]) == header.index("READY")
        await cs.pods.delete("default", "pod-a")
        async with asyncio.timeout(DEADLINE):
            gone = (await proc.stdout.readline()).decode()
        assert gone.split()[0] == "pod-a"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(DEADLINE):
                code = await proc.wait()
        except TimeoutError:
            proc.send_signal(signal.SIGABRT)
            await proc.wait()
            code = None
    err = (await stderr).decode()
    assert code is not None, f"no exit within {DEADLINE}s of SIGINT; its threads at SIGABRT:\n{err[-8000:]}"
    assert "Traceback" not in err, err
    assert code == 130


# ---------------------------------------------------------------- pure helpers (no server)


def test_split_documents_like_kubectl() -> None:
    from cli.resources_cmd import split_documents

    text = "a: 1\n---\n---\nb: 2\n--- # comment\nc: 3\n---x: not a separator\n"
    assert split_documents(text) == [(1, "a: 1\n"), (3, "b: 2\n"), (4, "c: 3\n---x: not a separator\n")]
    assert split_documents("---\nkind: Pod\n") == [(1, "kind: Pod\n")]
    assert split_documents("# only a comment\n---\n") == []


# ---------------------------------------------------------------- kubectl's apply, create, delete -l


def example(relative: str) -> Path:
    path = EXAMPLES / relative
    if not path.is_file():
        pytest.skip(f"the shared Kubernetes examples are absent ({path})")
    return path


async def test_apply_without_the_gates_ungates_the_pod_as_the_docs_show(
    apiserver: ApiServer, config: str
) -> None:
    # content/en/docs/concepts/scheduling-eviction/pod-scheduling-readiness.md, step by step.
    gated = example("pods/pod-with-scheduling-gates.yaml")
    ungated = example("pods/pod-without-scheduling-gates.yaml")
    r = await kse("apply", "-f", str(gated), "--config", config)
    assert (r.code, r.out, r.err) == (0, "pod/test-pod created\n", "")
    r = await kse("get", "pod", "test-pod", "--config", config)
    assert r.out.splitlines()[1].split()[:3] == ["test-pod", "0/1", "SchedulingGated"]
    r = await kse("get", "pod", "test-pod", "-o", "json", "--config", config)
    live = json.loads(r.out)
    last = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["schedulingGates"] == [{"name": "example.com/foo"}, {"name": "example.com/bar"}]
    assert last["metadata"] == {"annotations": {}, "name": "test-pod", "namespace": "default"}

    # Someone else labels the pod meanwhile: apply keeps what it never owned.
    cs = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    pod = await cs.pods.get_in("default", "test-pod")
    pod.metadata.labels["added-by"] = "someone-else"
    await cs.pods.update(pod)

    r = await kse("apply", "-f", str(ungated), "--config", config)
    assert (r.code, r.out, r.err) == (0, "pod/test-pod configured\n", "")
    r = await kse("get", "pod", "test-pod", "-o", "json", "--config", config)
    live = json.loads(r.out)
    assert "schedulingGates" not in live["spec"]
    assert live["metadata"]["labels"] == {"added-by": "someone-else"}
    pod = await cs.pods.get_in("default", "test-pod")
    assert not pod.spec.scheduling_gates
    r = await kse("apply", "-f", str(ungated), "--config", config)
    assert (r.code, r.out) == (0, "pod/test-pod unchanged\n"), r.err

    # Gates cannot be added back (the API server's rule): the error is the server's.
    r = await kse("apply", "-f", str(gated), "--config", config)
    assert r.code == 1
    assert r.err.startswith('Error from server (Invalid): error when applying patch "'), r.err


async def test_apply_over_an_object_not_created_by_apply_warns_and_patches_the_annotation(
    apiserver: ApiServer, config: str
) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0, burst=0)
    pod = pb.Pod(metadata=pb.ObjectMeta(name="web", namespace="default", labels={"keep": "me"}))
    pod.spec.containers.add(name="c", image="nginx:1")
    await cs.pods.create(pod)
    manifest = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web}}\n"
        "spec: {containers: [{name: c, image: 'nginx:1'}]}\n"
    )
    r = await kse("apply", "-f", "-", "--config", config, stdin=manifest)
    assert (r.code, r.out) == (0, "pod/web configured\n"), r.err
    assert r.err.startswith(
        "Warning: resource pods/web is missing the "
        "kubectl.kubernetes.io/last-applied-configuration annotation"
    )
    live = await cs.pods.get_in("default", "web")
    assert dict(live.metadata.labels) == {"keep": "me", "app": "web"}
    # Now it has the annotation: removing the label from the manifest removes it from the pod.
    unlabelled = manifest.replace("labels: {app: web}", "labels: {}")
    r = await kse("apply", "-f", "-", "--config", config, stdin=unlabelled)
    assert (r.code, r.out, r.err) == (0, "pod/web configured\n", "")
    live = await cs.pods.get_in("default", "web")
    assert dict(live.metadata.labels) == {"keep": "me"}


UNKNOWN_FIELD_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeSelecter:
    disktype: ssd
  containers:
  - name: c
    image: nginx
"""


async def test_unknown_fields_warn_by_default_refused_with_strict_silent_with_false(config: str) -> None:
    r = await kse("apply", "-f", "-", "--config", config, stdin=UNKNOWN_FIELD_POD.format(name="warned"))
    warning = 'Warning: unknown field "spec.nodeSelecter"\n'
    assert (r.code, r.out, r.err) == (0, "pod/warned created\n", warning)

    for flag in ("--validate=strict", "--validate=true", "--validate"):
        strict = UNKNOWN_FIELD_POD.format(name="strict")
        r = await kse("apply", "-f", "-", flag, "--config", config, stdin=strict)
        assert (r.code, r.out) == (1, ""), flag
        assert r.err.startswith(
            'error: error validating "STDIN": Pod "strict": strict decoding error: '
            'unknown field "spec.nodeSelecter"'
        ), r.err
    r = await kse("get", "pod", "strict", "--config", config)
    assert r.code == 1, "a refused object is not written"

    r = await kse(
        "create",
        "-f",
        "-",
        "--validate=false",
        "--config",
        config,
        stdin=UNKNOWN_FIELD_POD.format(name="ignored"),
    )
    assert (r.code, r.out, r.err) == (0, "pod/ignored created\n", "")
    r = await kse("apply", "-f", "-", "--validate=maybe", "--config", config, stdin="")
    assert r.code == 2 and 'invalid - validate option "maybe"' in r.err


async def test_create_honours_generate_name_and_refuses_an_existing_name(config: str) -> None:
    manifest = (
        "apiVersion: v1\nkind: Pod\nmetadata: {generateName: web-}\n"
        "spec: {containers: [{name: c, image: nginx}]}\n"
    )
    names = set()
    for _ in range(2):
        r = await kse("create", "-f", "-", "--config", config, stdin=manifest)
        assert r.code == 0, r.err
        [line] = r.out.splitlines()
        assert re.fullmatch(r"pod/web-[bcdfghjklmnpqrstvwxz2456789]{5} created", line), line
        names.add(line.split()[0])
    assert len(names) == 2

    named = manifest.replace("generateName: web-", "name: fixed")
    r = await kse("create", "-f", "-", "--save-config", "--config", config, stdin=named)
    assert (r.code, r.out) == (0, "pod/fixed created\n"), r.err
    r = await kse("create", "-f", "-", "--config", config, stdin=named)
    assert r.code == 1
    assert r.err.strip() == (
        'Error from server (AlreadyExists): error when creating "STDIN": pods "fixed" already exists'
    )
    # --save-config wrote the annotation: a later apply merges from it, without the warning.
    r = await kse("apply", "-f", "-", "--config", config, stdin=named)
    assert (r.code, r.out, r.err) == (0, "pod/fixed unchanged\n", "")


async def test_delete_by_label_selector_all_and_all_namespaces(config: str) -> None:
    pods = "".join(
        f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}, labels: {{app: {app}}}}}"
        "\nspec: {containers: [{name: c, image: nginx}]}\n"
        for name, ns, app in (
            ("a", "default", "web"),
            ("b", "default", "web"),
            ("c", "default", "db"),
            ("d", "team", "web"),
        )
    )
    r = await kse("apply", "-f", "-", "--config", config, stdin=pods)
    assert r.code == 0, r.err

    r = await kse("delete", "pods", "-l", "app=web", "--config", config)
    assert (r.code, r.out.splitlines()) == (0, ['pod "a" deleted', 'pod "b" deleted']), r.err
    r = await kse("delete", "pods", "-l", "app=web", "--config", config)
    assert (r.code, r.out) == (0, "No resources found\n"), r.err
    r = await kse("delete", "pods", "--all", "--config", config)
    assert (r.code, r.out) == (0, 'pod "c" deleted\n'), r.err
    r = await kse("get", "pods", "-A", "-o", "name", "--config", config)
    assert r.out == "pod/d\n"
    r = await kse("delete", "po", "--all", "-A", "--config", config)
    assert (r.code, r.out) == (0, 'pod "d" deleted\n'), r.err

    for args, message in (
        (("pods", "a", "-l", "app=web"), "error: name cannot be provided when a selector is specified"),
        (("pods", "--all", "-l", "app=web"), "error: cannot set --all and --selector at the same time"),
        (("pods", "a", "-A"), "error: a resource cannot be retrieved by name across all namespaces"),
    ):
        r = await kse("delete", *args, "--config", config)
        assert (r.code, r.err.strip()) == (1, message), args


async def test_a_kubeconfig_given_as_the_connection_file_is_named(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n")
    r = await kse("get", "pods", "--config", str(kubeconfig))
    assert r.code == 1
    assert r.err.strip() == (
        f"error: {kubeconfig} is a kubeconfig (for kubectl and the HTTP API); kse's own commands need a "
        "connection file such as ~/.kse/config.json (`kse up` writes one into its data dir)"
    )
