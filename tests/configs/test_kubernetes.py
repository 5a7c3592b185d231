"""configs/kubernetes/: the manifests' command lines with satind's parser, and how the
pieces fit (the Service's name and port are the seeds; the peers listen on every interface
and give the pod's IP; the grace period is longer than the drain; the probe is `satind ready`
with a certificate make-keys.sh issues). No cluster here:
`kubectl kustomize` (offline) renders the manifests where kubectl is installed, and the
structure is checked where a YAML parser is (satind has none and takes none on for this)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from satind.cli.daemon import start_config
from satind.net.transport import parse_address
from satind.ops.advertise import unspecified
from tests.configs.commands import CONFIGS, check, satind_commands, shell_commands

KUBE = CONFIGS / "kubernetes"
POD = "satind-0"
POD_IP = "10.244.1.7"


def manifests() -> dict[str, dict[str, Any]]:
    yaml = pytest.importorskip("yaml", reason="no YAML parser installed (satind needs none)")
    docs = list(yaml.safe_load_all((KUBE / "satind.yaml").read_text()))
    return {doc["kind"]: doc for doc in docs}


def pod(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = docs["StatefulSet"]["spec"]["template"]["spec"]
    return spec


def substitute(words: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(NAME) in a container's args, from its env."""
    out = []
    for word in words:
        for name, value in env.items():
            word = word.replace(f"$({name})", value)
        out.append(word)
    return out


def daemon(docs: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], Any]:
    (container,) = pod(docs)["containers"]
    env = {"POD_NAME": POD, "POD_IP": POD_IP}
    args = container["args"]
    assert args[0] == "satind"  # the image's entry point is tini, which runs it
    parsed = check(substitute(args[1:], env))
    assert parsed.command == "start"
    return container, parsed


def test_the_daemon_joins_through_the_headless_service() -> None:
    docs = manifests()
    service, statefulset = docs["Service"], docs["StatefulSet"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    _container, args = daemon(docs)
    cfg = start_config(args)
    (seed,) = cfg.daemon.seeds
    seed_address = parse_address(seed)
    assert seed_address.host == service["metadata"]["name"]
    assert seed_address.port == service["spec"]["ports"][0]["port"] == cfg.daemon.port
    assert cfg.daemon.name == POD


def test_the_peers_listen_on_every_interface_and_give_the_pods_ip() -> None:
    docs = manifests()
    container, args = daemon(docs)
    cfg = start_config(args)
    assert unspecified(cfg.daemon.host)
    assert container["args"][container["args"].index("--advertise") + 1] == "$(POD_IP)"
    assert cfg.daemon.advertise == POD_IP
    (pod_ip,) = [var for var in container["env"] if var["name"] == "POD_IP"]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # satind-start's variable would make it listen at one address instead.
    assert "SATIND_LISTEN" not in {var["name"] for var in container["env"]}


def test_every_variable_the_container_uses_is_defined_before() -> None:
    """Kubernetes expands $(NAME) only for a variable of the container's env defined earlier
    in the list (in args: anywhere in it); any other stays as written, and would reach satind
    as the text "$(POD_IP)"."""
    (container,) = pod(manifests())["containers"]
    defined: set[str] = set()
    for var in container["env"]:
        assert set(re.findall(r"\$\((\w+)\)", var.get("value", ""))) <= defined, var
        defined.add(var["name"])
    used = {name for word in container["args"] for name in re.findall(r"\$\((\w+)\)", word)}
    assert used and used <= defined


def test_the_grace_period_is_longer_than_the_drain() -> None:
    docs = manifests()
    _container, args = daemon(docs)
    cfg = start_config(args)
    assert cfg.daemon.on_sigterm == "drain"
    grace = pod(docs)["terminationGracePeriodSeconds"]
    assert grace > cfg.daemon.drain_deadline_s + cfg.daemon.cut_grace_s + 30


def test_every_peer_has_a_port_and_the_cpus_it_needs() -> None:
    docs = manifests()
    container, args = daemon(docs)
    ports = {p["containerPort"] for p in container["ports"]}
    cfg = start_config(args)
    assert ports == {cfg.daemon.port + i for i in range(cfg.daemon.peers)}
    assert int(container["resources"]["requests"]["cpu"]) == cfg.daemon.peers


def test_the_readiness_probe_is_satind_ready_with_the_probe_certificate() -> None:
    docs = manifests()
    container, start = daemon(docs)
    probe = container["readinessProbe"]
    command = probe["exec"]["command"]
    assert command[0] == "satind"
    args = check(command[1:])
    assert args.command == "ready" and args.as_name == "probe"
    assert args.peers == start.peers
    assert args.timeout < probe["timeoutSeconds"]  # it answers before the kubelet gives up
    env = {var["name"]: var.get("value") for var in container["env"]}
    assert env["SATIND_KEYS"] == start.keys
    cfg = start_config(start)
    assert env["SATIND_TO"] == f"$(POD_IP):{cfg.daemon.port}"  # peer 0, on the pod's address


def test_the_init_container_copies_the_pods_own_keys() -> None:
    docs = manifests()
    (init,) = pod(docs)["initContainers"]
    script = init["command"][2]
    (copy,) = [c for c in shell_commands(script) if c and c[0] == "install"]
    assert "0600" in copy and "10001" in copy
    listed = script.split(";")[0]
    for name in ("ca.pem", "$POD_NAME.pem", "$POD_NAME.key", "probe.pem", "probe.key"):
        assert name in listed
    (container,) = pod(docs)["containers"]
    assert container["securityContext"]["runAsUser"] == 10001


def test_the_state_volume_is_writable_by_the_daemons_user() -> None:
    """A new PersistentVolumeClaim's root belongs to root: without the pod's fsGroup the
    daemon (uid 10001) could not keep its run history there."""
    docs = manifests()
    (container,) = pod(docs)["containers"]
    user = container["securityContext"]["runAsUser"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["state"].startswith("/var/lib/satind")
    assert pod(docs)["securityContext"]["fsGroup"] == user


def test_make_keys_is_valid_shell_and_its_commands_are_accepted() -> None:
    script = KUBE / "make-keys.sh"
    proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    commands = satind_commands(script.read_text())
    assert [argv[:2] for argv in commands] == [
        ["keys", "init"],
        ["keys", "issue"],
        ["keys", "issue"],
    ]
    for argv in commands:
        check([word.replace("$", "") for word in argv])


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl here")
def test_make_keys_prints_a_secret_without_the_ca_key(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["sh", str(KUBE / "make-keys.sh"), str(tmp_path / "keys"), "2"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    files = {
        line.split(":")[0].strip()
        for line in proc.stdout.split("data:")[1].split("kind:")[0].splitlines()
        if line.strip()
    }
    assert files == {
        "ca.pem", "satind-0.pem", "satind-0.key", "satind-1.pem", "satind-1.key",
        "probe.pem", "probe.key",
    }  # fmt: skip
    assert "name: satind-keys" in proc.stdout
    # Again with one more replica: the first ones are kept, the new one added.
    before = (tmp_path / "keys" / "satind-0.pem").read_bytes()
    proc = subprocess.run(
        ["sh", str(KUBE / "make-keys.sh"), str(tmp_path / "keys"), "3"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "satind-2.key:" in proc.stdout
    assert (tmp_path / "keys" / "satind-0.pem").read_bytes() == before


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl here")
def test_kubectl_kustomize_renders_the_manifests() -> None:
    proc = subprocess.run(
        ["kubectl", "kustomize", str(KUBE)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    kinds = [line for line in proc.stdout.splitlines() if line.startswith("kind: ")]
    assert sorted(kinds) == ["kind: PodDisruptionBudget", "kind: Service", "kind: StatefulSet"]
