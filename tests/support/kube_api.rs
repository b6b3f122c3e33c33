//! A small blocking Kubernetes client for tests (kube-rs on a private current-thread runtime):
//! server-side apply of YAML, get, list, delete, and TokenRequest.

use std::path::Path;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::Value;

/// The kinds the tests write: (apiVersion, kind, plural, namespaced).
const KINDS: &[(&str, &str, &str, bool)] = &[
    ("v1", "Namespace", "namespaces", false),
    ("v1", "Service", "services", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "ConfigMap", "configmaps", true),
    ("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", true),
    ("networking.k8s.io/v1", "Ingress", "ingresses", true),
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true),
    ("coordination.k8s.io/v1", "Lease", "leases", true),
    ("events.k8s.io/v1", "Event", "events", true),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", false),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false),
    ("gateway.networking.k8s.io/v1", "GatewayClass", "gatewayclasses", false),
    ("gateway.networking.k8s.io/v1", "Gateway", "gateways", true),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes", true),
    ("gateway.networking.k8s.io/v1", "GRPCRoute", "grpcroutes", true),
    ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant", "referencegrants", true),
    ("gateway.networking.k8s.io/v1", "BackendTLSPolicy", "backendtlspolicies", true),
    ("gateway.networking.k8s.io/v1", "TCPRoute", "tcproutes", true),
    ("gateway.networking.k8s.io/v1", "UDPRoute", "udproutes", true),
    ("gateway.networking.k8s.io/v1", "TLSRoute", "tlsroutes", true),
];

fn resource(api_version: &str, kind: &str) -> (ApiResource, bool) {
    let (_, _, plural, namespaced) = KINDS
        .iter()
        .find(|(v, k, _, _)| *v == api_version && *k == kind)
        .unwrap_or_else(|| panic!("the test client does not know {api_version} {kind}"));
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    (ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural), *namespaced)
}

fn kind_of(kind: &str) -> (&'static str, &'static str) {
    let (v, k, _, _) = KINDS.iter().find(|(_, k, _, _)| *k == kind).unwrap_or_else(|| panic!("unknown kind {kind}"));
    (v, k)
}

pub struct Kube {
    runtime: tokio::runtime::Runtime,
    pub client: Client,
}

impl Kube {
    pub fn new(kubeconfig: &Path) -> Kube {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = runtime.block_on(async {
            let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
            let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
            Client::try_from(config).unwrap()
        });
        Kube { runtime, client }
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    fn api(&self, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let (v, k) = kind_of(kind);
        let (ar, namespaced) = resource(v, k);
        match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            (true, None) => Api::all_with(self.client.clone(), &ar),
            (false, _) => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// Server-side applies every document of `yaml` (field manager `test`, forced).
    pub fn apply(&self, yaml: &str) {
        self.try_apply_as(yaml, "test").unwrap_or_else(|e| panic!("apply failed: {e}\n{yaml}"));
    }

    /// Server-side applies every document of `yaml` as field manager `manager`; the objects as stored.
    pub fn try_apply_as(&self, yaml: &str, manager: &str) -> Result<Vec<Value>, kube::Error> {
        let mut out = Vec::new();
        for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value: Value = serde::Deserialize::deserialize(doc).unwrap();
            if value.is_null() {
                continue;
            }
            out.push(self.apply_value(&value, manager)?);
        }
        Ok(out)
    }

    pub fn apply_value(&self, value: &Value, manager: &str) -> Result<Value, kube::Error> {
        let kind = value["kind"].as_str().expect("kind");
        let name = value["metadata"]["name"].as_str().expect("metadata.name");
        let ns = value["metadata"]["namespace"].as_str();
        let api = self.api(kind, ns);
        let params = PatchParams::apply(manager).force();
        let obj = self.block_on(api.patch(name, &params, &Patch::Apply(value)))?;
        Ok(serde_json::to_value(obj).unwrap())
    }

    /// Server-side applies `status` to the status subresource of `kind` `ns/name` as `manager`.
    pub fn apply_status(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        manager: &str,
        status: Value,
    ) -> Result<Value, kube::Error> {
        let (api_version, kind) = kind_of(kind);
        let api = self.api(kind, Some(ns));
        let patch = serde_json::json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": { "name": name, "namespace": ns }, "status": status,
        });
        let obj = self.block_on(api.patch_status(name, &PatchParams::apply(manager).force(), &Patch::Apply(&patch)))?;
        Ok(serde_json::to_value(obj).unwrap())
    }

    pub fn get(&self, kind: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        let api = self.api(kind, ns);
        self.block_on(api.get_opt(name)).unwrap().map(|o| serde_json::to_value(o).unwrap())
    }

    /// [`Kube::list`], or the error (a kind whose CRD is not established yet).
    pub fn try_list(&self, kind: &str, ns: Option<&str>) -> Result<Vec<Value>, kube::Error> {
        let api = self.api(kind, ns);
        let list = self.block_on(api.list(&ListParams::default()))?;
        Ok(list.items.into_iter().map(|o| serde_json::to_value(o).unwrap()).collect())
    }

    pub fn list(&self, kind: &str, ns: Option<&str>) -> Vec<Value> {
        let api = self.api(kind, ns);
        let list = self.block_on(api.list(&ListParams::default())).unwrap();
        list.items.into_iter().map(|o| serde_json::to_value(o).unwrap()).collect()
    }

    pub fn delete(&self, kind: &str, ns: Option<&str>, name: &str) {
        let api = self.api(kind, ns);
        match self.block_on(api.delete(name, &DeleteParams::default())) {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("delete {kind} {name}: {e}"),
        }
    }

    /// A token for ServiceAccount `ns/name` from the TokenRequest API.
    pub fn token(&self, ns: &str, name: &str) -> String {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let request = TokenRequest {
            spec: TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() },
            ..Default::default()
        };
        let answer = self.block_on(api.create_token_request(name, &PostParams::default(), &request)).unwrap();
        answer.status.expect("TokenRequest status").token
    }
}
