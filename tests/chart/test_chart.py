#!/usr/bin/env python3
"""Tests for the Helm chart in charts/ramjet and its Dockerfile.

Run through tests/chart/run.sh, which provides a virtualenv with
helm-python-sdk (Helm's own Go engine, offline) and kubernetes-validate.

For every value set in SCENARIOS the chart is rendered by Helm, linted
strictly by Helm, every rendered manifest is validated against the
Kubernetes 1.33 schemas in strict mode (unknown fields are errors), and
invariants that must hold for every value set are checked. Then specific
facts are asserted per value set, bad values are shown to fail the render
with a message, and the Dockerfile is checked against the chart. If a built
`ramjet` binary is found, every flag the chart passes is checked against its
--help.

Usage: test_chart.py [SUBSTRING]   (run only tests whose name contains it)
The last line is "chart: N passed, M failed[, K skipped]"; the exit status is
non-zero when anything failed.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import helm_python as helm
import kubernetes_validate.utils as kv
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ramjet"
KUBE_VERSION = "1.33.0"
RELEASE = "edge"
NAMESPACE = "ingress"
FULLNAME = "edge-ramjet"
DIGEST = "sha256:" + "0123456789abcdef" * 4

# Kinds that have no schema in kubernetes-validate (CRDs). They are skipped by
# the schema validation on purpose, and checked by hand in test_servicemonitor.
NO_SCHEMA = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule"),
             ("security-profiles-operator.x-k8s.io/v1beta1", "SeccompProfile"),
             ("gateway.networking.k8s.io/v1", "GatewayClass")}

NAMESPACED_KINDS = {
    "Deployment", "DaemonSet", "Service", "ServiceAccount", "Role",
    "RoleBinding", "PodDisruptionBudget", "ServiceMonitor", "ConfigMap", "PrometheusRule", "Secret",
    "HorizontalPodAutoscaler", "SeccompProfile", "NetworkPolicy",
}

SCENARIOS: dict[str, dict] = {
    "default": {},
    "daemonset": {
        "controller": {
            "kind": "DaemonSet",
            "hostNetwork": True,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "nodeSelector": {"node-role.kubernetes.io/edge": ""},
            "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}],
            "podDisruptionBudget": {"enabled": True, "minAvailable": "", "maxUnavailable": "50%"},
        }
    },
    "admin-token": {
        "controller": {
            "adminToken": {"secretName": "ramjet-admin"},
            "defaultCertificate": {"secretName": "fallback-tls"},
        }
    },
    "digest": {"image": {"repository": "registry.example.com/ramjet", "tag": "1.2.3", "digest": DIGEST}},
    "service-monitor": {
        "metrics": {"serviceMonitor": {"enabled": True, "additionalLabels": {"release": "prometheus"},
                                       "interval": "15s"}}
    },
    "observability": {
        "metrics": {"grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "Ingress"}},
                    "prometheusRule": {"enabled": True, "additionalLabels": {"release": "prometheus"},
                                       "serverErrorRatio": 0.02, "pinnedFor": "2h"}}
    },
    "access-template": {
        "controller": {"accessLog": {"format": "nginx-upstream", "escape": "json",
                                     "template": "{\"a\":\"$http_x_a\", \"s\":\"$status\"}"}}
    },
    "tracing": {
        "controller": {"tracing": {"otlpEndpoint": "http://otel-collector.observability:4318", "sampleRatio": 0.25,
                                   "parentBased": False, "operationName": "HTTP $request_method $uri"}}
    },
    "config": {
        "controller": {"config": {"enabled": True, "data": {"hsts-max-age": 600, "ssl-redirect": "false",
                                                             "proxy-body-size": "8m"}}}
    },
    "config-existing": {"controller": {"config": {"existingConfigMap": "ingress-nginx-controller"}}},
    "admission": {"admissionPolicy": {"enabled": True, "validationActions": ["Deny", "Audit"]},
                  "ingressClass": {"name": "edge"}},
    "status-codes": {
        "metrics": {"statusCodes": True, "prometheusRule": {"enabled": True}}
    },
    "default-class": {"ingressClass": {"default": True}},
    "gateway-class": {"gatewayAPI": {"gatewayClass": {"create": True, "name": "edge"}, "controllerName": "example.com/gw"}},
    "no-gateway-api": {"gatewayAPI": {"enabled": False}},
    "watch-namespace": {
        "controller": {
            "watchNamespace": "apps",
            "auditWebhook": "http://audit.apps.svc:8080/ramjet",
            "workers": 4,
            "historySize": 25,
            "logFormat": "json",
            "extraArgs": ["--kubeconfig=/etc/ramjet/kubeconfig"],
        }
    },
    "pdb": {"controller": {"podDisruptionBudget": {"enabled": True}}},
    "single": {"controller": {"replicaCount": 1}},
    "no-admin-token": {"controller": {"adminToken": {"generate": False}}},
    "network-policy": {"networkPolicy": {"enabled": True, "adminFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}},
    "network-policy-metrics": {"networkPolicy": {"enabled": True, "metricsFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}},
    "seccomp-operator": {"controller": {"seccompOperator": {"enabled": True}, "ioDriver": "io-uring"}},
    "no-pdb": {"controller": {"podDisruptionBudget": {"enabled": False}}},
    "hpa": {"controller": {"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 12,
                                           "targetCPUUtilizationPercentage": 60}}},
    "slow-lb": {"controller": {"shutdownDelay": "20s", "terminationGracePeriodSeconds": 70,
                               "auditEvents": "leader"}},
    "client-address": {
        "controller": {
            "clientAddress": {
                "proxyProtocol": {"http": True, "https": True, "timeout": "3s"},
                "trustedProxies": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"],
                "forwardedForHeader": "X-Real-IP",
                "computeFullForwardedFor": True,
            },
            "service": {"annotations": {"service.beta.kubernetes.io/aws-load-balancer-proxy-protocol": "*"}},
        }
    },
    "proxy-protocol-https": {"controller": {"clientAddress": {"proxyProtocol": {"https": True}}}},
    "low-ports": {"controller": {"containerPorts": {"http": 80, "https": 443}}},
    "tcp-ports": {"controller": {"service": {"type": "NodePort", "tcpPorts": [
        {"port": 5432}, {"port": 6379, "name": "redis", "nodePort": 30379}]}}, "networkPolicy": {"enabled": True}},
    "restricted": {"controller": {"seccompProfile": {"type": "RuntimeDefault"}, "ioDriver": "auto"}},
    "localhost-seccomp": {
        "controller": {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/ramjet.json"}}
    },
    "nodeport": {
        "controller": {"service": {"type": "NodePort", "nodePorts": {"http": 30080, "https": 30443},
                                   "externalTrafficPolicy": "Local"}}
    },
    "clusterip": {
        "controller": {"service": {"type": "ClusterIP", "nodePorts": {"http": 30080},
                                   "externalTrafficPolicy": "Local"}}
    },
    "no-service": {
        "controller": {"service": {"enabled": False}, "publishAddress": "203.0.113.10"},
        "metrics": {"enabled": False},
        "fleet": {"enabled": False},
    },
    "external-rbac": {
        "rbac": {"create": False},
        "serviceAccount": {"create": False, "name": "ramjet-managed"},
        "ingressClass": {"create": False},
    },
    "everything": {
        "fullnameOverride": "edge-proxy",
        "imagePullSecrets": [{"name": "regcred"}],
        "controller": {
            "replicaCount": 3,
            "electionID": "edge-proxy-lock",
            "resources": {"requests": {"cpu": "2", "memory": "256Mi"},
                          "limits": {"cpu": "4", "memory": "1Gi"}},
            "workers": 4,
            "accessLog": {"destination": "/var/log/ramjet/access.log", "format": "text",
                          "skipPaths": ["/healthz", "/readyz"], "errorsOnly": True, "successSample": 0.25},
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "ramjet"}}}}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                           "whenUnsatisfiable": "ScheduleAnyway",
                                           "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "ramjet"}}}],
            "priorityClassName": "system-cluster-critical",
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
            "extraEnv": [{"name": "RUST_LOG", "value": "info"}],
            "podAnnotations": {"example.com/team": "edge"},
            "podLabels": {"example.com/tier": "edge"},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "minReadySeconds": 5,
            "publishService": {"pathOverride": "edge/public-lb"},
            "service": {"loadBalancerClass": "example.com/lb", "loadBalancerSourceRanges": ["198.51.100.0/24"],
                        "annotations": {"example.com/lb-type": "nlb"}, "labels": {"exposed": "yes"}},
            "podDisruptionBudget": {"enabled": True, "minAvailable": 2},
        },
        "serviceAccount": {"annotations": {"example.com/role": "edge"}},
        "metrics": {"scrapeAnnotations": False, "serviceMonitor": {"enabled": True, "namespace": "monitoring"}},
    },
}

# Values that must fail, with a piece of the message that says why: first the
# values.schema.json message (what `helm install` shows), then the template's
# own guard (what shows when schema validation is skipped); None where only
# the schema can catch it.
BAD_VALUES: dict[str, tuple[dict, str, str | None]] = {
    "https-audit-webhook": ({"controller": {"auditWebhook": "https://audit.example/x"}},
                            "/controller/auditWebhook", "must be an http:// URL"),
    "bad-digest": ({"image": {"digest": "latest"}}, "/image/digest", "image.digest must look like"),
    "short-digest": ({"image": {"digest": "sha256:abc"}}, "/image/digest", "image.digest must look like"),
    "bad-kind": ({"controller": {"kind": "StatefulSet"}}, "/controller/kind", "controller.kind must be"),
    "hpa-on-daemonset": ({"controller": {"kind": "DaemonSet", "autoscaling": {"enabled": True}}}, None,
                         "controller.autoscaling needs controller.kind Deployment"),
    "hpa-min-over-max": ({"controller": {"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}},
                         None, "minReplicas must not exceed maxReplicas"),
    "bad-shutdown-delay": ({"controller": {"shutdownDelay": "5 seconds"}}, "/controller/shutdownDelay", None),
    "bad-io-driver": ({"controller": {"ioDriver": "epoll"}}, "/controller/ioDriver",
                      "controller.ioDriver must be"),
    "bad-log-format": ({"controller": {"logFormat": "yaml"}}, "/controller/logFormat",
                       "controller.logFormat must be"),
    "zero-history": ({"controller": {"historySize": 0}}, "/controller/historySize",
                     "controller.historySize must be"),
    "negative-workers": ({"controller": {"workers": -1}}, "/controller/workers", "controller.workers must be"),
    "port-out-of-range": ({"controller": {"containerPorts": {"http": 70000}}},
                          "/controller/containerPorts/http", "controller.containerPorts.http must be"),
    "servicemonitor-without-metrics": ({"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}},
                                       None, "metrics.serviceMonitor.enabled needs metrics.enabled"),
    "misspelt-key": ({"controller": {"adminTokens": {"secretName": "x"}}}, "adminTokens", None),
    "bad-seccomp-type": ({"controller": {"seccompProfile": {"type": "Disabled"}}},
                         "/controller/seccompProfile/type", None),
    "bad-duration": ({"controller": {"drainTimeout": "30 seconds"}}, "/controller/drainTimeout", None),
    "bad-forwarded-for-header": ({"controller": {"clientAddress": {"forwardedForHeader": "X Forwarded For"}}},
                                 "/controller/clientAddress/forwardedForHeader",
                                 "controller.clientAddress.forwardedForHeader must be"),
    "bad-trusted-proxy": ({"controller": {"clientAddress": {"trustedProxies": ["proxy.example.com"]}}},
                          "/controller/clientAddress/trustedProxies/0", None),
    "bad-access-log-format": ({"controller": {"accessLog": {"format": "csv"}}}, "/controller/accessLog/format",
                              "controller.accessLog.format must be"),
    "bad-access-log-sample": ({"controller": {"accessLog": {"successSample": 2}}},
                              "/controller/accessLog/successSample", "controller.accessLog.successSample must be"),
}


# --------------------------------------------------------------------------- helpers

def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


_CHART: helm.Chart | None = None
_RENDERED: dict[str, dict[str, str]] = {}


def chart() -> helm.Chart:
    global _CHART
    if _CHART is None:
        _CHART = helm.Chart.load(str(CHART))
    return _CHART


def render_raw(values: dict | None) -> dict[str, str]:
    return chart().render(values or None, name=RELEASE, namespace=NAMESPACE,
                          is_install=True)


def rendered(scenario: str) -> dict[str, str]:
    if scenario not in _RENDERED:
        _RENDERED[scenario] = render_raw(SCENARIOS[scenario])
    return _RENDERED[scenario]


def docs(scenario: str) -> list[dict]:
    out = []
    for path, text in sorted(rendered(scenario).items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc.setdefault("_source", path)
                out.append(doc)
    return out


def clean(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "_source"}


def find(scenario: str, kind: str, name: str | None = None) -> list[dict]:
    return [d for d in docs(scenario)
            if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(scenario: str, kind: str, name: str | None = None) -> dict:
    found = find(scenario, kind, name)
    assert len(found) == 1, f"{scenario}: expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def workload(scenario: str) -> dict:
    found = [d for d in docs(scenario) if d["kind"] in ("Deployment", "DaemonSet")]
    assert len(found) == 1, f"{scenario}: expected one workload, found {[d['kind'] for d in found]}"
    return found[0]


def container(scenario: str) -> dict:
    cs = workload(scenario)["spec"]["template"]["spec"]["containers"]
    assert len(cs) == 1 and cs[0]["name"] == "ramjet", cs
    return cs[0]


def args(scenario: str) -> list[str]:
    return container(scenario)["args"]


def flag(scenario: str, name: str) -> str | None:
    """The value of --name=VALUE in the args, None when absent; fails if given twice."""
    vals = [a.split("=", 1)[1] for a in args(scenario) if a.startswith(f"--{name}=")]
    assert len(vals) <= 1, f"--{name} given {len(vals)} times: {args(scenario)}"
    return vals[0] if vals else None


def notes(scenario: str) -> str:
    return next(v for k, v in rendered(scenario).items() if k.endswith("NOTES.txt"))


def rules_grant(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", [])
               and verb in r.get("verbs", []) and not r.get("resourceNames") for r in rules)


# --------------------------------------------------------------------------- per-scenario checks

def check_renders(s: str) -> None:
    out = rendered(s)
    assert any(k.endswith("NOTES.txt") for k in out), "no NOTES.txt rendered"
    assert docs(s), "nothing rendered"


def check_lint(s: str) -> None:
    report = helm.lint(str(CHART), SCENARIOS[s] or None, strict=True, namespace=NAMESPACE,
                       kube_version="v" + KUBE_VERSION)
    assert report["total_charts_linted"] == 1, report
    assert not report["errors"], f"lint errors: {report['errors']}"
    bad = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error
    assert not bad, f"lint findings (strict): {bad}"


def check_schemas(s: str) -> None:
    validated = 0
    for d in docs(s):
        key = (d["apiVersion"], d["kind"])
        if key in NO_SCHEMA:
            continue  # a CRD: no schema to validate against; see test_servicemonitor
        try:
            kv.validate(clean(d), KUBE_VERSION, strict=True)
        except kv.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            raise AssertionError(f"{d['_source']}: {d['kind']}/{d['metadata']['name']}: {path}: {e.message}")
        except kv.SchemaNotFoundError as e:
            raise AssertionError(f"{d['_source']}: {e.message} (not a known CRD either)")
        validated += 1
    assert validated >= 3, f"only {validated} manifests validated"


def check_invariants(s: str) -> None:
    values = chart().merge_values(SCENARIOS[s])
    all_docs = docs(s)
    # Names and namespaces.
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in all_docs]
    assert len(names) == len(set(names)), f"duplicate objects: {names}"
    for d in all_docs:
        md = d["metadata"]
        if d["kind"] in NAMESPACED_KINDS:
            assert md.get("namespace"), f"{d['kind']}/{md['name']} has no namespace"
        else:
            assert "namespace" not in md, f"cluster-scoped {d['kind']}/{md['name']} has a namespace"
        assert len(md["name"]) <= 63, md["name"]
        assert md["labels"]["app.kubernetes.io/managed-by"] == "Helm"

    w = workload(s)
    pod = w["spec"]["template"]
    c = container(s)
    # The selector picks the pods, and Services pick the pods.
    sel = w["spec"]["selector"]["matchLabels"]
    assert sel.items() <= pod["metadata"]["labels"].items(), (sel, pod["metadata"]["labels"])
    for svc in find(s, "Service"):
        assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        port_names = {p["name"] for p in c["ports"]}
        for p in svc["spec"]["ports"]:
            assert p["targetPort"] in port_names, f"{svc['metadata']['name']}: {p['targetPort']} not a container port"

    # Hardened security context, whatever the values.
    psc = pod["spec"]["securityContext"]
    csc = c["securityContext"]
    assert psc["runAsNonRoot"] is True and csc["runAsNonRoot"] is True
    assert psc["runAsUser"] == csc["runAsUser"] == values["controller"]["runAsUser"] != 0
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["privileged"] is False
    assert csc["capabilities"]["drop"] == ["ALL"]
    assert csc["capabilities"].get("add", []) in ([], ["NET_BIND_SERVICE"])
    if values["controller"]["seccompOperator"]["enabled"]:
        assert psc["seccompProfile"]["localhostProfile"].startswith("operator/")
    else:
        assert psc["seccompProfile"] == values["controller"]["seccompProfile"]

    # Image, probes, env.
    assert c["image"].startswith(values["image"]["repository"] + ":"), c["image"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    tcp = {p.get("name") or f"tcp-{p['port']}": int(p["port"]) for p in values["controller"]["service"]["tcpPorts"]}
    assert ports == {k: int(v) for k, v in values["controller"]["containerPorts"].items()} | tcp
    # Probes on the read-only listener, which serves nothing else that matters.
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    env = {e["name"]: e for e in c["env"]}
    assert env["RAMJET_POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"

    # Args: every item one --flag=value, listeners on the container ports.
    a = c["args"]
    assert all(x.startswith("--") for x in a), a
    for name, port in ports.items():
        if name not in tcp:  # TCP routes' ports are opened by the routes, not by a flag
            assert flag(s, f"{name}-addr").endswith(f":{port}"), (name, a)
    assert flag(s, "ingress-class") == values["ingressClass"]["name"]
    assert flag(s, "controller-name") == values["ingressClass"]["controllerValue"]
    assert flag(s, "io-driver") == values["controller"]["ioDriver"]
    assert flag(s, "history-size") == str(values["controller"]["historySize"])

    # Every volume mount has a volume, mounted secrets are read-only.
    vols = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    for m in c.get("volumeMounts", []):
        assert m["name"] in vols, m
        if "secret" in vols[m["name"]]:
            assert m.get("readOnly") is True, m

    # Grace period outlasts the drain.
    drain = flag(s, "drain-timeout")
    assert drain.endswith("s") and int(drain[:-1]) < pod["spec"]["terminationGracePeriodSeconds"]


CHECKS = [("renders", check_renders), ("lint-strict", check_lint),
          ("kubernetes-validate-strict", check_schemas), ("invariants", check_invariants)]


# --------------------------------------------------------------------------- specific facts

def test_default_is_a_deployment_with_loadbalancer_service():
    w = workload("default")
    assert w["kind"] == "Deployment" and w["metadata"]["name"] == FULLNAME
    assert w["spec"]["replicas"] == 2
    svc = one("default", "Service", FULLNAME)
    assert svc["spec"]["type"] == "LoadBalancer"
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    assert ports == {"http": (80, "http"), "https": (443, "https")}, ports
    cports = {p["name"]: p["containerPort"] for p in container("default")["ports"]}
    assert cports == {"http": 8080, "https": 8443, "metrics": 10254, "admin": 10255}
    assert flag("default", "metrics-addr") == "0.0.0.0:10254" and flag("default", "admin-addr") == "0.0.0.0:10255"
    assert not find("default", "ServiceMonitor")
    assert not find("default", "DaemonSet")


def test_default_image_is_repository_and_appversion():
    app_version = chart().metadata["appVersion"]
    assert container("default")["image"] == f"ramjet/ramjet:{app_version}"
    assert "@" not in container("default")["image"]


def test_digest_pins_the_image():
    assert container("digest")["image"] == f"registry.example.com/ramjet:1.2.3@{DIGEST}"
    assert f"@{DIGEST}" in notes("digest")


def test_default_security_context():
    pod = workload("default")["spec"]["template"]["spec"]
    csc = container("default")["securityContext"]
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["runAsGroup"] == 65532
    assert pod["securityContext"]["fsGroup"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "sysctls" not in pod["securityContext"]
    assert csc["readOnlyRootFilesystem"] is True and csc["allowPrivilegeEscalation"] is False
    assert csc["capabilities"] == {"drop": ["ALL"]}, "default ports need no capability"
    assert flag("default", "io-driver") == "auto"
    # The read-only root gets a small writable /tmp.
    mounts = {m["mountPath"]: m["name"] for m in container("default")["volumeMounts"]}
    assert mounts == {"/tmp": "tmp", "/etc/ramjet/admin-token": "admin-token"}


def test_low_ports_add_net_bind_service_and_sysctl():
    csc = container("low-ports")["securityContext"]
    assert csc["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    sysctls = workload("low-ports")["spec"]["template"]["spec"]["securityContext"]["sysctls"]
    assert sysctls == [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"}]
    assert flag("low-ports", "http-addr") == "0.0.0.0:80"
    assert flag("low-ports", "https-addr") == "0.0.0.0:443"


def test_daemonset():
    w = workload("daemonset")
    assert w["kind"] == "DaemonSet" and not find("daemonset", "Deployment")
    assert "replicas" not in w["spec"]
    assert w["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1
    pod = w["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "node-role.kubernetes.io/edge": ""}
    assert pod["tolerations"] == [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}]
    pdb = one("daemonset", "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": "50%", "selector": w["spec"]["selector"]}
    assert "daemonset/" in notes("daemonset")


def test_admin_token_is_mounted_and_passed():
    c = container("admin-token")
    pod = workload("admin-token")["spec"]["template"]["spec"]
    assert flag("admin-token", "admin-token-file") == "/etc/ramjet/admin-token/token"
    mount = next(m for m in c["volumeMounts"] if m["name"] == "admin-token")
    assert mount == {"name": "admin-token", "mountPath": "/etc/ramjet/admin-token", "readOnly": True}
    vol = next(v for v in pod["volumes"] if v["name"] == "admin-token")
    assert vol["secret"]["secretName"] == "ramjet-admin"
    assert vol["secret"]["items"] == [{"key": "token", "path": "token"}]
    assert vol["secret"]["defaultMode"] == 0o440
    # The default certificate in the same scenario.
    assert flag("admin-token", "default-certificate") == "/etc/ramjet/default-certificate/tls.crt"
    assert flag("admin-token", "default-certificate-key") == "/etc/ramjet/default-certificate/tls.key"
    assert "WARNING: controller.adminToken" not in notes("admin-token")


def test_an_admin_token_is_made_by_default_and_only_an_explicit_opt_out_has_none():
    """A pin needs a token unless the operator says otherwise: without a Secret named, the chart
    makes one with a random token and mounts it; `generate: false` leaves none, with a warning."""
    name = f"{FULLNAME}-admin-token"
    secret = one("default", "Secret", name)
    token = base64.b64decode(secret["data"]["token"])
    assert len(token) == 48 and token.isalnum(), token
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert flag("default", "admin-token-file") == "/etc/ramjet/admin-token/token"
    vol = next(v for v in workload("default")["spec"]["template"]["spec"]["volumes"] if v["name"] == "admin-token")
    assert vol["secret"]["secretName"] == name and vol["secret"]["items"] == [{"key": "token", "path": "token"}]
    assert f"get secret {name}" in notes("default") and "WARNING: controller.adminToken" not in notes("default")
    # Two installs do not share a token.
    assert render_raw(None)["ramjet/templates/admin-token-secret.yaml"] != \
        render_raw(None)["ramjet/templates/admin-token-secret.yaml"]
    # A Secret of one's own: the chart makes none.
    assert not find("admin-token", "Secret", name)
    assert flag("no-admin-token", "admin-token-file") is None
    assert not find("no-admin-token", "Secret", name)
    assert not any(v["name"] == "admin-token"
                   for v in workload("no-admin-token")["spec"]["template"]["spec"]["volumes"])
    assert "WARNING: controller.adminToken.generate is false" in notes("no-admin-token")


def test_admin_token_custom_key():
    out = render_raw({"controller": {"adminToken": {"secretName": "s", "key": "bearer"}}})
    assert "- key: bearer\n" in out["ramjet/templates/deployment.yaml"]
    assert "path: token\n" in out["ramjet/templates/deployment.yaml"]


def test_clusterrole_grants():
    rules = one("default", "ClusterRole", FULLNAME)["rules"]
    for group, resource in [("networking.k8s.io", "ingresses"), ("networking.k8s.io", "ingressclasses"),
                            ("", "services"), ("", "secrets"), ("discovery.k8s.io", "endpointslices")]:
        for verb in ("list", "watch"):
            assert rules_grant(rules, group, resource, verb), (group, resource, verb)
        # Listed and watched, never fetched one by one (the real API server's audit log agrees).
        assert not rules_grant(rules, group, resource, "get"), (group, resource)
    # Status by server-side apply (a patch); Events created once each. tests/cluster/ checks
    # against a real API server's audit log that every write granted here is one ramjet makes.
    assert rules_grant(rules, "networking.k8s.io", "ingresses/status", "patch")
    assert not rules_grant(rules, "networking.k8s.io", "ingresses/status", "update")
    # Canary auto-promotion writes its state annotation the same way; never an update.
    assert rules_grant(rules, "networking.k8s.io", "ingresses", "patch")
    assert not rules_grant(rules, "networking.k8s.io", "ingresses", "update")
    assert rules_grant(rules, "events.k8s.io", "events", "create")
    assert not rules_grant(rules, "events.k8s.io", "events", "patch")
    # Nothing it does not need.
    assert not rules_grant(rules, "", "secrets", "update")
    assert not rules_grant(rules, "", "events", "create"), "core/v1 events: ramjet writes events.k8s.io/v1"
    assert not any("*" in r.get("verbs", []) or "*" in r.get("resources", []) for r in rules)
    assert not any(v in r["verbs"] for r in rules for v in ("delete", "deletecollection", "create")
                   if "events" not in r["resources"])
    crb = one("default", "ClusterRoleBinding", FULLNAME)
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": FULLNAME}
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]


def test_gateway_api_rbac_and_gatewayclass():
    rules = one("default", "ClusterRole", FULLNAME)["rules"]
    group = "gateway.networking.k8s.io"
    for resource in ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "tcproutes", "udproutes", "tlsroutes", "referencegrants", "backendtlspolicies"):
        for verb in ("list", "watch"):
            assert rules_grant(rules, group, resource, verb), (resource, verb)
        assert not rules_grant(rules, group, resource, "get"), resource
    # GatewayClass and Gateway status by server-side apply; HTTPRoute status.parents is an atomic
    # list shared with other controllers, so it is replaced whole (an update), never applied.
    for resource in ("gatewayclasses/status", "gateways/status"):
        assert rules_grant(rules, group, resource, "patch") and not rules_grant(rules, group, resource, "update")
    for resource in ("httproutes/status", "grpcroutes/status", "tcproutes/status", "udproutes/status", "tlsroutes/status", "backendtlspolicies/status"):
        assert rules_grant(rules, group, resource, "update") and not rules_grant(rules, group, resource, "patch")
    for resource in ("namespaces", "configmaps"):
        assert rules_grant(rules, "", resource, "list") and rules_grant(rules, "", resource, "watch")
    assert not rules_grant(rules, "", "configmaps", "get"), "ConfigMaps are listed and watched, never fetched"
    assert flag("default", "gateway-controller-name") == "ramjet.dev/gateway-controller"
    assert not find("default", "GatewayClass")
    gc = one("gateway-class", "GatewayClass", "edge")
    assert gc["spec"] == {"controllerName": "example.com/gw"}
    assert flag("gateway-class", "gateway-controller-name") == "example.com/gw"
    assert flag("default", "gateway-api") == "true" and flag("no-gateway-api", "gateway-api") == "false"
    off = one("no-gateway-api", "ClusterRole", FULLNAME)["rules"]
    assert not any(group in r["apiGroups"] for r in off)


def test_role_for_leases_in_release_namespace():
    role = one("default", "Role", FULLNAME)
    assert role["metadata"]["namespace"] == NAMESPACE
    rules = role["rules"]
    assert all(r["apiGroups"] == ["coordination.k8s.io"] and r["resources"] == ["leases"] for r in rules)
    verbs = {v for r in rules for v in r["verbs"]}
    assert verbs == {"get", "create", "update", "list", "watch"}, verbs
    named = [r for r in rules if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == [f"{FULLNAME}-leader"] for r in named)
    # Only "create" cannot be limited to the one Lease name.
    assert {v for r in rules if not r.get("resourceNames") for v in r["verbs"]} == {"create"}
    assert flag("default", "election-id") == f"{FULLNAME}-leader"
    rb = one("default", "RoleBinding", FULLNAME)
    assert rb["roleRef"]["kind"] == "Role" and rb["subjects"][0]["name"] == FULLNAME
    # A custom election id follows through to the Role.
    role = one("everything", "Role")
    assert [r for r in role["rules"] if r.get("resourceNames")][0]["resourceNames"] == ["edge-proxy-lock"]
    assert flag("everything", "election-id") == "edge-proxy-lock"


def test_serviceaccount():
    sa = one("default", "ServiceAccount", FULLNAME)
    assert sa["metadata"]["namespace"] == NAMESPACE
    assert workload("default")["spec"]["template"]["spec"]["serviceAccountName"] == FULLNAME
    assert not find("external-rbac", "ServiceAccount")
    assert not find("external-rbac", "ClusterRole") and not find("external-rbac", "Role")
    assert workload("external-rbac")["spec"]["template"]["spec"]["serviceAccountName"] == "ramjet-managed"


def test_ingressclass():
    ic = one("default", "IngressClass", "ramjet")
    assert ic["spec"] == {"controller": "ramjet.dev/ingress-controller"}
    assert "ingressclass.kubernetes.io/is-default-class" not in (ic["metadata"].get("annotations") or {})
    ic = one("default-class", "IngressClass", "ramjet")
    assert ic["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"] == "true"
    assert not find("external-rbac", "IngressClass")
    assert flag("external-rbac", "ingress-class") == "ramjet"


def test_watch_namespace_and_other_flags():
    assert flag("watch-namespace", "watch-namespace") == "apps"
    assert flag("default", "watch-namespace") is None
    assert flag("watch-namespace", "audit-webhook") == "http://audit.apps.svc:8080/ramjet"
    assert flag("default", "audit-webhook") is None
    assert flag("watch-namespace", "workers") == "4"
    assert flag("default", "workers") is None, "0 workers = one per CPU: no flag"
    assert flag("watch-namespace", "history-size") == "25"
    assert flag("watch-namespace", "log-format") == "json"
    assert args("watch-namespace")[-1] == "--kubeconfig=/etc/ramjet/kubeconfig", "extraArgs go last"
    assert flag("default", "upstream-timeout") == "60s"
    assert flag("default", "header-timeout") == "10s"
    assert flag("default", "drain-timeout") == "30s"


def test_client_address_flags_only_when_asked():
    for name in ("default", "everything"):
        for f in ("proxy-protocol", "proxy-protocol-timeout", "trusted-proxies", "forwarded-for-header"):
            assert flag(name, f) is None, f"{name}: {f}"
        assert "--compute-full-forwarded-for" not in args(name)
    assert flag("client-address", "proxy-protocol") == "http,https"
    assert flag("client-address", "proxy-protocol-timeout") == "3s"
    assert flag("client-address", "trusted-proxies") == "10.0.0.0/8,2001:db8::/32,192.0.2.7"
    assert flag("client-address", "forwarded-for-header") == "X-Real-IP"
    assert "--compute-full-forwarded-for" in args("client-address")
    assert flag("proxy-protocol-https", "proxy-protocol") == "https"
    assert flag("proxy-protocol-https", "proxy-protocol-timeout") == "5s"


def test_access_log_defaults_to_json_on_stdout():
    assert flag("default", "access-log") == "stdout"
    assert flag("default", "access-log-format") == "json"
    assert flag("default", "access-log-skip-paths") is None
    assert flag("default", "access-log-sample") is None, "every success is logged by default: no flag"
    assert "--access-log-errors-only" not in args("default")
    assert flag("everything", "access-log") == "/var/log/ramjet/access.log"
    assert flag("everything", "access-log-format") == "text"
    assert flag("everything", "access-log-skip-paths") == "/healthz,/readyz"
    assert flag("everything", "access-log-sample") == "0.25"
    assert "--access-log-errors-only" in args("everything")


def test_publish_service_and_address():
    assert flag("default", "publish-service") == f"{NAMESPACE}/{FULLNAME}"
    assert flag("default", "publish-address") is None
    assert flag("no-service", "publish-service") is None
    assert flag("no-service", "publish-address") == "203.0.113.10"
    assert flag("everything", "publish-service") == "edge/public-lb"
    assert not [d for d in find("no-service", "Service")]


def test_rollouts_refuse_no_connection_by_default():
    """Two replicas, spread over nodes, a PodDisruptionBudget, and on SIGTERM ramjet stays out of
    rotation but accepting for --shutdown-delay before draining, within the grace period."""
    w = workload("default")
    pod = w["spec"]["template"]["spec"]
    assert flag("default", "shutdown-delay") == "5s" and flag("default", "drain-timeout") == "30s"
    assert pod["terminationGracePeriodSeconds"] >= 5 + 30
    assert container("default")["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": w["spec"]["selector"]["matchLabels"]}}]
    pdb = one("default", "PodDisruptionBudget", FULLNAME)
    assert pdb["spec"] == {"minAvailable": 1, "selector": w["spec"]["selector"]}
    assert flag("slow-lb", "shutdown-delay") == "20s"
    # A large fleet can turn its audit Events down; the default writes no flag.
    assert flag("slow-lb", "audit-events") == "leader" and flag("default", "audit-events") is None
    assert workload("slow-lb")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 70
    # One replica: a budget would block node drains; turned off: none.
    assert not find("single", "PodDisruptionBudget") and not find("no-pdb", "PodDisruptionBudget")
    # A DaemonSet is not spread by the chart: it runs on every node it may.
    assert "topologySpreadConstraints" not in workload("daemonset")["spec"]["template"]["spec"]


def test_autoscaler_owns_the_replica_count():
    w = workload("hpa")
    assert "replicas" not in w["spec"]
    hpa = one("hpa", "HorizontalPodAutoscaler", FULLNAME)
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]
    assert one("hpa", "PodDisruptionBudget", FULLNAME)
    assert not find("default", "HorizontalPodAutoscaler")


def test_network_policy_opens_the_traffic_ports_and_guards_the_admin_port():
    assert not find("default", "NetworkPolicy")
    np = one("network-policy", "NetworkPolicy", FULLNAME)["spec"]
    w = workload("network-policy")
    assert np["podSelector"] == w["spec"]["selector"] and np["policyTypes"] == ["Ingress"]
    traffic, metrics, admin = np["ingress"]
    assert traffic == {"ports": [{"port": "http", "protocol": "TCP"}, {"port": "https", "protocol": "TCP"}]}
    # The read-only port: from anywhere unless metricsFrom says who.
    assert metrics == {"ports": [{"port": "metrics", "protocol": "TCP"}]}
    listed = one("network-policy-metrics", "NetworkPolicy")["spec"]["ingress"][1]
    assert listed["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert admin["ports"] == [{"port": "admin", "protocol": "TCP"}]
    assert admin["from"] == [
        {"podSelector": w["spec"]["selector"]},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
    ]
    # The named ports exist on the container.
    assert {"http", "https", "metrics", "admin"} <= {p["name"] for p in container("network-policy")["ports"]}


def test_pdb():
    pdb = one("pdb", "PodDisruptionBudget", FULLNAME)
    assert pdb["spec"]["minAvailable"] == 1 and "maxUnavailable" not in pdb["spec"]
    assert pdb["spec"]["selector"] == workload("pdb")["spec"]["selector"]
    assert one("everything", "PodDisruptionBudget")["spec"]["minAvailable"] == 2


def test_metrics_annotations_and_service():
    ann = workload("default")["spec"]["template"]["metadata"]["annotations"]
    assert ann == {"prometheus.io/scrape": "true", "prometheus.io/port": "10254",
                   "prometheus.io/path": "/metrics"}, ann
    msvc = one("default", "Service", f"{FULLNAME}-metrics")
    assert msvc["spec"]["type"] == "ClusterIP"
    assert msvc["spec"]["ports"] == [{"name": "metrics", "port": 10254, "targetPort": "metrics",
                                      "protocol": "TCP", "appProtocol": "http"}]
    # The public Service never exposes the admin port.
    pub = one("default", "Service", FULLNAME)
    assert all(p["targetPort"] != "admin" for p in pub["spec"]["ports"])
    # Turned off.
    assert "prometheus.io/scrape" not in workload("everything")["spec"]["template"]["metadata"]["annotations"]
    assert not find("no-service", "Service")
    assert "annotations" not in workload("no-service")["spec"]["template"]["metadata"]


def test_fleet_service_names_every_replica():
    fleet = one("default", "Service", f"{FULLNAME}-fleet")
    spec = fleet["spec"]
    # Headless, and not-ready pods included: the brake must reach a replica failing its probe.
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True, spec
    assert spec["ports"] == [{"name": "admin", "port": 10255, "targetPort": "admin", "protocol": "TCP",
                              "appProtocol": "http"}], spec["ports"]
    assert spec["selector"] == workload("default")["spec"]["selector"]["matchLabels"]
    assert not find("no-service", "Service", f"{FULLNAME}-fleet")
    # The replicas find each other through it, so canary promotion sees every replica's traffic.
    assert flag("default", "peers") == f"{FULLNAME}-fleet.{NAMESPACE}.svc:10255"
    assert flag("no-service", "peers") is None


def metric_names_exported() -> set[str]:
    """Every metric family the daemon renders (read from the code that renders /metrics)."""
    text = (ROOT / "control" / "src" / "metrics.rs").read_text()
    return set(re.findall(r'"(ramjet_[a-z_]+)"', text)) | set(re.findall(r"(ramjet_[a-z_]+)\{", text)) | \
        set(re.findall(r"(ramjet_[a-z_]+) \{", text))


def metric_names_used(text: str) -> set[str]:
    names = set()
    for name in re.findall(r"ramjet_[a-z_]+", text):
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)].endswith("_seconds"):
                name = name[: -len(suffix)]
        names.add(name)
    return names


def promtool() -> str:
    """promtool: on the PATH, or from Debian's prometheus package under target/ (as tests/metrics.rs)."""
    found = shutil.which("promtool")
    if found:
        return found
    dest = ROOT / "target" / "promtool"
    binary = dest / "usr" / "bin" / "promtool"
    if not binary.exists():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "prometheus"], cwd=dest, check=True, capture_output=True)
        deb = next(dest.glob("prometheus_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    return str(binary)


def test_grafana_dashboard_configmap():
    assert not find("default", "ConfigMap"), "no dashboard unless asked for"
    cm = one("observability", "ConfigMap", f"{FULLNAME}-dashboard")
    assert cm["metadata"]["namespace"] == NAMESPACE
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1", "the Grafana sidecar's default label"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Ingress"}
    import json
    dash = json.loads(cm["data"]["ramjet.json"])
    assert dash["uid"] == "ramjet-overview"
    titles = [p["title"] for p in dash["panels"]]
    for want in ("Requests per second by route", "5xx share by route", "Request duration p50 / p99 by route",
                 "Serving generation", "Pinned replicas", "Publish duration p99"):
        assert want in titles, titles
    assert [a["name"] for a in dash["annotations"]["list"]] == ["Generation published", "Pinned"]
    exprs = json.dumps([t["expr"] for p in dash["panels"] for t in p["targets"]]
                       + [a["expr"] for a in dash["annotations"]["list"]])
    unknown = metric_names_used(exprs) - metric_names_exported()
    assert not unknown, f"the dashboard queries metrics ramjet does not export: {unknown}"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def test_prometheus_rule_alerts_and_promtool():
    assert not find("default", "PrometheusRule"), "no rules unless asked for"
    rule = one("observability", "PrometheusRule", FULLNAME)
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = rule["spec"]["groups"][0]["rules"]
    by_name = {r["alert"]: r for r in rules}
    assert sorted(by_name) == ["RamjetAccessLogDropping", "RamjetCertificateExpiring", "RamjetConfigDiagnostics",
                               "RamjetPinnedTooLong", "RamjetRoute5xxRatioHigh"]
    assert "< 14 * 86400" in by_name["RamjetCertificateExpiring"]["expr"]
    assert "> 0.02" in by_name["RamjetRoute5xxRatioHigh"]["expr"]
    assert by_name["RamjetPinnedTooLong"]["for"] == "2h"
    assert by_name["RamjetConfigDiagnostics"]["expr"].strip().endswith("> 0")
    unknown = metric_names_used(yaml.safe_dump(rule["spec"]["groups"])) - metric_names_exported()
    assert not unknown, f"the rules query metrics ramjet does not export: {unknown}"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
    out = subprocess.run([promtool(), "check", "rules", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    assert out.returncode == 0, f"promtool check rules:\n{out.stdout}{out.stderr}"
    assert "SUCCESS: 6 rules found" in out.stdout, out.stdout
    # ingress-nginx's dashboards keep working: the series and the labels they select on.
    compat = rule["spec"]["groups"][1]["rules"][0]
    assert compat["record"] == "nginx_ingress_controller_requests"
    assert "ramjet_route_requests_total" in compat["expr"]
    recorded(rule, "ramjet_route_requests_total", "class", "5xx", {"class": "5xx", "status": "5xx"})


def test_getting_started_values_render():
    """The `helm install` of docs/getting-started.md's local-cluster section, as written: its
    --set values render, lint and validate, and run the image it loaded."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
    section = doc.split("## From the Dockerfile to a curl", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"^helm install ramjet charts/ramjet(?:.*\\\n)*.*$", section, re.M).group(0)
    values: dict = {}
    for key, value in re.findall(r"--set ([\w.]+)=(\S+)", command):
        *path, last = key.split(".")
        node = values
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    assert values["image"] == {"repository": "ramjet", "tag": "dev", "pullPolicy": "Never"}, values
    rendered_ = chart().render(values, name="ramjet", namespace="ramjet-ingress", is_install=True)
    docs_ = [d for path, text in rendered_.items() if not path.endswith("NOTES.txt")
             for d in yaml.safe_load_all(text) if d]
    deployment = next(d for d in docs_ if d["kind"] == "Deployment")
    c = deployment["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "ramjet:dev" and c["imagePullPolicy"] == "Never", c["image"]
    service = next(d for d in docs_ if d["kind"] == "Service" and d["metadata"]["name"] == "ramjet")
    assert service["spec"]["type"] == "NodePort"
    assert deployment["metadata"]["name"] == "ramjet", "`rollout status deployment/ramjet` names it"
    for d in docs_:
        if (d["apiVersion"], d["kind"]) not in NO_SCHEMA:
            kv.validate(d, KUBE_VERSION, strict=True)


def test_access_log_lines_of_ones_own_and_nginx_formats_reach_the_daemon():
    assert flag("default", "access-log-template") is None and flag("default", "access-log-escape") is None
    assert flag("access-template", "access-log-format") == "nginx-upstream"
    assert flag("access-template", "access-log-template") == '{"a":"$http_x_a", "s":"$status"}'
    assert flag("access-template", "access-log-escape") == "json"


def test_tracing_is_off_until_an_endpoint_is_given():
    assert flag("default", "otlp-endpoint") is None and flag("default", "trace-sample-ratio") is None
    assert flag("tracing", "otlp-endpoint") == "http://otel-collector.observability:4318"
    assert flag("tracing", "trace-sample-ratio") == "0.25"
    assert flag("tracing", "trace-parent-based") == "false"
    assert flag("tracing", "trace-service-name") == "ramjet"
    assert flag("tracing", "trace-operation-name") == "HTTP $request_method $uri"
    assert flag("default", "trace-operation-name") is None


def test_controller_configuration_is_a_configmap_the_daemon_reads():
    assert flag("default", "config") is None and not find("default", "ConfigMap")
    for scenario, name in [("config", f"{FULLNAME}-config"), ("config-existing", "ingress-nginx-controller")]:
        assert flag(scenario, "config") == "/etc/ramjet/config"
        mount = next(m for m in container(scenario)["volumeMounts"] if m["name"] == "config")
        assert mount == {"name": "config", "mountPath": "/etc/ramjet/config", "readOnly": True}
        volume = next(v for v in workload(scenario)["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
        assert volume["configMap"] == {"name": name}
    assert not find("config-existing", "ConfigMap"), "an existing ConfigMap is read as it is"
    data = one("config", "ConfigMap", f"{FULLNAME}-config")["data"]
    assert data == {"hsts-max-age": "600", "ssl-redirect": "false", "proxy-body-size": "8m"}
    # The daemon reads the ConfigMap as the kubelet mounts it: a file per key.
    env = os.environ.get("RAMJET_BIN")
    if not env:
        return
    with tempfile.TemporaryDirectory() as tmp:
        mounted = Path(tmp) / "config"
        mounted.mkdir()
        for key, value in data.items():
            (mounted / key).write_text(value)
        routes = Path(tmp) / "routes.yaml"
        routes.write_text("backends:\n  hi: { respond: { status: 200, body: hi } }\nroutes:\n  - { path: /, backend: hi }\n")
        proc = subprocess.run([env, "--check", "--static-routes", str(routes), "--config", str(mounted)],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        (mounted / "proxy-body-size").write_text("lots")
        proc = subprocess.run([env, "--check", "--static-routes", str(routes), "--config", str(mounted)],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0 and "proxy-body-size" in proc.stderr, proc.stderr


def test_admission_policy_only_when_asked_and_for_the_class():
    assert not find("default", "ValidatingAdmissionPolicy")
    policy = one("admission", "ValidatingAdmissionPolicy", f"{FULLNAME}-ingress")
    binding = one("admission", "ValidatingAdmissionPolicyBinding", f"{FULLNAME}-ingress")
    assert binding["spec"] == {"policyName": f"{FULLNAME}-ingress", "validationActions": ["Deny", "Audit"]}
    assert '"edge"' in policy["spec"]["matchConditions"][0]["expression"]
    checks = [v["expression"] for v in policy["spec"]["validations"]]
    assert any("-snippet" in c for c in checks) and any("ramjet.dev/proxy-body-size" in c for c in checks), checks
    # The same lists the registry test checks (control/src/compile/annotations/tests.rs).
    known = json.loads((ROOT / "charts/ramjet/files/admission/ramjet-annotations.json").read_text())
    assert '"canary-auto-promote"' in checks[1] and len(known) > 50


def test_status_codes_are_counted_and_recorded_on_request():
    assert "--metrics-status-codes" in args("status-codes")
    assert "--metrics-status-codes" not in args("default")
    rule = one("status-codes", "PrometheusRule", FULLNAME)
    recorded(rule, "ramjet_route_responses_total", "status", "503", {"status": "503"})


def recorded(rule: dict, counter: str, label: str, value: str, own: dict):
    """What Prometheus records as nginx_ingress_controller_requests{status=value} from two series of
    `counter` (one with `label` = `value`), by promtool's rule unit test: the real engine."""
    with tempfile.TemporaryDirectory() as tmp:
        rules_file = Path(tmp) / "rules.yaml"
        rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        # As scraped: ramjet's `namespace` label beside the pod's becomes exported_namespace.
        scraped = ('namespace="edge",pod="ramjet-0",exported_namespace="shop",ingress="web",service="web",'
                   'route="shop/web",backend="shop/web:80",route_kind="ingress"')
        expected = {"namespace": "edge", "pod": "ramjet-0", "exported_namespace": "shop", "ingress": "web",
                    "service": "web", "controller_pod": "ramjet-0", "controller_namespace": "edge",
                    "controller_class": "ramjet.dev/ingress-controller", **own}
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(expected.items()))
        other = "2xx" if label == "class" else "200"
        test = {"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": [{
            "interval": "1m",
            "input_series": [{"series": f'{counter}{{{scraped},{label}="{value}"}}', "values": "0 6 12"},
                             {"series": f'{counter}{{{scraped},{label}="{other}"}}', "values": "0 1 2"}],
            "promql_expr_test": [{"expr": f'nginx_ingress_controller_requests{{status="{value}"}}',
                                  "eval_time": "2m",
                                  "exp_samples": [{"labels": f"nginx_ingress_controller_requests{{{labels}}}",
                                                   "value": 12}]}]}]}
        test_file = Path(tmp) / "test.yaml"
        test_file.write_text(yaml.safe_dump(test))
        out = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True)
        assert out.returncode == 0, f"promtool test rules:\n{out.stdout}{out.stderr}"


def test_servicemonitor():
    sm = one("service-monitor", "ServiceMonitor", FULLNAME)
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["namespace"] == NAMESPACE
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert sm["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s",
                                       "scrapeTimeout": "10s"}]
    # It selects the metrics Service, and only it.
    sel = sm["spec"]["selector"]["matchLabels"]
    matching = [svc["metadata"]["name"] for svc in find("service-monitor", "Service")
                if sel.items() <= svc["metadata"]["labels"].items()]
    assert matching == [f"{FULLNAME}-metrics"], matching
    assert one("everything", "ServiceMonitor")["metadata"]["namespace"] == "monitoring"
    assert one("everything", "ServiceMonitor")["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


def test_service_types():
    svc = one("nodeport", "Service", FULLNAME)
    assert svc["spec"]["type"] == "NodePort"
    assert svc["spec"]["externalTrafficPolicy"] == "Local"
    assert {p["name"]: p["nodePort"] for p in svc["spec"]["ports"]} == {"http": 30080, "https": 30443}
    svc = one("clusterip", "Service", FULLNAME)
    assert svc["spec"]["type"] == "ClusterIP"
    assert "externalTrafficPolicy" not in svc["spec"]
    assert all("nodePort" not in p for p in svc["spec"]["ports"])
    svc = one("everything", "Service", "edge-proxy")
    assert svc["spec"]["loadBalancerClass"] == "example.com/lb"
    assert svc["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24"]
    assert svc["metadata"]["annotations"] == {"example.com/lb-type": "nlb"}
    assert svc["metadata"]["labels"]["exposed"] == "yes"


def test_tcp_route_ports_are_exposed_and_let_through():
    ports = {p["name"]: p for p in one("tcp-ports", "Service", FULLNAME)["spec"]["ports"]}
    assert ports["tcp-5432"] == {"name": "tcp-5432", "port": 5432, "targetPort": "tcp-5432", "protocol": "TCP"}
    assert ports["redis"] == {"name": "redis", "port": 6379, "targetPort": "redis", "protocol": "TCP", "nodePort": 30379}
    # Declared on the container, where ramjet opens them while a route has them.
    declared = {p["name"]: p["containerPort"] for p in container("tcp-ports")["ports"]}
    assert declared["tcp-5432"] == 5432 and declared["redis"] == 6379
    traffic = one("tcp-ports", "NetworkPolicy", FULLNAME)["spec"]["ingress"][0]["ports"]
    assert {"port": 5432, "protocol": "TCP"} in traffic and {"port": 6379, "protocol": "TCP"} in traffic
    assert [p["name"] for p in one("default", "Service", FULLNAME)["spec"]["ports"]] == ["http", "https"]


def test_seccomp_choices():
    # The default passes "baseline" and "restricted": RuntimeDefault, io_uring where it allows it.
    pod = workload("default")["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert flag("default", "io-driver") == "auto"
    assert "WARNING: controller.ioDriver" not in notes("default")
    assert "controller.seccompOperator" in notes("default")
    pod = workload("restricted")["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert flag("restricted", "io-driver") == "auto"
    assert "WARNING: controller.ioDriver" not in notes("restricted")
    # The Security Profiles Operator's route keeps io_uring under a profile the chart ships.
    pod = workload("seccomp-operator")["spec"]["template"]["spec"]
    profile = one("seccomp-operator", "SeccompProfile", f"{FULLNAME}-io-uring")
    assert pod["securityContext"]["seccompProfile"] == {
        "type": "Localhost", "localhostProfile": f"operator/{NAMESPACE}/{FULLNAME}-io-uring.json"}
    assert flag("seccomp-operator", "io-driver") == "io-uring"
    assert "WARNING: controller.ioDriver" not in notes("seccomp-operator")
    spec = profile["spec"]
    allowed = {n for r in spec["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]}
    assert {"io_uring_setup", "io_uring_enter", "io_uring_register"} <= allowed
    assert spec["defaultAction"] == "SCMP_ACT_ERRNO"
    # What ramjet's own system calls need, and what a container without capabilities must not do.
    assert {"epoll_wait", "accept4", "timerfd_create", "eventfd2", "sendmsg", "recvfrom"} <= allowed
    assert not {"mount", "kexec_load", "init_module", "bpf", "unshare"} & allowed
    assert not find("default", "SeccompProfile")
    pod = workload("localhost-seccomp")["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "Localhost",
                                                        "localhostProfile": "profiles/ramjet.json"}
    # RuntimeDefault with io-uring is allowed (some runtimes permit io_uring) but NOTES warn.
    out = render_raw({"controller": {"ioDriver": "io-uring"}})
    n = next(v for k, v in out.items() if k.endswith("NOTES.txt"))
    assert "WARNING: controller.ioDriver is \"io-uring\"" in n


def test_restricted_scenario_meets_pod_security_restricted():
    """The documented hardened setup passes the 'restricted' Pod Security Standard."""
    pod = workload("restricted")["spec"]["template"]["spec"]
    c = container("restricted")
    assert pod["securityContext"]["seccompProfile"]["type"] in ("RuntimeDefault", "Localhost")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert set(c["securityContext"]["capabilities"].get("add", [])) <= {"NET_BIND_SERVICE"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    assert all("hostPath" not in v for v in pod["volumes"])
    assert all("hostPort" not in p for p in c["ports"])


def test_memlock_is_documented():
    values_text = (CHART / "values.yaml").read_text()
    for needle in ("RLIMIT_MEMLOCK", "105 KB", "LimitMEMLOCK", "io_uring_setup", "RuntimeDefault",
                   "auto"):
        assert needle in values_text, needle
    out = render_raw({"controller": {"workers": 4, "ioDriver": "io-uring"}})
    assert "4 workers: 512 KiB" in next(v for k, v in out.items() if k.endswith("NOTES.txt"))
    assert "RLIMIT_MEMLOCK" not in notes("restricted"), "auto driver: no memlock lecture"


def test_everything_passthroughs():
    w = workload("everything")
    pod = w["spec"]["template"]
    spec = pod["spec"]
    c = container("everything")
    assert w["metadata"]["name"] == "edge-proxy" and w["spec"]["replicas"] == 3
    assert w["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert w["spec"]["minReadySeconds"] == 5
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["affinity"]["podAntiAffinity"]
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert c["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert c["resources"]["limits"] == {"cpu": "4", "memory": "1Gi"}
    assert {"name": "RUST_LOG", "value": "info"} in c["env"]
    assert pod["metadata"]["annotations"] == {"example.com/team": "edge"}
    assert pod["metadata"]["labels"]["example.com/tier"] == "edge"
    assert one("everything", "ServiceAccount")["metadata"]["annotations"] == {"example.com/role": "edge"}
    assert flag("everything", "workers") == "4"


def test_release_name_containing_chart_name():
    out = chart().render(None, name="ramjet", namespace="edge")
    d = yaml.safe_load(out["ramjet/templates/deployment.yaml"])
    assert d["metadata"]["name"] == "ramjet"
    assert "--publish-service=edge/ramjet" in d["spec"]["template"]["spec"]["containers"][0]["args"]


def test_bad_values_fail_with_a_message():
    """What `helm install` says: the render fails, naming the value."""
    for name, (values, schema_msg, template_msg) in BAD_VALUES.items():
        try:
            render_raw(values)
        except helm.HelmError as e:
            wanted = schema_msg or template_msg
            assert wanted in str(e), f"{name}: message does not mention {wanted!r}: {e}"
        else:
            raise AssertionError(f"{name}: render accepted {values}")


def test_template_guards_without_schema():
    """The templates refuse bad values by themselves too (--skip-schema-validation)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy_dir = Path(tmp) / "ramjet"
        shutil.copytree(CHART, copy_dir)
        (copy_dir / "values.schema.json").unlink()
        with helm.Chart.load(str(copy_dir)) as bare:
            for name, (values, _, template_msg) in BAD_VALUES.items():
                if template_msg is None:
                    continue
                try:
                    bare.render(values, name=RELEASE, namespace=NAMESPACE)
                except helm.HelmError as e:
                    assert template_msg in str(e), f"{name}: {e}"
                else:
                    raise AssertionError(f"{name}: the templates accepted {values}")


def test_values_schema_accepts_every_scenario():
    for name, values in SCENARIOS.items():
        try:
            chart().validate_schema(values)
        except helm.HelmError as e:
            raise AssertionError(f"{name}: {e}")


def test_readme_is_generated_from_the_values():
    """charts/ramjet/README.md lists every documented value with its default (tests/chart/readme.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import readme
    assert (CHART / "README.md").read_text() == readme.render(), \
        "charts/ramjet/README.md is out of date: run python3 tests/chart/readme.py"
    documented = set(re.findall(r"^\| `([^`]+)`", (CHART / "README.md").read_text(), re.M))
    assert {"controller.shutdownDelay", "controller.adminToken.generate", "networkPolicy.enabled"} <= documented


def test_chart_metadata():
    md = chart().metadata
    assert md["apiVersion"] == "v2" and md["name"] == "ramjet"
    assert md["version"] == "0.1.0" and md["appVersion"] == "0.1.0"
    for f in ("values.yaml", "values.schema.json", "templates/_helpers.tpl", "templates/NOTES.txt"):
        assert (CHART / f).is_file(), f


# --------------------------------------------------------------------------- Dockerfile

def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_dockerfile_matches_chart():
    df = dockerfile()
    values = chart().values
    assert re.search(r"^FROM rust:1\.95-bookworm AS builder", df, re.M), "builder image"
    assert re.search(r"cargo build --release --locked --bin ramjet --bin ramjet-top", df)
    froms = re.findall(r"^FROM (\S+)", df, re.M)
    assert len(froms) >= 2 and froms[-1].startswith(("gcr.io/distroless/cc-debian12", "debian:bookworm-slim"))
    user = re.findall(r"^USER (\S+)", df, re.M)[-1]
    assert user.split(":")[0] == str(values["controller"]["runAsUser"]), user
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", df, re.M) for p in line.split()}
    assert exposed == set(values["controller"]["containerPorts"].values()), exposed
    assert re.search(r'^ENTRYPOINT \["/usr/local/bin/ramjet"\]', df, re.M)
    for b in ("ramjet", "ramjet-top"):
        assert re.search(rf"/usr/local/bin/{b}\b", df), b
    # The chart relies on the image's ENTRYPOINT: it passes args only.
    assert "command" not in container("default")


def test_dockerignore_keeps_context_small():
    lines = {l.strip() for l in (ROOT / ".dockerignore").read_text().splitlines()
             if l.strip() and not l.startswith("#")}
    assert {"target", ".git"} <= {l.strip("/") for l in lines}, lines
    assert not any(l.strip("/") in ("src", "shared", "dataplane", "control", "Cargo.lock", "Cargo.toml")
                   for l in lines), "build inputs must stay in the context"


# --------------------------------------------------------------------------- the daemon's flags

def test_flags_exist_in_the_daemon():
    """Every flag the chart passes, in every value set, is one the daemon knows.

    Runs when RAMJET_BIN names a freshly built daemon (CI sets it after its
    build); a binary merely lying in target/ may be stale, so it is not used.
    """
    env = os.environ.get("RAMJET_BIN")
    if not env:
        raise Skip("set RAMJET_BIN=target/debug/ramjet (a fresh build) to check the chart's flags")
    binary = Path(env)
    assert binary.is_file(), f"RAMJET_BIN={env}: no such file"
    proc = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"{binary} --help exited {proc.returncode}: {proc.stderr}"
    known = set(re.findall(r"--[a-z][a-z0-9-]*", proc.stdout))
    used = set()
    for s in SCENARIOS:
        used |= {a.split("=", 1)[0] for a in args(s)}
    missing = sorted(used - known)
    assert not missing, f"{binary} --help does not list {missing}"


# --------------------------------------------------------------------------- runner

class Skip(Exception):
    pass


def collect() -> list[tuple[str, object]]:
    tests: list[tuple[str, object]] = []
    for s in SCENARIOS:
        for label, fn in CHECKS:
            tests.append((f"{s}: {label}", (lambda fn=fn, s=s: fn(s))))
    for name, fn in list(globals().items()):
        if name.startswith("test_") and callable(fn):
            tests.append((name, fn))
    return tests


def main() -> int:
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    print(f"helm engine {helm.helm_sdk_version()} (helm-c {helm.helm_c_version()}), "
          f"kubernetes-validate schemas for {KUBE_VERSION}")
    passed = failed = skipped = 0
    failures = []
    start = time.monotonic()
    for name, fn in collect():
        if only and only not in name:
            continue
        t0 = time.monotonic()
        try:
            fn()
        except Skip as e:
            skipped += 1
            print(f"skip {name}: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            failures.append((name, traceback.format_exc()))
            print(f"FAIL {name}: {type(e).__name__}: {str(e)[:300]}")
            continue
        passed += 1
        print(f"ok   {name} ({time.monotonic() - t0:.2f}s)")
    for name, tb in failures:
        print(f"\n---- {name}\n{tb}")
    print(f"\n{time.monotonic() - start:.1f}s")
    line = f"chart: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
