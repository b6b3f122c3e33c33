//! Gateway API conformance, translated: the HTTPRoute test cases of
//! `sigs.k8s.io/gateway-api/conformance` (v1.4.0, from the Go module cache) against a real
//! `kube-apiserver` (see `support/control_plane.rs`), with ramjet watching it as `--kubeconfig` does.
//!
//! The suite's base manifests are applied once, as its set-up does: the namespaces, the Gateways,
//! the Services, and the TLS Secret of the HTTPS Gateway (self-signed, as the suite generates it).
//! Each test then applies its own manifest, unchanged but for the GatewayClass name the suite
//! templates in, waits for the status the suite waits for (`GatewayAndHTTPRoutesMustBeAccepted` and
//! friends, read from the API server), sends the test's requests and deletes its manifest. There is
//! no kubelet for the suite's echo Pods, so every Service is a real local backend (named
//! `namespace/service`, in the tests' network namespace: the API server refuses loopback
//! endpoints) behind an EndpointSlice the harness writes; the Deployments are not applied.
//! The tests share one API server and its namespaces, so they run one at a time.
//!
//! The TCPRoute, UDPRoute and TLSRoute tests (`tcp_routes.rs`, `udp_routes.rs`, `tls_routes.rs`),
//! the BackendTLSPolicy ones (`backend_tls.rs`) and the client-certificate ones
//! (`frontend_validation.rs`) come from the suite of v1.6.1, with its Gateway CRD (v1.5 added
//! `spec.tls.frontend`). A Service's backend is what echo-basic in the Deployment it selects would
//! run: the suite's TCP or UDP echo server, or its HTTP one, over TLS on 8443 with the certificate
//! the Deployment mounts (the suite's CA and certificates: `tls_checks.rs`).
//!
//! `docs/gateway-api.md` lists what passes in the suite's vocabulary, and what is not translated.

use ramjet_test_support as support;
use ramjet_test_support::{control_plane, go_tools, grpc_echo, h2_echo, h2client, kube_api, netns};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use control_plane::{base64, ControlPlane};
use grpc_echo::GrpcEcho;
use h2_echo::H2Echo;
use h2client::H2Client;
use kube_api::Kube;
use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::cluster::{ClusterOptions, LeaseOptions, StatusAddresses};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use serde_json::{json, Value};
use support::backend::Backend;
use support::client::{served_by, Conn, Response};
use support::tls_backend::TlsBackend;
use support::{eventually, temp_dir};

const MODULE: &str = "sigs.k8s.io/gateway-api@v1.4.0";
/// The suite whose Layer-4 tests (TCPRoute, UDPRoute, TLSRoute) are translated (a module of its own since v1.5), and
/// the API whose CRDs for them are installed.
const MODULE_L4: &str = "sigs.k8s.io/gateway-api/conformance@v1.6.1";
const API_L4: &str = "sigs.k8s.io/gateway-api@v1.6.1";
const CLASS: &str = "ramjet-conformance";
const CONTROLLER: &str = "ramjet.dev/gateway-controller";
const INFRA: &str = "gateway-conformance-infra";
const GROUP: &str = "gateway.networking.k8s.io";
/// The address ramjet publishes in Gateway status (the suite waits for one).
const ADDRESS: &str = "127.0.0.1";
/// How long a status or an answer may take to become what the test expects; generous, for a
/// loaded 2-core machine running the API server, etcd, ramjet and the test at once.
const PATIENCE: Duration = Duration::from_secs(60);
/// The suite's `RequiredConsecutiveSuccesses`.
const CONSECUTIVE: usize = 3;

fn module_dir(module: &str) -> PathBuf {
    let out = Command::new("go")
        .args(["mod", "download", "-json", module])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run go mod download");
    assert!(out.status.success(), "go mod download {module}: {}", String::from_utf8_lossy(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(info["Dir"].as_str().unwrap())
}

/// The documents of a manifest, with the GatewayClass name templated in. Gateways and routes
/// written as `v1beta1` are sent as `v1`, and ReferenceGrants written as `v1` (v1.6.1) as
/// `v1beta1`: the same schemas, in the versions the test client speaks.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(&text.replace("{GATEWAY_CLASS_NAME}", CLASS))
        .filter_map(|doc| <Value as serde::Deserialize>::deserialize(doc).ok())
        .filter(|doc| doc.is_object())
        .map(|mut doc: Value| {
            if doc["apiVersion"] == format!("{GROUP}/v1beta1") && doc["kind"] != "ReferenceGrant" {
                doc["apiVersion"] = json!(format!("{GROUP}/v1"));
            }
            if doc["apiVersion"] == format!("{GROUP}/v1") && doc["kind"] == "ReferenceGrant" {
                doc["apiVersion"] = json!(format!("{GROUP}/v1beta1"));
            }
            doc
        })
        .collect()
}

fn name_of(doc: &Value) -> (String, String) {
    let meta = &doc["metadata"];
    (meta["namespace"].as_str().unwrap_or("default").to_string(), meta["name"].as_str().unwrap().to_string())
}

/// The API server, the suite's base manifests on it, and their backends: set up once per run.
struct Cluster {
    admin: Kube,
    kubeconfig: PathBuf,
    module: PathBuf,
    /// The tests of the v1.6.1 suite ([`MODULE_L4`]).
    l4_tests: PathBuf,
    /// Every backend of every Service applied so far, by `namespace/service`.
    backends: Mutex<BTreeMap<String, &'static Backend>>,
    /// The h2c backends of Services' other `appProtocol: kubernetes.io/h2c` ports, by
    /// `namespace/service`.
    h2c: Mutex<BTreeMap<String, &'static H2Echo>>,
    /// The public key of the HTTPS Gateway's certificate (PEM), pinned by the tests' HTTPS client.
    public_key: PathBuf,
    /// Every Deployment of the manifests applied so far: what the Pods a Service selects run.
    deployments: Mutex<Vec<Value>>,
    /// The CA and certificates of the suite's TLS backends and listeners.
    tls_checks: tls_checks::TlsChecks,
}

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let plane = ControlPlane::shared();
        let admin = Kube::new(&plane.admin_kubeconfig);
        let (module, l4_api) = (module_dir(MODULE), module_dir(API_L4));
        let crds = [
            // Gateways of v1.6.1: `spec.tls.frontend` (client certificates) is from v1.5.
            ("gatewayclasses", &l4_api),
            ("gateways", &l4_api),
            ("httproutes", &module),
            ("grpcroutes", &module),
            ("referencegrants", &l4_api),
            ("tcproutes", &l4_api),
            ("udproutes", &l4_api),
            ("tlsroutes", &l4_api),
            ("backendtlspolicies", &l4_api),
        ];
        for (kind, module) in crds {
            let path = module.join(format!("config/crd/standard/gateway.networking.k8s.io_{kind}.yaml"));
            let yaml = std::fs::read_to_string(path).unwrap();
            admin.try_apply_as(&yaml, "test").unwrap_or_else(|e| panic!("installing the {kind} CRD: {e}"));
        }
        for kind in [
            "GatewayClass",
            "Gateway",
            "HTTPRoute",
            "GRPCRoute",
            "ReferenceGrant",
            "TCPRoute",
            "UDPRoute",
            "TLSRoute",
            "BackendTLSPolicy",
        ] {
            assert!(eventually(PATIENCE, || admin.try_list(kind, None).is_ok()), "the {kind} CRD is never served");
        }
        admin.apply(&format!(
            "apiVersion: {GROUP}/v1\nkind: GatewayClass\nmetadata: {{ name: {CLASS} }}\n\
             spec: {{ controllerName: {CONTROLLER} }}\n"
        ));
        let dir = temp_dir("conformance");
        let public_key = dir.join("tls-validity-checks-certificate.pub.pem");
        let cluster = Cluster {
            admin,
            kubeconfig: plane.admin_kubeconfig.clone(),
            l4_tests: module_dir(MODULE_L4).join("tests"),
            module,
            backends: Mutex::default(),
            h2c: Mutex::default(),
            public_key,
            deployments: Mutex::default(),
            tls_checks: tls_checks::TlsChecks::new(),
        };
        // The base of v1.4.0, with the backends the base of v1.6.1 adds for its Layer-4 tests.
        let mut base = documents(&cluster.read("base/manifests.yaml"));
        let l4_base = std::fs::read_to_string(cluster.l4_tests.join("../base/manifests.yaml")).unwrap();
        let added: Vec<Value> = documents(&l4_base)
            .into_iter()
            .filter(|doc| !base.iter().any(|d| d["kind"] == doc["kind"] && name_of(d) == name_of(doc)))
            .collect();
        assert!(added.iter().all(|d| d["kind"] == "Service" || d["kind"] == "Deployment"), "{added:#?}");
        base.extend(added);
        cluster.apply(&base);
        cluster.tls_checks.write_to(&cluster.admin);
        // The suite's set-up: `MustCreateSelfSignedCertSecret(…, "tls-validity-checks-certificate", ["*", "*.org"])`.
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["*".to_string(), "*.org".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&cluster.public_key, key.public_key_pem()).unwrap();
        cluster.admin.apply_value(
            &json!({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": { "name": "tls-validity-checks-certificate", "namespace": INFRA },
                "data": { "tls.crt": base64(cert.pem().as_bytes()), "tls.key": base64(key.serialize_pem().as_bytes()) },
            }),
            "test",
        )
        .unwrap();
        cluster
    })
}

impl Cluster {
    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.module.join("conformance").join(path)).unwrap()
    }

    /// Applies the documents (namespaces first; Deployments are for the kubelet there is not), with
    /// a local backend and an EndpointSlice for each Service: what the Pods it selects would run.
    /// Returns the objects applied.
    fn apply(&self, docs: &[Value]) -> Vec<Value> {
        self.deployments.lock().unwrap().extend(docs.iter().filter(|d| d["kind"] == "Deployment").cloned());
        let mut applied = Vec::new();
        let mut ordered: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Namespace").collect();
        ordered.extend(docs.iter().filter(|d| d["kind"] != "Namespace" && d["kind"] != "Deployment"));
        for doc in ordered {
            self.admin.apply_value(doc, "test").unwrap_or_else(|e| panic!("apply: {e}\n{doc:#}"));
            applied.push(doc.clone());
            if doc["kind"] == "Service" {
                applied.push(self.serve(doc));
            }
        }
        applied
    }

    /// Starts the backends of a Service as the echo-basic of the Deployment it selects would:
    /// the suite's TCP or UDP echo server, its DNS server, or its HTTP echo server (over TLS on
    /// 8443 when the Deployment mounts a certificate); the EndpointSlice naming them, applied.
    fn serve(&self, service: &Value) -> Value {
        let deployment = self.deployment_of(service);
        let runs = |server: &str| {
            let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().cloned();
            containers
                .unwrap_or_default()
                .iter()
                .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
                .any(|e| e["name"] == server)
        };
        let tls_secret = tls_checks::served_secret(&deployment);
        let tls_port = |port: &Value| port["targetPort"].as_u64() == Some(tls_checks::TLS_PORT);
        let pod = deployment["metadata"]["name"].as_str().unwrap_or("").to_string();
        let ports = service["spec"]["ports"].as_array().cloned().unwrap_or_default();
        if runs("TCP_ECHO_SERVER") {
            let named = ports.iter().map(|port| {
                let tls = tls_secret.as_deref().filter(|_| tls_port(port)).map(|s| self.tls_checks.server_config(s));
                json!({ "name": port["name"], "port": tcp_routes::echo_server(service, &pod, tls) })
            });
            self.endpoint_slice(service, named.collect())
        } else if runs("UDP_ECHO_SERVER") || name_of(service).1 == "coredns" {
            // The base manifests' CoreDNS (for `UDPRouteSimple`): a DNS server of our own.
            let port = if name_of(service).1 == "coredns" {
                udp_routes::dns_server()
            } else {
                udp_routes::echo_server(service)
            };
            let port = json!({ "name": ports[0]["name"], "port": port, "protocol": "UDP" });
            self.endpoint_slice(service, vec![port])
        } else if let Some(secret) = tls_secret.filter(|_| ports.iter().all(tls_port)) {
            let name: &'static str = Box::leak(format!("{pod}-0").into_boxed_str());
            let client_ca = tls_checks::required_client_ca(&deployment).map(|ca| self.tls_checks.ca_of(&ca));
            let backend = TlsBackend::serve(name, netns::bind_backend(), &self.tls_checks.pki, &secret, client_ca);
            let named = ports.iter().map(|port| json!({ "name": port["name"], "port": backend.addr.port() }));
            self.endpoint_slice(service, named.collect())
        } else {
            self.endpoints(service)
        }
    }

    /// The Deployment whose Pods a Service selects (`Null` for none).
    fn deployment_of(&self, service: &Value) -> Value {
        let Some(selector) = service["spec"]["selector"].as_object() else { return Value::Null };
        let namespace = name_of(service).0;
        let deployments = self.deployments.lock().unwrap();
        let selected = deployments.iter().rev().find(|d| {
            let labels = &d["spec"]["template"]["metadata"]["labels"];
            name_of(d).0 == namespace && selector.iter().all(|(k, v)| &labels[k] == v)
        });
        selected.cloned().unwrap_or(Value::Null)
    }

    /// Starts a backend for a Service and names it in an EndpointSlice: for its first port, the
    /// suite's gRPC echo server when that port is `appProtocol: kubernetes.io/h2c`, else an
    /// HTTP/1.1 one; for a later h2c port, an h2c echo server; a later port with the first one's
    /// `targetPort` (the WebSocket one) goes to the first port's backend.
    fn endpoints(&self, service: &Value) -> Value {
        let (ns, name) = name_of(service);
        let ports = service["spec"]["ports"].as_array().cloned().unwrap_or_default();
        let listener = netns::bind_backend();
        let addr = if service["spec"]["ports"][0]["appProtocol"] == "kubernetes.io/h2c" {
            Box::leak(Box::new(GrpcEcho::on_listener(&ns, &name, listener))).addr
        } else {
            let backend: &'static Backend =
                Box::leak(Box::new(Backend::on_listener(&format!("{ns}/{name}"), listener, None)));
            self.backends.lock().unwrap().insert(format!("{ns}/{name}"), backend);
            backend.addr
        };
        let mut named = vec![json!({ "name": ports[0]["name"].as_str().unwrap_or(""), "port": addr.port() })];
        for port in &ports[1..] {
            let port_number = if port["appProtocol"] == "kubernetes.io/h2c" {
                let echo: &'static H2Echo = Box::leak(Box::new(H2Echo::on_listener(netns::bind_backend())));
                self.h2c.lock().unwrap().insert(format!("{ns}/{name}"), echo);
                echo.addr.port()
            } else if port["targetPort"] == ports[0]["targetPort"] {
                addr.port()
            } else {
                continue;
            };
            named.push(json!({ "name": port["name"], "port": port_number }));
        }
        self.endpoint_slice(service, named)
    }

    /// The EndpointSlice naming the backends' address (the backend namespace's) for `service`'s
    /// `ports`, applied.
    fn endpoint_slice(&self, service: &Value, ports: Vec<Value>) -> Value {
        let (ns, name) = name_of(service);
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": { "name": format!("{name}-local"), "namespace": ns,
                          "labels": { "kubernetes.io/service-name": name } },
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": [{ "addresses": [netns::BACKEND_IP.to_string()] }],
        });
        self.admin.apply_value(&slice, "test").unwrap();
        slice
    }

    fn backend(&self, name: &str) -> &'static Backend {
        let key = if name.contains('/') { name.to_string() } else { format!("{INFRA}/{name}") };
        self.backends.lock().unwrap().get(&key).copied().unwrap_or_else(|| panic!("no backend {key}"))
    }

    fn get(&self, kind: &str, ns: &str, name: &str) -> Value {
        self.admin.get(kind, Some(ns), name).unwrap_or_else(|| panic!("no {kind} {ns}/{name}"))
    }
}

/// `ns/name`, or `name` in the infra namespace.
fn split(name: &str) -> (&str, &str) {
    name.split_once('/').unwrap_or((INFRA, name))
}

/// Whether every condition was observed at the object's generation (`ConditionsHaveLatestObservedGeneration`).
fn latest(object: &Value, conditions: &Value) -> bool {
    let generation = &object["metadata"]["generation"];
    conditions.as_array().is_some_and(|c| c.iter().all(|c| &c["observedGeneration"] == generation))
}

/// Whether `conditions` has one of this type and status, and this reason unless `reason` is empty.
fn has_condition(conditions: &Value, type_: &str, status: &str, reason: &str) -> bool {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == status && (reason.is_empty() || c["reason"] == reason))
}

/// Until the Gateway's conditions are current and its listener `listener` passes `check`.
fn listener_until(gateway: &str, listener: &str, what: &str, check: impl Fn(&Value) -> bool) {
    let (ns, name) = split(gateway);
    status_until(
        &format!("listener {listener} of {gateway}: {what}"),
        || cluster().get("Gateway", ns, name),
        |gw| {
            latest(gw, &gw["status"]["conditions"])
                && gw["status"]["listeners"]
                    .as_array()
                    .is_some_and(|ls| ls.iter().any(|l| l["name"] == listener && check(l)))
        },
    );
}

/// Polls `check` on a fresh read of an object until it holds; panics with the object's status.
fn status_until(what: &str, read: impl Fn() -> Value, check: impl Fn(&Value) -> bool) {
    let mut last = Value::Null;
    let held = eventually(PATIENCE, || {
        last = read();
        let ok = check(&last);
        if !ok {
            std::thread::sleep(Duration::from_millis(100));
        }
        ok
    });
    assert!(held, "{what}; status: {:#}", last["status"]);
}

/// One test: its manifest applied to the cluster and ramjet watching it.
struct Suite {
    daemon: Option<Daemon>,
    /// The kind of the test's routes: `HTTPRoute`, or `GRPCRoute`.
    route_kind: &'static str,
    applied: Vec<Value>,
    _serial: MutexGuard<'static, ()>,
}

impl Suite {
    fn start(test: &str) -> Suite {
        Self::start_of("HTTPRoute", test)
    }

    fn start_grpc(test: &str) -> Suite {
        Self::start_of("GRPCRoute", test)
    }

    fn start_of(route_kind: &'static str, test: &str) -> Suite {
        Self::start_in(route_kind, &cluster().module.join("conformance/tests"), test)
    }

    /// A test of the v1.6.1 suite ([`MODULE_L4`]).
    fn start_l4(route_kind: &'static str, test: &str) -> Suite {
        Self::start_in(route_kind, &cluster().l4_tests, test)
    }

    /// A TLSRoute test of the v1.6.1 suite: ramjet's HTTPS port is the Gateways' 443 only, so that
    /// a TLS listener on 8443 is one of its own (the chart maps both to HTTPS by default).
    fn start_l4_tls(route_kind: &'static str, test: &str) -> Suite {
        Self::start_with(route_kind, &cluster().l4_tests, test, &[443])
    }

    fn start_in(route_kind: &'static str, tests: &Path, test: &str) -> Suite {
        Self::start_with(route_kind, tests, test, &IngressOptions::default().https_ports)
    }

    fn start_with(route_kind: &'static str, tests: &Path, test: &str, https_ports: &[u16]) -> Suite {
        let manifest = std::fs::read_to_string(tests.join(test)).unwrap();
        Self::start_docs(route_kind, test.trim_end_matches(".yaml"), &documents(&manifest), https_ports)
    }

    /// The test `identity` with these documents of its manifest.
    fn start_docs(route_kind: &'static str, identity: &str, docs: &[Value], https_ports: &[u16]) -> Suite {
        static SERIAL: Mutex<()> = Mutex::new(());
        let serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let cluster = cluster();
        let applied = cluster.apply(docs);
        let mut lease = LeaseOptions::new(format!("conformance-{identity}"), Some(INFRA.into()), identity);
        lease.retry = Duration::from_millis(100);
        let ingress = IngressOptions { https_ports: https_ports.to_vec(), ..IngressOptions::default() };
        let mut options = ClusterOptions::new(Some(cluster.kubeconfig.clone()), ingress, lease);
        options.status_addresses = StatusAddresses::Addresses(vec![ADDRESS.into()]);
        options.debounce = Duration::from_millis(5);
        ramjet::install_crypto();
        let mut config = DaemonConfig::with_source(Source::Cluster(options));
        config.io_driver = IoDriver::Auto;
        config.settings.drain_timeout = Duration::from_secs(1);
        let daemon = Daemon::start(config).expect("the daemon starts");
        Suite { daemon: Some(daemon), route_kind, applied, _serial: serial }
    }

    fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().unwrap()
    }

    /// `GatewayAndHTTPRoutesMustBeAccepted` for a Gateway referred to without a section, and
    /// `HTTPRouteMustHaveResolvedRefsConditionsTrue` for each route.
    fn accepted(&self, gateway: &str, routes: &[&str]) {
        self.accepted_on(gateway, &[None], routes);
        for route in routes {
            self.route_condition(route, gateway, "ResolvedRefs", "True", "ResolvedRefs");
        }
    }

    /// `GatewayAndHTTPRoutesMustBeAccepted`: the Gateway has an address and its conditions are
    /// current; each route has exactly one parent entry per listener named (ours, for this
    /// Gateway, `Accepted`); every listener is `Accepted`, `ResolvedRefs` and `Programmed`.
    fn accepted_on(&self, gateway: &str, listeners: &[Option<&str>], routes: &[&str]) {
        let c = cluster();
        let (gw_ns, gw_name) = split(gateway);
        let read_gateway = || c.get("Gateway", gw_ns, gw_name);
        status_until(&format!("Gateway {gateway} has an address"), read_gateway, |gw| {
            latest(gw, &gw["status"]["conditions"]) && gw["status"]["addresses"][0]["type"].is_string()
        });
        for route in routes {
            let namespace_required = split(route).0 != gw_ns;
            self.route_parents(route, gateway, listeners.len(), namespace_required, ("Accepted", "True", "Accepted"));
        }
        status_until(&format!("every listener of {gateway} is ready"), read_gateway, |gw| {
            latest(gw, &gw["status"]["conditions"])
                && gw["status"]["listeners"].as_array().is_some_and(|ls| {
                    ls.len() == gw["spec"]["listeners"].as_array().map_or(0, Vec::len)
                        && ls.iter().all(|l| {
                            ["Accepted", "ResolvedRefs", "Programmed"]
                                .iter()
                                .all(|t| has_condition(&l["conditions"], t, "True", ""))
                        })
                })
        });
    }

    /// `HTTPRouteMustHaveParents`: the route has exactly `count` parent entries, each ours, for
    /// this Gateway (its namespace named, or left out when not `namespace_required`), current and
    /// with the condition.
    fn route_parents(
        &self,
        route: &str,
        gateway: &str,
        count: usize,
        namespace_required: bool,
        (type_, status, reason): (&str, &str, &str),
    ) {
        let (ns, name) = split(route);
        let (gw_ns, gw_name) = split(gateway);
        status_until(
            &format!(
                "{} {route} has {count} parent entries for {gateway} with {type_}={status} ({reason})",
                self.route_kind
            ),
            || cluster().get(self.route_kind, ns, name),
            |r| {
                let parents = r["status"]["parents"].as_array().cloned().unwrap_or_default();
                parents.len() == count
                    && parents.iter().all(|p| {
                        let parent = &p["parentRef"];
                        latest(r, &p["conditions"])
                            && p["controllerName"] == CONTROLLER
                            && parent["group"] == GROUP
                            && parent["kind"] == "Gateway"
                            && parent["name"] == gw_name
                            && (parent["namespace"] == gw_ns || (!namespace_required && parent["namespace"].is_null()))
                            && has_condition(&p["conditions"], type_, status, reason)
                    })
            },
        );
    }

    /// `HTTPRouteMustHaveCondition`: the route's entry for `gateway` has the condition (any reason
    /// for an empty one), and all its entries are current.
    fn route_condition(&self, route: &str, gateway: &str, type_: &str, status: &str, reason: &str) {
        let c = cluster();
        let (ns, name) = split(route);
        let (gw_ns, gw_name) = split(gateway);
        status_until(
            &format!("{} {route} has {type_}={status} ({reason}) for {gateway}", self.route_kind),
            || c.get(self.route_kind, ns, name),
            |r| {
                let parents = r["status"]["parents"].as_array().cloned().unwrap_or_default();
                parents.iter().all(|p| latest(r, &p["conditions"]))
                    && parents.iter().any(|p| {
                        p["parentRef"]["name"] == gw_name
                            && (p["parentRef"]["namespace"].is_null() || p["parentRef"]["namespace"] == gw_ns)
                            && has_condition(&p["conditions"], type_, status, reason)
                    })
            },
        );
    }

    /// `HTTPRouteMustHaveNoAcceptedParents`: no entry, or one that is not accepted, seen twice a
    /// second apart (an empty list may only mean that status has not been written yet).
    fn no_accepted_parents(&self, route: &str) {
        let (ns, name) = split(route);
        let read = || cluster().get(self.route_kind, ns, name);
        let unaccepted = |r: &Value| match r["status"]["parents"].as_array().map(Vec::as_slice) {
            None | Some([]) => true,
            Some([p]) => latest(r, &p["conditions"]) && has_condition(&p["conditions"], "Accepted", "False", ""),
            Some(_) => false,
        };
        status_until(&format!("HTTPRoute {route} has no accepted parent"), read, unaccepted);
        std::thread::sleep(Duration::from_secs(1));
        status_until(&format!("HTTPRoute {route} still has no accepted parent"), read, unaccepted);
    }

    /// `GatewayMustHaveZeroRoutes`: no listener in status, or one with no routes attached.
    fn zero_routes(&self, gateway: &str) {
        let (ns, name) = split(gateway);
        status_until(
            &format!("Gateway {gateway} has no routes attached"),
            || cluster().get("Gateway", ns, name),
            |gw| {
                latest(gw, &gw["status"]["conditions"])
                    && match gw["status"]["listeners"].as_array().map(Vec::as_slice) {
                        None | Some([]) => true,
                        Some([listener]) => listener["attachedRoutes"] == 0,
                        Some(_) => false,
                    }
            },
        );
    }

    fn send(&self, method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        let mut conn = Conn::open(self.daemon().http_addr());
        let extra: String = headers.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
        conn.send(format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").as_bytes());
        conn.read_response_to(method == "HEAD").expect("an answer")
    }

    /// `MakeRequestAndExpectEventuallyConsistentResponse`: sends until `check` holds for
    /// [`CONSECUTIVE`] answers in a row; panics with the last answer.
    fn eventually_consistent<T: std::fmt::Debug>(&self, what: &str, send: impl Fn() -> T, check: impl Fn(&T) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        let mut streak = 0;
        loop {
            let resp = send();
            if check(&resp) {
                streak += 1;
                if streak == CONSECUTIVE {
                    return;
                }
                continue;
            }
            streak = 0;
            assert!(Instant::now() < deadline, "{what}: got {resp:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Checks one case: `want` is `namespace/service` for a backend, a name of an infra backend,
    /// or a status code.
    fn expect(&self, method: &str, host: &str, path: &str, headers: &[(&str, &str)], want: &str) {
        let want = if want.contains('/') || want.parse::<u16>().is_ok() {
            want.to_string()
        } else {
            format!("{INFRA}/{want}")
        };
        self.eventually_consistent(
            &format!("{method} {host}{path} {headers:?} should reach {want}"),
            || self.send(method, host, path, headers),
            |resp| (if resp.status == 200 { served_by(resp) } else { resp.status.to_string() }) == want,
        );
    }

    fn get(&self, path: &str, want: &str) {
        self.expect("GET", "example.com", path, &[], want);
    }

    /// The last request `infra/<backend>` received, as the suite's echo server reports it: the
    /// path, and each header's values joined with `,` (names lower case).
    fn seen_by(&self, backend: &str) -> (String, BTreeMap<String, String>) {
        let received = cluster().backend(backend).received();
        let start = received.rfind("GET ").expect("a request reached the backend");
        let head = received[start..].split("\r\n\r\n").next().unwrap();
        let mut lines = head.split("\r\n");
        let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for line in lines {
            let (name, value) = line.split_once(':').unwrap();
            let entry = headers.entry(name.trim().to_ascii_lowercase()).or_default();
            if !entry.is_empty() {
                entry.push(',');
            }
            entry.push_str(value.trim());
        }
        (path, headers)
    }

    /// Sends a GET and checks what infra-backend-v1 received: the path, `want` headers, `absent` ones.
    fn expect_request(
        &self,
        path: &str,
        sent: &[(&str, &str)],
        want_path: &str,
        want: &[(&str, &str)],
        absent: &[&str],
    ) {
        self.expect_request_to("example.com", path, sent, "infra-backend-v1", want_path, want, absent);
    }

    /// Sends a GET and checks which backend answered and what it received.
    #[allow(clippy::too_many_arguments)]
    fn expect_request_to(
        &self,
        host: &str,
        path: &str,
        sent: &[(&str, &str)],
        backend: &str,
        want_path: &str,
        want: &[(&str, &str)],
        absent: &[&str],
    ) {
        self.expect("GET", host, path, sent, backend);
        let (seen, headers) = self.seen_by(backend);
        assert_eq!(seen, want_path, "{path}");
        for (name, value) in want {
            assert_eq!(
                headers.get(&name.to_ascii_lowercase()).map(String::as_str),
                Some(*value),
                "{path}: {name} in {headers:?}"
            );
        }
        for name in absent {
            assert!(!headers.contains_key(&name.to_ascii_lowercase()), "{path}: {name} in {headers:?}");
        }
    }

    /// How many requests for `path` `infra/<backend>` has received so far.
    fn received(&self, backend: &str, path: &str) -> usize {
        cluster().backend(backend).received().matches(&format!("GET {path} HTTP/1.1\r\n")).count()
    }

    /// Waits for a copy of a request for `path` to reach `infra/<backend>`, as the suite's
    /// `ExpectMirroredRequest` reads the mirror backend's log.
    fn expect_mirrored(&self, backend: &str, path: &str) {
        let copied = eventually(Duration::from_secs(10), || self.received(backend, path) > 0);
        assert!(
            copied,
            "no copy of {path} reached the mirror; it received:\n{}",
            cluster().backend(backend).received()
        );
    }

    /// Sends a GET and checks the redirect: status and `Location` (`host` `None`: the request's).
    fn expect_redirect(&self, path: &str, status: u16, host: Option<&str>, want_path: &str) {
        self.expect_location(path, status, &format!("http://{}{want_path}", host.unwrap_or("example.com")));
    }

    /// Sends a GET and checks the redirect: status and the whole `Location`.
    fn expect_location(&self, path: &str, status: u16, location: &str) {
        self.eventually_consistent(
            &format!("GET {path} should redirect ({status}) to {location}"),
            || self.send("GET", "example.com", path, &[]),
            |resp| resp.status == status && resp.header("location") == Some(location),
        );
    }

    /// The suite's gRPC call (grpcurl, h2c with prior knowledge) of `GrpcEcho/<method>` through
    /// ramjet: `namespace/pod` of the echo server that answered, or the gRPC code's name.
    fn grpc(&self, method: &str, authority: Option<&str>, metadata: &[(&str, &str)]) -> String {
        let mut call = Command::new(go_tools::grpcurl());
        call.args(["-plaintext", "-max-time", "10", "-proto", "grpcecho.proto", "-import-path"])
            .arg(cluster().module.join("conformance/echo-basic"));
        for (name, value) in metadata {
            call.arg("-H").arg(format!("{name}: {value}"));
        }
        if let Some(authority) = authority {
            call.args(["-authority", authority]);
        }
        let out = call
            .arg(self.daemon().http_addr().to_string())
            .arg(format!("{}/{method}", grpc_echo::SERVICE))
            .output()
            .expect("grpcurl runs");
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return stderr.lines().find_map(|l| l.trim().strip_prefix("Code: ")).unwrap_or(&stderr).to_string();
        }
        let answer: Value = serde_json::from_slice(&out.stdout).expect("grpcurl prints the answer as JSON");
        let context = &answer["assertions"]["context"];
        format!("{}/{}", context["namespace"].as_str().unwrap_or(""), context["pod"].as_str().unwrap_or(""))
    }

    /// `grpc.MakeRequestAndExpectEventuallyConsistentResponse`: `want` is an infra backend's name
    /// (its pods' names start with it) or a gRPC code's name.
    fn expect_grpc(&self, method: &str, authority: Option<&str>, metadata: &[(&str, &str)], want: &str) {
        let backend = want.starts_with("grpc-").then(|| format!("{INFRA}/{want}"));
        self.eventually_consistent(
            &format!("{method} {authority:?} {metadata:?} should get {want}"),
            || self.grpc(method, authority, metadata),
            |got| backend.as_ref().map_or(got == want, |b| got.starts_with(b.as_str())),
        );
    }

    /// A GET over TLS to ramjet's HTTPS listener (SNI and `Host` are `host`), by curl. The suite's
    /// client trusts the Gateway's certificate; OpenSSL refuses its `*.org` name (a wildcard right
    /// above a top-level domain), so curl checks that the certificate served is that one instead.
    fn send_tls(&self, host: &str, path: &str) -> Response {
        self.send_tls_as(host, path, None).unwrap_or_else(|e| panic!("curl https://{host}{path}: {e}"))
    }

    /// [`Suite::send_tls`], presenting a client certificate (its certificate and key files) when
    /// the server asks for one; `Err`: the request failed (curl's words).
    fn send_tls_as(&self, host: &str, path: &str, client: Option<&(PathBuf, PathBuf)>) -> Result<Response, String> {
        let port = self.daemon().https_addr().expect("HTTPS is served").port();
        let mut curl = Command::new("curl");
        curl.args(["-sS", "-i", "--max-time", "10", "--insecure", "--pinnedpubkey"]).arg(&cluster().public_key);
        if let Some((cert, key)) = client {
            curl.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        let out = curl
            // As the suite sends it: the name alone, the listener being on the HTTPS port.
            .arg("-H")
            .arg(format!("Host: {host}"))
            .arg("--resolve")
            .arg(format!("{host}:{port}:127.0.0.1"))
            .arg(format!("https://{host}:{port}{path}"))
            .output()
            .expect("curl");
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        Ok(Response { status, head: head.to_string(), body: body.to_string(), trailers: String::new() })
    }
}

impl Drop for Suite {
    /// Stops ramjet (its ports closed: the next test's Gateways may use the same numbers), then
    /// deletes what the test applied (but its namespaces: with no controller-manager to finalize
    /// them, they would never go away).
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.shutdown();
        }
        let c = cluster();
        for doc in self.applied.iter().rev().filter(|d| d["kind"] != "Namespace") {
            let (ns, name) = name_of(doc);
            let kind = doc["kind"].as_str().unwrap();
            let cluster_scoped = kind == "GatewayClass";
            c.admin.delete(kind, (!cluster_scoped).then_some(ns.as_str()), &name);
        }
    }
}

#[test]
fn httproute_matching() {
    let s = Suite::start("httproute-matching.yaml");
    s.accepted("same-namespace", &["matching"]);
    s.get("/", "infra-backend-v1");
    s.get("/example", "infra-backend-v1");
    s.expect("GET", "example.com", "/", &[("Version", "one")], "infra-backend-v1");
    s.get("/v2", "infra-backend-v2");
    s.get("/v2/example", "infra-backend-v2");
    s.expect("GET", "example.com", "/", &[("Version", "two")], "infra-backend-v2");
    s.get("/v2/", "infra-backend-v2");
    s.get("/v2example", "infra-backend-v1");
    s.get("/foo/v2/example", "infra-backend-v1");
}

#[test]
fn httproute_exact_path_matching() {
    let s = Suite::start("httproute-exact-path-matching.yaml");
    s.accepted("same-namespace", &["exact-matching"]);
    s.get("/one", "infra-backend-v1");
    s.get("/two", "infra-backend-v2");
    s.get("/", "404");
    s.get("/one/example", "404");
    s.get("/two/", "404");
    s.get("/Two", "404");
}

#[test]
fn httproute_method_matching() {
    let s = Suite::start("httproute-method-matching.yaml");
    s.accepted("same-namespace", &["method-matching"]);
    let h = "example.com";
    s.expect("POST", h, "/", &[], "infra-backend-v1");
    s.expect("GET", h, "/", &[], "infra-backend-v2");
    s.expect("HEAD", h, "/", &[], "404");
    s.expect("GET", h, "/path1", &[], "infra-backend-v1");
    s.expect("PUT", h, "/", &[("version", "one")], "infra-backend-v2");
    s.expect("POST", h, "/path2", &[("version", "two")], "infra-backend-v3");
    s.expect("PATCH", h, "/path3", &[], "infra-backend-v1");
    s.expect("DELETE", h, "/path4", &[("version", "three")], "infra-backend-v1");
    s.expect("PUT", h, "/", &[], "404");
    s.expect("DELETE", h, "/path4", &[], "404");
    s.expect("PATCH", h, "/path5", &[], "infra-backend-v1");
    s.expect("PATCH", h, "/", &[("version", "four")], "infra-backend-v2");
}

#[test]
fn httproute_query_param_matching() {
    let s = Suite::start("httproute-query-param-matching.yaml");
    s.accepted("same-namespace", &["query-param-matching"]);
    s.get("/?animal=whale", "infra-backend-v1");
    s.get("/?animal=dolphin", "infra-backend-v2");
    s.get("/?animal=dolphin&color=blue", "infra-backend-v3");
    s.get("/?ANIMAL=Whale", "infra-backend-v3");
    s.get("/?animal=whale&otherparam=irrelevant", "infra-backend-v1");
    s.get("/?animal=dolphin&color=yellow", "infra-backend-v2");
    s.get("/?color=blue", "404");
    s.get("/?animal=dog", "404");
    s.get("/?animal=whaledolphin", "404");
    s.get("/", "404");
    s.get("/path1?animal=whale", "infra-backend-v1");
    s.expect("GET", "example.com", "/?animal=whale", &[("version", "one")], "infra-backend-v2");
    s.expect("GET", "example.com", "/path2?animal=whale", &[("version", "two")], "infra-backend-v3");
    s.get("/path3?animal=shark", "infra-backend-v1");
}

#[test]
fn httproute_path_match_order() {
    let s = Suite::start("httproute-path-match-order.yaml");
    s.accepted("same-namespace", &["path-matching-order"]);
    s.get("/match/exact/one", "infra-backend-v3");
    s.get("/match/exact", "infra-backend-v2");
    s.get("/match", "infra-backend-v1");
    s.get("/match/prefix/one/any", "infra-backend-v2");
    s.get("/match/prefix/any", "infra-backend-v1");
    s.get("/match/any", "infra-backend-v3");
}

#[test]
fn httproute_matching_across_routes() {
    let s = Suite::start("httproute-matching-across-routes.yaml");
    s.accepted("same-namespace", &["matching-part1", "matching-part2"]);
    let (com, net) = ("example.com", "example.net");
    s.expect("GET", com, "/", &[], "infra-backend-v1");
    s.expect("GET", com, "/example", &[], "infra-backend-v1");
    s.expect("GET", net, "/example", &[], "infra-backend-v1");
    s.expect("GET", com, "/example", &[("Version", "one")], "infra-backend-v1");
    s.expect("GET", com, "/v2", &[], "infra-backend-v2");
    s.expect("GET", net, "/v2", &[], "infra-backend-v1");
    s.expect("GET", com, "/v2/example", &[], "infra-backend-v2");
    s.expect("GET", com, "/", &[("Version", "two")], "infra-backend-v2");
}

#[test]
fn httproute_header_matching() {
    let s = Suite::start("httproute-header-matching.yaml");
    s.accepted("same-namespace", &["header-matching"]);
    let h = "example.com";
    s.expect("GET", h, "/", &[("Version", "one")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Version", "two")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Version", "two"), ("Color", "orange")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Version", "two"), ("Color", "blue")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Color", "orange")], "404");
    s.expect("GET", h, "/", &[("Some-Other-Header", "one")], "404");
    s.expect("GET", h, "/", &[("Color", "blue")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Color", "green")], "infra-backend-v1");
    s.expect("GET", h, "/", &[("Color", "red")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Color", "yellow")], "infra-backend-v2");
    s.expect("GET", h, "/", &[("Color", "purple")], "404");
}

#[test]
fn httproute_cross_namespace() {
    let s = Suite::start("httproute-cross-namespace.yaml");
    s.accepted("backend-namespaces", &["gateway-conformance-web-backend/cross-namespace"]);
    s.get("/", "gateway-conformance-web-backend/web-backend");
}

#[test]
fn httproute_weight() {
    let s = Suite::start("httproute-weight.yaml");
    s.accepted("same-namespace", &["weighted-backends"]);
    let mut conn = Conn::open(s.daemon().http_addr());
    weighted_70_30(|| {
        let resp = conn.get("example.com", "/");
        assert_eq!(resp.status, 200);
        served_by(&resp).trim_start_matches(&format!("{INFRA}/infra-backend-")).to_string()
    });
}

/// As the suite's `weight.TestWeightedDistribution`: a sample of 500 requests must fall within 5
/// points either way of 70/30/0 for backends v1/v2/v3, and a sample that misses is taken again, up
/// to 10 times (5 points is about 2.4 standard deviations of a 500-request sample, so one sample in
/// 70 misses by chance). v3, with weight 0, must never answer in any sample. `answer` sends one
/// request and names the backend that answered (`v1`, …).
fn weighted_70_30(mut answer: impl FnMut() -> String) {
    let mut samples = Vec::new();
    for _ in 0..10 {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..500 {
            *seen.entry(answer()).or_default() += 1;
        }
        let share = |b: &str| seen.get(b).copied().unwrap_or(0) as f64 / 500.0;
        assert_eq!(share("v1") + share("v2"), 1.0, "only v1 and v2 answer: {seen:?}");
        let within = (share("v1") - 0.7).abs() <= 0.05 && (share("v2") - 0.3).abs() <= 0.05;
        samples.push(seen);
        if within {
            return;
        }
    }
    panic!("no sample within 5 points of 70/30: {samples:?}");
}

#[test]
fn httproute_rewrite_path() {
    let s = Suite::start("httproute-rewrite-path.yaml");
    s.accepted("same-namespace", &["rewrite-path"]);
    s.expect_request("/prefix/one/two", &[], "/one/two", &[], &[]);
    s.expect_request("/strip-prefix/three", &[], "/three", &[], &[]);
    s.expect_request("/strip-prefix", &[], "/", &[], &[]);
    s.expect_request("/full/one/two", &[], "/one", &[], &[]);
    s.expect_request(
        "/full/rewrite-path-and-modify-headers/test",
        &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1"), ("X-Header-Set", "set-val")],
        "/test",
        &[
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    );
}

#[test]
fn httproute_request_header_modifier() {
    request_header_modifier("httproute-request-header-modifier.yaml");
}

/// The same cases, with the filters on the rules' backendRefs.
#[test]
fn httproute_backend_request_header_modifier() {
    request_header_modifier("httproute-request-header-modifier-backend.yaml");
}

fn request_header_modifier(test: &str) {
    let s = Suite::start(test);
    s.accepted("same-namespace", &["request-header-modifier"]);
    let other = ("Some-Other-Header", "val");
    s.expect_request("/set", &[other], "/set", &[other, ("X-Header-Set", "set-overwrites-values")], &[]);
    s.expect_request(
        "/set",
        &[other, ("X-Header-Set", "some-other-value")],
        "/set",
        &[other, ("X-Header-Set", "set-overwrites-values")],
        &[],
    );
    s.expect_request("/add", &[other], "/add", &[other, ("X-Header-Add", "add-appends-values")], &[]);
    s.expect_request(
        "/add",
        &[other, ("X-Header-Add", "some-other-value")],
        "/add",
        &[other, ("X-Header-Add", "some-other-value,add-appends-values")],
        &[],
    );
    s.expect_request("/remove", &[("X-Header-Remove", "val")], "/remove", &[], &["X-Header-Remove"]);
    s.expect_request(
        "/multiple",
        &[
            ("X-Header-Set-2", "set-val-2"),
            ("X-Header-Add-2", "add-val-2"),
            ("X-Header-Remove-2", "remove-val-2"),
            ("Another-Header", "another-header-val"),
        ],
        "/multiple",
        &[
            ("X-Header-Set-1", "header-set-1"),
            ("X-Header-Set-2", "header-set-2"),
            ("X-Header-Add-1", "header-add-1"),
            ("X-Header-Add-2", "add-val-2,header-add-2"),
            ("X-Header-Add-3", "header-add-3"),
            ("Another-Header", "another-header-val"),
        ],
        &["X-Header-Remove-1", "X-Header-Remove-2"],
    );
    s.expect_request(
        "/case-insensitivity",
        &[
            ("x-header-set", "original-val-set"),
            ("x-header-add", "original-val-add"),
            ("x-header-remove", "original-val-remove"),
            ("Another-Header", "another-header-val"),
        ],
        "/case-insensitivity",
        &[
            ("X-Header-Set", "header-set"),
            ("X-Header-Add", "original-val-add,header-add"),
            ("Another-Header", "another-header-val"),
        ],
        &["x-header-remove"],
    );
}

#[test]
fn httproute_redirect_path() {
    let s = Suite::start("httproute-redirect-path.yaml");
    s.accepted("same-namespace", &["redirect-path"]);
    s.expect_redirect("/original-prefix/lemon", 302, None, "/replacement-prefix/lemon");
    s.expect_redirect("/full/path/original", 302, None, "/full-path-replacement");
    s.expect_redirect("/path-and-host", 302, Some("example.org"), "/replacement-prefix");
    s.expect_redirect("/path-and-status", 301, None, "/replacement-prefix");
    s.expect_redirect("/full-path-and-host", 302, Some("example.org"), "/replacement-full");
    s.expect_redirect("/full-path-and-status", 301, None, "/replacement-full");
}

#[test]
fn httproute_request_multiple_mirrors() {
    let s = Suite::start("httproute-request-multiple-mirrors.yaml");
    s.accepted("same-namespace", &["request-multiple-mirrors"]);
    s.expect_request("/multi-mirror", &[], "/multi-mirror", &[], &[]);
    for mirror in ["infra-backend-v2", "infra-backend-v3"] {
        s.expect_mirrored(mirror, "/multi-mirror");
    }
    let path = "/multi-mirror-and-modify-request-headers";
    s.expect_request(
        path,
        &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")],
        path,
        &[
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    );
    for mirror in ["infra-backend-v2", "infra-backend-v3"] {
        s.expect_mirrored(mirror, path);
    }
}

#[test]
fn httproute_redirect_host_and_status() {
    let s = Suite::start("httproute-redirect-host-and-status.yaml");
    s.accepted("same-namespace", &["redirect-host-and-status"]);
    s.expect_redirect("/hostname-redirect", 302, Some("example.org"), "/hostname-redirect");
    s.expect_redirect("/host-and-status", 301, Some("example.org"), "/host-and-status");
}

#[test]
fn httproute_request_timeout() {
    let s = Suite::start("httproute-timeout-request.yaml");
    s.accepted("same-namespace", &["request-timeout"]);
    s.get("/request-timeout", "infra-backend-v1");
    s.get("/request-timeout?delay=1s", "504");
    s.get("/disable-request-timeout?delay=1s", "infra-backend-v1");
}

#[test]
fn httproute_backend_request_timeout() {
    let s = Suite::start("httproute-timeout-backend-request.yaml");
    s.accepted("same-namespace", &["backend-request-timeout"]);
    s.get("/backend-timeout", "infra-backend-v1");
    s.get("/backend-timeout?delay=1s", "504");
    s.get("/disable-backend-timeout?delay=1s", "infra-backend-v1");
}

/// The `http-listener-on-80` and `https-listener-on-443` cases. The route on the 8080 listener
/// needs a listener port ramjet does not listen on (`GatewayPort8080` is not supported).
#[test]
fn httproute_redirect_port_and_scheme() {
    let s = Suite::start("httproute-redirect-port-and-scheme.yaml");
    s.accepted("same-namespace", &["http-route-for-listener-on-port-80"]);
    for (path, location) in [
        ("/scheme-nil-and-port-nil", "http://example.org/scheme-nil-and-port-nil"),
        ("/scheme-nil-and-port-80", "http://example.org/scheme-nil-and-port-80"),
        ("/scheme-nil-and-port-8080", "http://example.org:8080/scheme-nil-and-port-8080"),
        ("/scheme-https-and-port-nil", "https://example.org/scheme-https-and-port-nil"),
        ("/scheme-https-and-port-443", "https://example.org/scheme-https-and-port-443"),
        ("/scheme-https-and-port-8443", "https://example.org:8443/scheme-https-and-port-8443"),
    ] {
        s.expect_location(path, 302, location);
    }
    s.accepted("same-namespace-with-https-listener", &["http-route-for-listener-on-port-443"]);
    for (path, location) in [
        ("/scheme-nil-and-port-nil", "https://example.org/scheme-nil-and-port-nil"),
        ("/scheme-nil-and-port-443", "https://example.org/scheme-nil-and-port-443"),
        ("/scheme-nil-and-port-8443", "https://example.org:8443/scheme-nil-and-port-8443"),
        ("/scheme-http-and-port-nil", "http://example.org/scheme-http-and-port-nil"),
        ("/scheme-http-and-port-80", "http://example.org/scheme-http-and-port-80"),
        ("/scheme-http-and-port-8080", "http://example.org:8080/scheme-http-and-port-8080"),
    ] {
        s.eventually_consistent(
            &format!("GET https://example.org{path} should redirect to {location}"),
            || s.send_tls("example.org", path),
            |resp| resp.status == 302 && resp.header("location") == Some(location),
        );
    }
}

#[test]
fn httproute_redirect_port() {
    let s = Suite::start("httproute-redirect-port.yaml");
    s.accepted("same-namespace", &["redirect-port"]);
    s.expect_location("/port", 302, "http://example.com:8083/port");
    s.expect_location("/port-and-host", 302, "http://example.org:8083/port-and-host");
    s.expect_location("/port-and-status", 301, "http://example.com:8083/port-and-status");
    s.expect_location("/port-and-host-and-status", 302, "http://example.org:8083/port-and-host-and-status");
}

#[test]
fn httproute_redirect_scheme() {
    let s = Suite::start("httproute-redirect-scheme.yaml");
    s.accepted("same-namespace", &["redirect-scheme"]);
    s.expect_location("/scheme", 302, "https://example.com/scheme");
    s.expect_location("/scheme-and-host", 302, "https://example.org/scheme-and-host");
    s.expect_location("/scheme-and-status", 301, "https://example.com/scheme-and-status");
    s.expect_location("/scheme-and-host-and-status", 302, "https://example.org/scheme-and-host-and-status");
}

#[test]
fn httproute_rewrite_host() {
    let s = Suite::start("httproute-rewrite-host.yaml");
    s.accepted("same-namespace", &["rewrite-host"]);
    let host = "rewrite.example";
    s.expect_request_to(host, "/one", &[], "infra-backend-v1", "/one", &[("Host", "one.example.org")], &[]);
    s.expect_request_to(host, "/two", &[], "infra-backend-v2", "/two", &[("Host", "example.org")], &[]);
    s.expect_request_to(
        host,
        "/rewrite-host-and-modify-headers",
        &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")],
        "infra-backend-v2",
        "/rewrite-host-and-modify-headers",
        &[
            ("Host", "test.example.org"),
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    );
}

#[test]
fn httproute_request_mirror() {
    let s = Suite::start("httproute-request-mirror.yaml");
    s.accepted_on("same-namespace", &[None], &["request-mirror"]);
    s.expect_request("/mirror", &[], "/mirror", &[], &[]);
    s.expect_mirrored("infra-backend-v2", "/mirror");
    let path = "/mirror-and-modify-headers";
    s.expect_request(
        path,
        &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")],
        path,
        &[
            ("X-Header-Add", "header-val-1"),
            ("X-Header-Add-Append", "append-val-1,header-val-2"),
            ("X-Header-Set", "set-overwrites-values"),
        ],
        &["X-Header-Remove"],
    );
    s.expect_mirrored("infra-backend-v2", path);
}

/// As the suite: 500 requests, and the mirror must have received its percentage of them within
/// 15 % either way; a sample that misses is taken again, up to 5 times.
#[test]
fn httproute_request_percentage_mirror() {
    let s = Suite::start("httproute-request-percentage-mirror.yaml");
    s.accepted("same-namespace", &["request-percentage-mirror"]);
    let headers = [("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")];
    for (path, sent, percent) in [
        ("/percent-mirror", &[][..], 20.0),
        ("/percent-mirror-fraction", &[][..], 50.0),
        ("/percent-mirror-and-modify-headers", &headers[..], 35.0),
    ] {
        s.expect_request(path, sent, path, &[], &[]);
        let mut conn = Conn::open(s.daemon().http_addr());
        let extra: String = sent.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
        let (low, high) = (500.0 * percent / 100.0 * 0.85, 500.0 * percent / 100.0 * 1.15);
        let mut samples = Vec::new();
        let within = (0..5).any(|_| {
            let before = s.received("infra-backend-v2", path);
            for _ in 0..500 {
                assert_eq!(served_by(&conn.get_with("example.com", path, &extra)), format!("{INFRA}/infra-backend-v1"));
            }
            // The copies are sent on their own; wait until they stop arriving.
            let mut seen = s.received("infra-backend-v2", path);
            loop {
                std::thread::sleep(Duration::from_millis(300));
                let now = s.received("infra-backend-v2", path);
                if now == seen {
                    break;
                }
                seen = now;
            }
            let mirrored = (seen - before) as f64;
            samples.push(mirrored);
            (low..=high).contains(&mirrored)
        });
        assert!(within, "{path}: mirrored {samples:?} of 500 at {percent} %");
    }
}

#[test]
fn httproute_response_header_modifier() {
    let s = Suite::start("httproute-response-header-modifier.yaml");
    s.accepted("same-namespace", &["response-header-modifier"]);
    // (path, request fields, what the backend answers with, expected fields, absent fields)
    type Case<'a> =
        (&'a str, &'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            "/set",
            &[],
            &[("Some-Other-Header", "val")],
            &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")],
            &[],
        ),
        (
            "/set",
            &[],
            &[("Some-Other-Header", "val"), ("X-Header-Set", "some-other-value")],
            &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")],
            &[],
        ),
        (
            "/add",
            &[],
            &[("Some-Other-Header", "val")],
            &[("Some-Other-Header", "val"), ("X-Header-Add", "add-appends-values")],
            &[],
        ),
        (
            "/add",
            &[],
            &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value")],
            &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value,add-appends-values")],
            &[],
        ),
        ("/remove", &[], &[("X-Header-Remove", "val")], &[], &["X-Header-Remove"]),
        (
            "/multiple",
            &[],
            &[
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
                ("X-Header-Remove-1", "val"),
            ],
            &[
                ("X-Header-Set-1", "header-set-1"),
                ("X-Header-Set-2", "header-set-2"),
                ("X-Header-Add-1", "header-add-1"),
                ("X-Header-Add-2", "add-val-2,header-add-2"),
                ("X-Header-Add-3", "header-add-3"),
                ("Another-Header", "another-header-val"),
            ],
            &["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
        (
            "/case-insensitivity",
            &[],
            &[
                ("x-header-set", "original-val-set"),
                ("x-header-add", "original-val-add"),
                ("x-header-remove", "original-val-remove"),
                ("Another-Header", "another-header-val"),
            ],
            &[
                ("X-Header-Set", "header-set"),
                ("X-Header-Add", "original-val-add,header-add"),
                ("X-Lowercase-Add", "lowercase-add"),
                ("X-Mixedcase-Add-1", "mixedcase-add-1"),
                ("X-Mixedcase-Add-2", "mixedcase-add-2"),
                ("X-Uppercase-Add", "uppercase-add"),
                ("Another-Header", "another-header-val"),
            ],
            &["x-header-remove", "X-Header-Remove"],
        ),
        (
            "/response-and-request-header-modifiers",
            &[("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1"), ("X-Header-Echo", "echo")],
            &[
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
                ("X-Header-Remove-1", "remove-val-1"),
                ("X-Header-Echo", "echo"),
            ],
            &[
                ("X-Header-Set-1", "header-set-1"),
                ("X-Header-Set-2", "header-set-2"),
                ("X-Header-Add-1", "header-add-1"),
                ("X-Header-Add-2", "add-val-2,header-add-2"),
                ("Another-Header", "another-header-val"),
                ("X-Header-Echo", "echo"),
            ],
            &["X-Header-Remove-1", "X-Header-Remove-2"],
        ),
    ];
    for (path, sent, answered, want, absent) in cases {
        let echo: Vec<String> = answered.iter().map(|(n, v)| format!("{n}:{v}")).collect();
        let echo = echo.join(",");
        let mut headers = sent.to_vec();
        headers.push(("X-Echo-Set-Header", &echo));
        s.eventually_consistent(
            &format!("GET {path} answered with {answered:?}: want {want:?}, none of {absent:?}"),
            || s.send("GET", "example.com", path, &headers),
            |resp| {
                let fields = response_fields(resp);
                served_by(resp) == format!("{INFRA}/infra-backend-v1")
                    && want.iter().all(|(n, v)| fields.get(&n.to_ascii_lowercase()).map(String::as_str) == Some(*v))
                    && absent.iter().all(|n| !fields.contains_key(&n.to_ascii_lowercase()))
            },
        );
    }
    // The last case's request edits, as the backend saw them.
    let (seen, headers) = s.seen_by("infra-backend-v1");
    assert_eq!(seen, "/response-and-request-header-modifiers");
    for (n, v) in [
        ("x-header-add", "header-val-1"),
        ("x-header-set", "set-overwrites-values"),
        ("x-header-add-append", "append-val-1,header-val-2"),
        ("x-header-echo", "echo"),
    ] {
        assert_eq!(headers.get(n).map(String::as_str), Some(v), "{n} in {headers:?}");
    }
    assert!(!headers.contains_key("x-header-remove"), "{headers:?}");
}

/// A response's fields, names lower case, the values of one name joined with `,` (as the suite
/// compares them).
fn response_fields(resp: &Response) -> BTreeMap<String, String> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    for line in resp.head.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else { continue };
        let entry = fields.entry(name.trim().to_ascii_lowercase()).or_default();
        if !entry.is_empty() {
            entry.push(',');
        }
        entry.push_str(value.trim());
    }
    fields
}

#[test]
fn httproute_simple_same_namespace() {
    let s = Suite::start("httproute-simple-same-namespace.yaml");
    s.accepted("same-namespace", &["gateway-conformance-infra-test"]);
    s.get("/", "infra-backend-v1");
}

#[test]
fn httproute_https_listener() {
    let s = Suite::start("httproute-https-listener.yaml");
    s.accepted("same-namespace-with-https-listener", &["httproute-https-test", "httproute-https-test-no-hostname"]);
    for (host, want) in [
        ("example.org", format!("{INFRA}/infra-backend-v1")),
        ("unknown-example.org", "404".to_string()),
        ("second-example.org", format!("{INFRA}/infra-backend-v2")),
    ] {
        s.eventually_consistent(
            &format!("GET https://{host}/ should reach {want}"),
            || s.send_tls(host, "/"),
            |resp| (if resp.status == 200 { served_by(resp) } else { resp.status.to_string() }) == want,
        );
    }
}

#[test]
fn httproute_hostname_intersection() {
    let s = Suite::start("httproute-hostname-intersection.yaml");
    let gateway = "httproute-hostname-intersection";
    s.accepted(
        gateway,
        &[
            "specific-host-matches-listener-specific-host",
            "specific-host-matches-listener-wildcard-host",
            "wildcard-host-matches-listener-specific-host",
            "wildcard-host-matches-listener-wildcard-host",
        ],
    );
    for (host, path, want) in [
        ("very.specific.com", "/s1", "infra-backend-v1"),
        ("very.specific.com:1234", "/s1", "infra-backend-v1"),
        ("non.matching.com", "/s1", "404"),
        ("foo.nonmatchingwildcard.io", "/s1", "404"),
        ("foo.wildcard.io", "/s1", "404"),
        ("very.specific.com", "/non-matching-prefix", "404"),
        ("foo.wildcard.io", "/s2", "infra-backend-v2"),
        ("bar.wildcard.io", "/s2", "infra-backend-v2"),
        ("foo.bar.wildcard.io", "/s2", "infra-backend-v2"),
        ("non.matching.com", "/s2", "404"),
        ("wildcard.io", "/s2", "404"),
        ("very.specific.com", "/s2", "404"),
        ("foo.wildcard.io", "/non-matching-prefix", "404"),
        ("very.specific.com", "/s3", "infra-backend-v3"),
        ("non.matching.com", "/s3", "404"),
        ("foo.specific.com", "/s3", "404"),
        ("foo.wildcard.io", "/s3", "404"),
        ("very.specific.com", "/non-matching-prefix", "404"),
        ("foo.anotherwildcard.io", "/s4", "infra-backend-v1"),
        ("bar.anotherwildcard.io", "/s4", "infra-backend-v1"),
        ("foo.bar.anotherwildcard.io", "/s4", "infra-backend-v1"),
        ("anotherwildcard.io", "/s4", "404"),
        ("foo.wildcard.io", "/s4", "404"),
        ("very.specific.com", "/s4", "404"),
        ("foo.anotherwildcard.io", "/non-matching-prefix", "404"),
    ] {
        s.expect("GET", host, path, &[], want);
    }
    // Routes whose hostnames intersect none of the listener's.
    s.route_parents("no-intersecting-hosts", gateway, 1, true, ("Accepted", "False", "NoMatchingListenerHostname"));
    s.expect("GET", "specific.but.wrong.com", "/s5", &[], "404");
    s.expect("GET", "wildcard.io", "/s5", &[], "404");
    // A listener without a hostname.
    s.accepted("httproute-hostname-intersection-all", &["httproute-hostname-intersection-all"]);
    for (host, want) in [
        ("first.com", "infra-backend-v2"),
        ("sub.first.com", "infra-backend-v2"),
        ("second.com", "infra-backend-v2"),
        ("sub.second.com", "infra-backend-v2"),
        ("third.com", "404"),
        ("sub.third.com", "404"),
    ] {
        s.expect("GET", host, "/", &[], want);
    }
}

#[test]
fn httproute_listener_hostname_matching() {
    let s = Suite::start("httproute-listener-hostname-matching.yaml");
    let gateway = "httproute-listener-hostname-matching";
    s.accepted_on(gateway, &[Some("listener-1")], &["backend-v1"]);
    s.accepted_on(gateway, &[Some("listener-2")], &["backend-v2"]);
    s.accepted_on(gateway, &[Some("listener-3"), Some("listener-4")], &["backend-v3"]);
    for route in ["backend-v1", "backend-v2", "backend-v3"] {
        s.route_condition(route, gateway, "ResolvedRefs", "True", "ResolvedRefs");
    }
    for (host, want) in [
        ("bar.com", "infra-backend-v1"),
        ("foo.bar.com", "infra-backend-v2"),
        ("baz.bar.com", "infra-backend-v3"),
        ("boo.bar.com", "infra-backend-v3"),
        ("multiple.prefixes.bar.com", "infra-backend-v3"),
        ("multiple.prefixes.foo.com", "infra-backend-v3"),
        ("foo.com", "404"),
        ("no.matching.host", "404"),
    ] {
        s.expect("GET", host, "/", &[], want);
    }
}

#[test]
fn httproute_invalid_nonexistent_backend_ref() {
    let s = Suite::start("httproute-invalid-nonexistent-backendref.yaml");
    s.accepted_on("same-namespace", &[None], &["invalid-nonexistent-backend-ref"]);
    s.route_condition("invalid-nonexistent-backend-ref", "same-namespace", "ResolvedRefs", "False", "BackendNotFound");
    s.get("/", "500");
}

#[test]
fn httproute_invalid_backend_ref_unknown_kind() {
    let s = Suite::start("httproute-invalid-backendref-unknown-kind.yaml");
    s.accepted_on("same-namespace", &[None], &["invalid-backend-ref-unknown-kind"]);
    s.route_condition("invalid-backend-ref-unknown-kind", "same-namespace", "ResolvedRefs", "False", "InvalidKind");
    s.get("/v2", "500");
}

#[test]
fn httproute_invalid_cross_namespace_backend_ref() {
    let s = Suite::start("httproute-invalid-cross-namespace-backend-ref.yaml");
    s.accepted_on("same-namespace", &[None], &["invalid-cross-namespace-backend-ref"]);
    s.route_condition(
        "invalid-cross-namespace-backend-ref",
        "same-namespace",
        "ResolvedRefs",
        "False",
        "RefNotPermitted",
    );
    s.get("/", "500");
}

#[test]
fn httproute_invalid_cross_namespace_parent_ref() {
    let s = Suite::start("httproute-invalid-cross-namespace-parent-ref.yaml");
    let route = "gateway-conformance-web-backend/invalid-cross-namespace-parent-ref";
    s.route_condition(route, "same-namespace", "ResolvedRefs", "True", "ResolvedRefs");
    s.route_condition(route, "same-namespace", "Accepted", "False", "NotAllowedByListeners");
    s.no_accepted_parents(route);
    s.zero_routes("same-namespace");
}

#[test]
fn httproute_invalid_parent_ref_not_matching_section_name() {
    let s = Suite::start("httproute-invalid-parentref-not-matching-section-name.yaml");
    let route = "httproute-listener-not-matching-section-name";
    s.route_condition(route, "same-namespace", "Accepted", "False", "NoMatchingParent");
    s.no_accepted_parents(route);
    s.zero_routes("same-namespace");
}

#[test]
fn httproute_invalid_parent_ref_section_name_not_matching_port() {
    let s = Suite::start("httproute-invalid-parentref-section-name-not-matching-port.yaml");
    let route = "httproute-listener-section-name-not-matching-port";
    let gateway = "gateway-with-one-not-matching-port-and-section-name-route";
    s.route_condition(route, gateway, "Accepted", "False", "NoMatchingParent");
    s.no_accepted_parents(route);
    s.zero_routes(gateway);
}

#[test]
fn httproute_invalid_reference_grant() {
    let s = Suite::start("httproute-invalid-reference-grant.yaml");
    s.accepted_on("same-namespace", &[None], &["reference-grant"]);
    s.route_condition("reference-grant", "same-namespace", "ResolvedRefs", "False", "RefNotPermitted");
    s.get("/", "500");
}

#[test]
fn httproute_reference_grant() {
    let s = Suite::start("httproute-reference-grant.yaml");
    s.accepted("same-namespace", &["reference-grant"]);
    s.get("/", "gateway-conformance-web-backend/web-backend");
    cluster().admin.delete("ReferenceGrant", Some("gateway-conformance-web-backend"), "reference-grant");
    s.get("/", "500");
}

#[test]
fn httproute_partially_invalid_via_invalid_reference_grant() {
    let s = Suite::start("httproute-partially-invalid-via-invalid-reference-grant.yaml");
    s.accepted_on("same-namespace", &[None], &["invalid-reference-grant"]);
    s.route_condition("invalid-reference-grant", "same-namespace", "ResolvedRefs", "False", "RefNotPermitted");
    s.get("/v2", "500");
    s.get("/", "gateway-conformance-app-backend/app-backend-v1");
}

#[test]
fn httproute_observed_generation_bump() {
    let s = Suite::start("httproute-observed-generation-bump.yaml");
    let c = cluster();
    let route = "observed-generation-bump";
    s.route_condition(route, "same-namespace", "Accepted", "True", "");
    let original = c.get("HTTPRoute", INFRA, route);
    let mut changed = original.clone();
    changed["spec"]["rules"][0]["backendRefs"][0]["name"] = json!("infra-backend-v2");
    for key in ["resourceVersion", "managedFields", "uid", "creationTimestamp", "generation"] {
        changed["metadata"].as_object_mut().unwrap().remove(key);
    }
    changed.as_object_mut().unwrap().remove("status");
    c.admin.apply_value(&changed, "test").unwrap();
    s.route_condition(route, "same-namespace", "Accepted", "True", "");
    s.route_condition(route, "same-namespace", "ResolvedRefs", "True", "ResolvedRefs");
    let updated = c.get("HTTPRoute", INFRA, route);
    assert_ne!(original["metadata"]["generation"], updated["metadata"]["generation"]);
    for parent in updated["status"]["parents"].as_array().unwrap() {
        assert!(latest(&updated, &parent["conditions"]), "{:#}", updated["status"]);
    }
    s.get("/", "infra-backend-v2");
}

#[test]
fn httproute_named_rule() {
    let s = Suite::start("httproute-named-rule.yaml");
    s.accepted("same-namespace", &["http-named-rules"]);
    for path in ["/named", "/unnamed"] {
        s.eventually_consistent(
            &format!("GET {path}"),
            || s.send("GET", "example.com", path, &[]),
            |r| r.status == 200,
        );
    }
}

#[test]
fn grpcroute_exact_method_matching() {
    let s = Suite::start_grpc("grpcroute-exact-method-matching.yaml");
    s.accepted_on("same-namespace", &[None], &["exact-matching"]);
    s.expect_grpc("Echo", None, &[], "grpc-infra-backend-v1");
    s.expect_grpc("EchoTwo", None, &[], "grpc-infra-backend-v2");
    s.expect_grpc("EchoThree", None, &[], "Unimplemented");
}

#[test]
fn grpcroute_header_matching() {
    let s = Suite::start_grpc("grpcroute-header-matching.yaml");
    s.accepted_on("same-namespace", &[None], &["grpc-header-matching"]);
    for (metadata, want) in [
        (&[("Version", "one")][..], "grpc-infra-backend-v1"),
        (&[("Version", "two")], "grpc-infra-backend-v2"),
        (&[("Version", "two"), ("Color", "orange")], "grpc-infra-backend-v1"),
        (&[("Version", "two"), ("Color", "blue")], "grpc-infra-backend-v2"),
        (&[("Color", "orange")], "Unimplemented"),
        (&[("Some-Other-Header", "one")], "Unimplemented"),
        (&[("Color", "blue")], "grpc-infra-backend-v1"),
        (&[("Color", "green")], "grpc-infra-backend-v1"),
        (&[("Color", "red")], "grpc-infra-backend-v2"),
        (&[("Color", "yellow")], "grpc-infra-backend-v2"),
        (&[("Color", "purple")], "Unimplemented"),
    ] {
        s.expect_grpc("Echo", None, metadata, want);
    }
}

#[test]
fn grpcroute_listener_hostname_matching() {
    let s = Suite::start_grpc("grpcroute-listener-hostname-matching.yaml");
    let gateway = "grpcroute-listener-hostname-matching";
    s.accepted_on(gateway, &[Some("listener-1")], &["backend-v1"]);
    s.accepted_on(gateway, &[Some("listener-2")], &["backend-v2"]);
    s.accepted_on(gateway, &[Some("listener-3"), Some("listener-4")], &["backend-v3"]);
    for (authority, want) in [
        ("bar.com", "grpc-infra-backend-v1"),
        ("foo.bar.com", "grpc-infra-backend-v2"),
        ("baz.bar.com", "grpc-infra-backend-v3"),
        ("boo.bar.com", "grpc-infra-backend-v3"),
        ("multiple.prefixes.bar.com", "grpc-infra-backend-v3"),
        ("multiple.prefixes.foo.com", "grpc-infra-backend-v3"),
        ("foo.com", "Unimplemented"),
        ("no.matching.host", "Unimplemented"),
    ] {
        s.expect_grpc("Echo", Some(authority), &[], want);
    }
}

#[test]
fn grpcroute_named_rule() {
    let s = Suite::start_grpc("grpcroute-named-rule.yaml");
    s.accepted_on("same-namespace", &[None], &["grpc-named-rules"]);
    s.expect_grpc("Echo", None, &[], "grpc-infra-backend-v1");
    s.expect_grpc("EchoTwo", None, &[], "grpc-infra-backend-v2");
}

/// As the suite's `weight.TestWeightedDistribution`: 500 calls must fall within 5 points either
/// way of 70/30/0, taken again up to 10 times. The calls go over one HTTP/2 connection (the h2
/// crate's client) rather than a grpcurl process each.
#[test]
fn grpcroute_weight() {
    let s = Suite::start_grpc("grpcroute-weight.yaml");
    s.accepted_on("same-namespace", &[None], &["weighted-backends"]);
    s.expect_grpc("Echo", None, &[], "grpc-infra-backend-");
    let mut client = H2Client::connect(s.daemon().http_addr());
    let path = format!("/{}/Echo", grpc_echo::SERVICE);
    let headers = [("content-type", "application/grpc"), ("te", "trailers")];
    weighted_70_30(|| {
        let answer = client.request("POST", "example.com", &path, &headers, &[0; 5], false).expect("a gRPC answer");
        let text = answer.text();
        let backend = ["v1", "v2", "v3"].into_iter().find(|v| text.contains(&format!("grpc-infra-backend-{v}-0")));
        backend.unwrap_or("none").to_string()
    });
}

/// Each of two equally weighted backendRefs sets `Backend` to its own name: every request must
/// reach the backend its `Backend` field names.
#[test]
fn httproute_request_header_modifier_backend_weights() {
    let s = Suite::start("httproute-request-header-modifier-backend-weights.yaml");
    s.accepted("same-namespace", &["request-header-modifier-backend-weights"]);
    s.eventually_consistent("GET / is served", || s.send("GET", "example.com", "/", &[]), |r| r.status == 200);
    let mut conn = Conn::open(s.daemon().http_addr());
    let mut seen = BTreeMap::new();
    for _ in 0..100 {
        let resp = conn.get("example.com", "/");
        let fields = resp.body.lines().filter_map(|l| l.strip_prefix("header=")?.split_once(": "));
        let set: Vec<&str> = fields.filter(|(n, _)| n.eq_ignore_ascii_case("backend")).map(|(_, v)| v).collect();
        assert_eq!(set.len(), 1, "one Backend field: {}", resp.body);
        assert_eq!(served_by(&resp), format!("{INFRA}/{}", set[0]), "{}", resp.body);
        *seen.entry(set[0].to_string()).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 2, "both backends served: {seen:?}");
}

/// An h2c request with prior knowledge reaches the h2c server behind infra-backend-v1's
/// `appProtocol: kubernetes.io/h2c` port, over HTTP/2.
#[test]
fn httproute_backend_protocol_h2c() {
    let s = Suite::start("httproute-backend-protocol-h2c.yaml");
    s.accepted_on("same-namespace", &[None], &["backend-protocol-h2c"]);
    let echo = cluster().h2c.lock().unwrap()[&format!("{INFRA}/infra-backend-v1")];
    s.eventually_consistent(
        "an h2c GET / reaches infra-backend-v1's h2c port",
        || {
            let before = echo.requests().len();
            let answer = H2Client::connect(s.daemon().http_addr()).get("example.com", "/");
            (answer.status, echo.requests().len() > before)
        },
        |(status, reached)| *status == 200 && *reached,
    );
}

/// A WebSocket upgrade through infra-backend-v1's `appProtocol: kubernetes.io/ws` port is relayed
/// both ways: the text and the binary message come back. (The local backend accepts the upgrade
/// and echoes the bytes of the frames as they are, where the suite's echo server parses them.)
#[test]
fn httproute_backend_protocol_websocket() {
    use std::io::{Read, Write};
    let s = Suite::start("httproute-backend-protocol-websocket.yaml");
    s.accepted_on("same-namespace", &[None], &["backend-protocol-ws"]);
    let upgrade = "GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                   Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    s.eventually_consistent(
        "the upgrade is relayed and the messages come back",
        || {
            let mut conn = Conn::open(s.daemon().http_addr());
            conn.send(upgrade.as_bytes());
            let status = conn.read_response().status;
            let mut echoed = Vec::new();
            // A masked text frame "Websocket Support!" and a masked binary frame of 1..=7.
            for (opcode, payload) in [(0x81u8, b"Websocket Support!".to_vec()), (0x82, (1..=7).collect())] {
                let mut frame = vec![opcode, 0x80 | payload.len() as u8, 1, 2, 3, 4];
                frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ [1, 2, 3, 4][i % 4]));
                conn.stream.write_all(&frame).unwrap();
                let mut back = vec![0; frame.len()];
                echoed.push(conn.stream.read_exact(&mut back).is_ok() && back == frame);
            }
            (status, echoed)
        },
        |(status, echoed)| *status == 101 && echoed.iter().all(|e| *e),
    );
}

mod backend_tls;
mod frontend_validation;
mod tcp_routes;
mod tls_checks;
mod tls_routes;
mod udp_routes;
