//! What the compiler reads: a [`ClusterSnapshot`] of the objects as a watcher's stores or a
//! manifests directory hold them, and the [`IngressOptions`] that say which of them are ours.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use ramjet_shared::Diagnostic;

use crate::gateway_api::{
    BackendTlsPolicy, Gateway, GatewayClass, GrpcRoute, HttpRoute, ReferenceGrant, TcpRoute, TlsRoute, UdpRoute,
};

/// The default `--gateway-controller-name`.
pub const GATEWAY_CONTROLLER: &str = "ramjet.dev/gateway-controller";

/// Which Ingresses are ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressOptions {
    /// `--ingress-class`: the class name the legacy annotation must carry.
    pub ingress_class: String,
    /// `--controller-name`: the `spec.controller` of the IngressClasses that are ours.
    pub controller_name: String,
    /// `--gateway-controller-name`: the `spec.controllerName` of the GatewayClasses that are ours.
    pub gateway_controller_name: String,
    /// The ports a Gateway's HTTP listeners may name: where clients reach ramjet's plain listener
    /// (its own port, and the Service port in front of it).
    pub http_ports: Vec<u16>,
    /// The same for HTTPS listeners and ramjet's TLS listener.
    pub https_ports: Vec<u16>,
    /// `--default-ssl-certificate`: the TLS Secret (namespace, name) served to names without a
    /// certificate of their own, compiled (and so renewed) like an Ingress's.
    pub default_ssl_certificate: Option<(String, String)>,
}

impl Default for IngressOptions {
    fn default() -> Self {
        IngressOptions {
            ingress_class: "ramjet".into(),
            controller_name: "ramjet.dev/ingress-controller".into(),
            gateway_controller_name: GATEWAY_CONTROLLER.into(),
            http_ports: vec![80, 8080],
            https_ports: vec![443, 8443],
            default_ssl_certificate: None,
        }
    }
}

/// Everything the compiler reads: the objects as a watcher's stores or a manifests directory hold
/// them.
#[derive(Clone, Default)]
pub struct ClusterSnapshot {
    pub options: Arc<IngressOptions>,
    pub ingress_classes: Vec<Arc<IngressClass>>,
    pub ingresses: Vec<Arc<Ingress>>,
    pub services: Vec<Arc<Service>>,
    pub endpoint_slices: Vec<Arc<EndpointSlice>>,
    pub secrets: Vec<Arc<Secret>>,
    /// Namespaces, for Gateway listeners that admit routes by namespace labels.
    pub namespaces: Vec<Arc<Namespace>>,
    pub gateway_classes: Vec<Arc<GatewayClass>>,
    pub gateways: Vec<Arc<Gateway>>,
    pub http_routes: Vec<Arc<HttpRoute>>,
    pub grpc_routes: Vec<Arc<GrpcRoute>>,
    pub reference_grants: Vec<Arc<ReferenceGrant>>,
    pub tcp_routes: Vec<Arc<TcpRoute>>,
    pub udp_routes: Vec<Arc<UdpRoute>>,
    pub tls_routes: Vec<Arc<TlsRoute>>,
    pub backend_tls_policies: Vec<Arc<BackendTlsPolicy>>,
    /// ConfigMaps, for the CA certificates of BackendTLSPolicies (watched only with them).
    pub config_maps: Vec<Arc<ConfigMap>>,
    /// Problems found while reading the objects (a manifest that is not valid YAML); they are
    /// carried into the generation's diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// Objects of kinds ramjet does not read (a manifests directory's Deployments): named, not
    /// problems.
    pub not_read: Vec<Diagnostic>,
}

impl fmt::Debug for ClusterSnapshot {
    /// Counts only: a snapshot holds Secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterSnapshot")
            .field("ingress_classes", &self.ingress_classes.len())
            .field("ingresses", &self.ingresses.len())
            .field("services", &self.services.len())
            .field("endpoint_slices", &self.endpoint_slices.len())
            .field("secrets", &self.secrets.len())
            .field("gateways", &self.gateways.len())
            .field("http_routes", &self.http_routes.len())
            .field("grpc_routes", &self.grpc_routes.len())
            .field("diagnostics", &self.diagnostics.len())
            .finish()
    }
}

/// An object's namespace; a namespaced object without one (a manifest) is in `default`.
pub fn namespace_of(namespace: &Option<String>) -> &str {
    namespace.as_deref().unwrap_or("default")
}
