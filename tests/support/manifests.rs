//! The Kubernetes objects the tests write — Services with their EndpointSlices, Ingresses,
//! IngressClasses — as YAML text, for a `--manifests` directory, the fake API server or the real
//! one. Every document starts with `---`, so texts concatenate into one stream.
//!
//! Endpoints are always `ready: true`; a Service's port is `http` 80 unless a test says otherwise.

use std::net::SocketAddr;

use serde_json::{json, Map, Value};

/// The controller of ramjet's IngressClasses.
pub const INGRESS_CONTROLLER: &str = "ramjet.dev/ingress-controller";

/// One document: `---` and the object as YAML.
fn document(object: &Value) -> String {
    format!("---\n{}", serde_yaml_ng::to_string(object).expect("an object is YAML"))
}

/// The IngressClass `name` of ramjet's controller.
pub fn ingress_class(name: &str) -> String {
    document(&json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": { "name": name },
        "spec": { "controller": INGRESS_CONTROLLER },
    }))
}

/// Service `name` in `namespace` (port `http` 80) and its EndpointSlice to `endpoint`: the common
/// case of [`Service`].
pub fn service(namespace: &str, name: &str, endpoint: SocketAddr) -> String {
    Service::new(namespace, name).endpoints(&[endpoint]).yaml()
}

/// A Service and the EndpointSlices that name its endpoints.
#[derive(Clone, Debug)]
pub struct Service {
    namespace: String,
    name: String,
    port_name: String,
    port: u16,
    target_port: Option<u16>,
    app_protocol: Option<String>,
    cluster_ip: Option<String>,
    endpoints: Vec<SocketAddr>,
    slice_per_endpoint: bool,
}

impl Service {
    /// Service `name` in `namespace`, port `http` 80, no endpoints yet.
    pub fn new(namespace: &str, name: &str) -> Service {
        Service {
            namespace: namespace.into(),
            name: name.into(),
            port_name: "http".into(),
            port: 80,
            target_port: None,
            app_protocol: None,
            cluster_ip: None,
            endpoints: Vec::new(),
            slice_per_endpoint: false,
        }
    }

    /// The Service's one port, in place of `http` 80.
    pub fn port(mut self, name: &str, number: u16) -> Service {
        (self.port_name, self.port) = (name.into(), number);
        self
    }

    /// The port's `targetPort` (what a Service of a real Deployment would say; the slices decide).
    pub fn target_port(mut self, port: u16) -> Service {
        self.target_port = Some(port);
        self
    }

    /// The port's `appProtocol` (`kubernetes.io/h2c`: the backend speaks HTTP/2 by prior knowledge).
    pub fn app_protocol(mut self, protocol: &str) -> Service {
        self.app_protocol = Some(protocol.into());
        self
    }

    /// `spec.clusterIP` (`None` for a headless Service).
    pub fn cluster_ip(mut self, ip: &str) -> Service {
        self.cluster_ip = Some(ip.into());
        self
    }

    /// The endpoints, in one EndpointSlice `<name>-1` on the port of the first (an EndpointSlice has
    /// one port for all its endpoints).
    pub fn endpoints(mut self, endpoints: &[SocketAddr]) -> Service {
        self.endpoints = endpoints.to_vec();
        self
    }

    /// The endpoints, in this order, one EndpointSlice each (`<name>-0`, `<name>-1`, …), so each keeps
    /// its own port.
    pub fn slice_per_endpoint(mut self, endpoints: &[SocketAddr]) -> Service {
        self.endpoints = endpoints.to_vec();
        self.slice_per_endpoint = true;
        self
    }

    /// The Service alone, without its slices.
    pub fn service_yaml(&self) -> String {
        let mut port = json!({ "name": self.port_name, "port": self.port });
        if let Some(target) = self.target_port {
            port["targetPort"] = json!(target);
        }
        if let Some(protocol) = &self.app_protocol {
            port["appProtocol"] = json!(protocol);
        }
        let mut spec = json!({ "ports": [port] });
        if let Some(ip) = &self.cluster_ip {
            spec["clusterIP"] = json!(ip);
        }
        document(&json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": { "name": self.name, "namespace": self.namespace },
            "spec": spec,
        }))
    }

    /// The Service and its EndpointSlices.
    pub fn yaml(&self) -> String {
        let mut text = self.service_yaml();
        if self.slice_per_endpoint {
            for (i, endpoint) in self.endpoints.iter().enumerate() {
                let slice = format!("{}-{i}", self.name);
                text.push_str(&self.slice(&slice, std::slice::from_ref(endpoint)));
            }
        } else if !self.endpoints.is_empty() {
            text.push_str(&self.slice(&format!("{}-1", self.name), &self.endpoints));
        }
        text
    }

    fn slice(&self, slice: &str, endpoints: &[SocketAddr]) -> String {
        endpoint_slice(&self.namespace, slice, &self.name, &self.port_name, endpoints)
    }
}

/// EndpointSlice `name` of Service `service`: these ready endpoints, all on the port of the first
/// (8080 when there are none), named `port_name`.
pub fn endpoint_slice(namespace: &str, name: &str, service: &str, port_name: &str, endpoints: &[SocketAddr]) -> String {
    let port = endpoints.first().map_or(8080, SocketAddr::port);
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|e| json!({ "addresses": [e.ip().to_string()], "conditions": { "ready": true } }))
        .collect();
    document(&json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": { "name": name, "namespace": namespace, "labels": { "kubernetes.io/service-name": service } },
        "addressType": "IPv4",
        "ports": [{ "name": port_name, "port": port }],
        "endpoints": endpoints,
    }))
}

/// An Ingress of class `ramjet` (unless told otherwise) with one host, its paths to Services on
/// their port named `http` (or by number), and optionally TLS.
#[derive(Clone, Debug)]
pub struct Ingress {
    namespace: String,
    name: String,
    class: String,
    annotations: Map<String, Value>,
    host: Option<String>,
    paths: Vec<(String, String, String)>,
    port: Value,
    tls: Option<String>,
}

impl Ingress {
    pub fn new(namespace: &str, name: &str) -> Ingress {
        Ingress {
            namespace: namespace.into(),
            name: name.into(),
            class: "ramjet".into(),
            annotations: Map::new(),
            host: None,
            paths: Vec::new(),
            port: json!({ "name": "http" }),
            tls: None,
        }
    }

    /// `spec.ingressClassName`.
    pub fn class(mut self, class: &str) -> Ingress {
        self.class = class.into();
        self
    }

    /// The rule's host.
    pub fn host(mut self, host: &str) -> Ingress {
        self.host = Some(host.into());
        self
    }

    /// A path (`kind`: Prefix, Exact, ImplementationSpecific) to Service `service`.
    pub fn path(mut self, path: &str, kind: &str, service: &str) -> Ingress {
        self.paths.push((path.into(), kind.into(), service.into()));
        self
    }

    /// Everything (`/`, Prefix) to Service `service`.
    pub fn to(self, service: &str) -> Ingress {
        self.path("/", "Prefix", service)
    }

    /// The backends' Service port by number, in place of the port named `http`.
    pub fn port_number(mut self, port: u16) -> Ingress {
        self.port = json!({ "number": port });
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Ingress {
        self.annotations.insert(key.into(), json!(value));
        self
    }

    /// Annotations written as the body of a YAML flow mapping (`a: "1", b: "2"`).
    pub fn annotations_yaml(mut self, body: &str) -> Ingress {
        let parsed: Map<String, Value> =
            serde_yaml_ng::from_str(&format!("{{ {body} }}")).unwrap_or_else(|e| panic!("annotations `{body}`: {e}"));
        self.annotations.extend(parsed);
        self
    }

    /// TLS for the host, from Secret `secret`.
    pub fn tls(mut self, secret: &str) -> Ingress {
        self.tls = Some(secret.into());
        self
    }

    pub fn yaml(&self) -> String {
        let paths: Vec<Value> = self
            .paths
            .iter()
            .map(|(path, kind, service)| {
                json!({ "path": path, "pathType": kind, "backend": { "service": { "name": service, "port": self.port } } })
            })
            .collect();
        let mut rule = json!({ "http": { "paths": paths } });
        if let Some(host) = &self.host {
            rule["host"] = json!(host);
        }
        let mut spec = json!({ "ingressClassName": self.class, "rules": [rule] });
        if let Some(secret) = &self.tls {
            spec["tls"] = json!([{ "hosts": self.host.iter().collect::<Vec<_>>(), "secretName": secret }]);
        }
        let mut metadata = json!({ "name": self.name, "namespace": self.namespace });
        if !self.annotations.is_empty() {
            metadata["annotations"] = Value::Object(self.annotations.clone());
        }
        document(
            &json!({ "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata, "spec": spec }),
        )
    }
}
