//! The Gateway API objects ramjet reads, from the standard channel (v1.6): `GatewayClass`, `Gateway`,
//! `HTTPRoute`, `GRPCRoute`, `TCPRoute`, `UDPRoute`, `TLSRoute`, `BackendTLSPolicy`
//! (gateway.networking.k8s.io/v1) and `ReferenceGrant` (v1beta1).
//!
//! Written by hand, not generated: the maintained crate (`gateway-api`, kopium output) is built on
//! kube 4 / k8s-openapi 0.28 and cannot live beside this workspace's kube 5, and the generated types
//! carry every field of every channel as `Option`s of one-off structs. These carry exactly the fields
//! the compiler reads, with the API's defaults applied where the CRD schema defaults them, and keep
//! everything else out (unknown fields are ignored, as a client of a newer API must). `status` is kept
//! as JSON: ramjet writes its own entries and must leave the rest as it found it.
//! `docs/gateway-api.md` says which fields are honoured.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use serde::{Deserialize, Serialize};

/// The API group of every kind here.
pub const GROUP: &str = "gateway.networking.k8s.io";

macro_rules! resource {
    ($type:ident, $kind:literal, $version:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                GROUP.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A class of Gateways, and the controller that implements it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayClass {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: GatewayClassSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(GatewayClass, "GatewayClass", "v1", "gatewayclasses", ClusterResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    pub controller_name: String,
}

/// Where traffic enters: listeners (port, protocol, hostname, TLS) that routes attach to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gateway {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: GatewaySpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(Gateway, "Gateway", "v1", "gateways", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// TLS for the whole Gateway: client-certificate validation of its HTTPS listeners (v1.5).
    #[serde(default)]
    pub tls: Option<GatewayTls>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayTls {
    #[serde(default)]
    pub frontend: Option<FrontendTls>,
    /// What the Gateway presents to backends it speaks TLS to (v1.4).
    #[serde(default)]
    pub backend: Option<GatewayBackendTls>,
}

/// `spec.tls.backend`: the client certificate (a `kubernetes.io/tls` Secret) the Gateway presents
/// to a backend that asks for one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayBackendTls {
    #[serde(default)]
    pub client_certificate_ref: Option<ObjectReference>,
}

/// Client-certificate validation: `default` for every HTTPS listener, `perPort` for those on a port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTls {
    #[serde(default)]
    pub default: FrontendTlsConfig,
    #[serde(default)]
    pub per_port: Vec<FrontendTlsPort>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTlsPort {
    pub port: i32,
    #[serde(default)]
    pub tls: FrontendTlsConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontendTlsConfig {
    #[serde(default)]
    pub validation: Option<FrontendValidation>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontendValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<ObjectReference>,
    /// `AllowValidOnly` (the default) or `AllowInsecureFallback`.
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default)]
    pub hostname: Option<String>,
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed name.
    pub protocol: String,
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    #[serde(default)]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate` (the default) or `Passthrough`.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub certificate_refs: Vec<ObjectReference>,
}

/// A reference to an object by group, kind, name and (optionally) namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default)]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default)]
    pub kinds: Option<Vec<RouteGroupKind>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    #[serde(default)]
    pub group: Option<String>,
    pub kind: String,
}

/// HTTP routing rules attached to Gateways (their listeners) by `parentRefs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpRoute {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HttpRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(HttpRoute, "HTTPRoute", "v1", "httproutes", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<HttpRouteRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteRule {
    #[serde(default)]
    pub name: Option<String>,
    /// Empty: one match, `PathPrefix /`.
    #[serde(default)]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
    #[serde(default)]
    pub timeouts: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteMatch {
    #[serde(default)]
    pub path: Option<PathMatch>,
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
    #[serde(default)]
    pub query_params: Vec<ValueMatch>,
    #[serde(default)]
    pub method: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathMatch {
    /// `Exact`, `PathPrefix` (the default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
}

/// A header or query parameter match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteFilter {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default)]
    pub request_redirect: Option<RequestRedirect>,
    #[serde(default)]
    pub url_rewrite: Option<UrlRewrite>,
    #[serde(default)]
    pub request_mirror: Option<RequestMirror>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderModifier {
    #[serde(default)]
    pub set: Vec<HeaderValue>,
    #[serde(default)]
    pub add: Vec<HeaderValue>,
    #[serde(default)]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeaderValue {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRedirect {
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
    #[serde(default)]
    pub port: Option<i32>,
    #[serde(default)]
    pub status_code: Option<u16>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlRewrite {
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub path: Option<PathModifier>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub replace_full_path: Option<String>,
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMirror {
    pub backend_ref: BackendObjectReference,
    #[serde(default)]
    pub percent: Option<i32>,
    #[serde(default)]
    pub fraction: Option<Fraction>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fraction {
    pub numerator: i32,
    #[serde(default)]
    pub denominator: Option<i32>,
}

/// A backend by reference: a Service (group `""`, kind `Service`, the defaults) and its port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendObjectReference {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub port: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpBackendRef {
    #[serde(flatten)]
    pub backend: BackendObjectReference,
    /// Share of the rule's traffic; 1 when not given.
    #[serde(default)]
    pub weight: Option<i32>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
}

/// gRPC routing rules attached to Gateways by `parentRefs`: matches on the gRPC service and
/// method (the request path `/<service>/<method>`) and headers; the backends speak HTTP/2.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GrpcRoute {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: GrpcRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(GrpcRoute, "GRPCRoute", "v1", "grpcroutes", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<GrpcRouteRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteRule {
    #[serde(default)]
    pub name: Option<String>,
    /// Empty: every request.
    #[serde(default)]
    pub matches: Vec<GrpcRouteMatch>,
    /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestMirror` (the fields are
    /// HTTPRoute's).
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcRouteMatch {
    #[serde(default)]
    pub method: Option<GrpcMethodMatch>,
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrpcMethodMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The fully qualified service (`helloworld.Greeter`); any when not given.
    #[serde(default)]
    pub service: Option<String>,
    /// The method (`SayHello`); any when not given.
    #[serde(default)]
    pub method: Option<String>,
}

/// Permission for objects of one namespace to be referenced from other namespaces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrant {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: ReferenceGrantSpec,
}
resource!(ReferenceGrant, "ReferenceGrant", "v1beta1", "referencegrants", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantSpec {
    pub from: Vec<ReferenceGrantFrom>,
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantFrom {
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceGrantTo {
    pub group: String,
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
}

/// How a Gateway verifies the backends it speaks TLS to (v1 since Gateway API v1.4): the Services
/// it targets are spoken to over TLS, verified by `validation`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackendTlsPolicy {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: BackendTlsPolicySpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(BackendTlsPolicy, "BackendTLSPolicy", "v1", "backendtlspolicies", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicySpec {
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    pub validation: BackendTlsValidation,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

/// A local object a policy applies to (a Service), optionally one of its ports by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetReference {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub section_name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<LocalObjectReference>,
    /// `System`: the well-known CA certificates.
    #[serde(default)]
    pub well_known_ca_certificates: Option<String>,
    pub hostname: String,
    #[serde(default)]
    pub subject_alt_names: Vec<SubjectAltNameSpec>,
}

/// An object in the referrer's namespace, by group, kind and name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubjectAltNameSpec {
    /// `Hostname` or `URI`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub uri: Option<String>,
}

/// TCP connections to a Gateway's `TCP` listener, relayed to backends split by weight (v1 from
/// Gateway API v1.5; v1alpha2 before, the same fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpRoute {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: TcpRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(TcpRoute, "TCPRoute", "v1", "tcproutes", NamespaceResourceScope);

/// UDP flows to a Gateway's `UDP` listener, relayed to backends split by weight (the TCPRoute's
/// fields; v1 from Gateway API v1.5, v1alpha2 before).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpRoute {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: TcpRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(UdpRoute, "UDPRoute", "v1", "udproutes", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    /// One rule at most (the CRD says so).
    #[serde(default)]
    pub rules: Vec<TcpRouteRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRouteRule {
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
}

/// TLS connections to a Gateway's `TLS` listener in `Passthrough` mode, passed unopened by their
/// server name (SNI) to backends (v1 from Gateway API v1.5; v1alpha2 and v1alpha3 before).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsRoute {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: TlsRouteSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}
resource!(TlsRoute, "TLSRoute", "v1", "tlsroutes", NamespaceResourceScope);

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// One rule at most (the CRD says so).
    #[serde(default)]
    pub rules: Vec<TcpRouteRule>,
}
