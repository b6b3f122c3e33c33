//! The suite's BackendTLSPolicy tests (v1.6.1, `conformance/tests/backendtlspolicy*`): the policy
//! status each waits for (`BackendTLSPolicyMustHaveCondition`: an ancestor entry for the Gateway,
//! every entry current), then requests through the Gateway to the suite's HTTP echo server over
//! TLS (`tls-backend`, serving `tls-checks-certificate`). That backend says which server name
//! ramjet's handshake gave it, which is what the suite's `ExpectedRequest.SNI` compares, and which
//! client certificate it presented (`ExpectedRequest.ClientCert`). Also the Gateway's own backend
//! TLS: the client certificate it presents to backends (`spec.tls.backend`).

use serde_json::{json, Value};

use super::{
    cluster, has_condition, latest, split, status_until, support, tls_checks, Response, Suite, CONTROLLER, INFRA,
};
use support::tls_backend;

/// The Gateway every test but the re-encrypt case sends to (port 80).
const GATEWAY: &str = "same-namespace";

/// `BackendTLSPolicyMustHaveCondition`: every ancestor entry of the policy is current, and the one
/// for `gateway` (ramjet's) has the condition (an empty reason: any).
fn policy_condition(policy: &str, gateway: &str, (type_, status, reason): (&str, &str, &str)) {
    let (ns, name) = split(policy);
    let (gw_ns, gw_name) = split(gateway);
    status_until(
        &format!("BackendTLSPolicy {policy} for {gateway}: {type_}={status} ({reason})"),
        || cluster().get("BackendTLSPolicy", ns, name),
        |p| {
            let ancestors = p["status"]["ancestors"].as_array().cloned().unwrap_or_default();
            ancestors.iter().all(|a| latest(p, &a["conditions"]))
                && ancestors.iter().any(|a| {
                    let at = &a["ancestorRef"];
                    at["name"] == gw_name
                        && (at["namespace"].is_null() || at["namespace"] == gw_ns)
                        && a["controllerName"] == CONTROLLER
                        && has_condition(&a["conditions"], type_, status, reason)
                })
        },
    );
}

const ACCEPTED: (&str, &str, &str) = ("Accepted", "True", "Accepted");
const RESOLVED_REFS: (&str, &str, &str) = ("ResolvedRefs", "True", "ResolvedRefs");
const NO_VALID_CA: (&str, &str, &str) = ("Accepted", "False", "NoValidCACertificate");
const INVALID_CA_REF: (&str, &str, &str) = ("ResolvedRefs", "False", "InvalidCACertificateRef");

/// The echo server's answer names the server name the Gateway's handshake sent it.
fn reached_with_sni(response: &Response, sni: &str) -> bool {
    response.status == 200 && response.body.contains(&format!(" sni={sni} "))
}

/// `MakeRequestAndExpectEventuallyConsistentResponse` of a plain GET through [`GATEWAY`], to the
/// TLS backend, its handshake given `sni`.
fn expect_backend_sni(s: &Suite, host: &str, path: &str, sni: &str) {
    s.eventually_consistent(
        &format!("GET http://{host}{path} reaches the backend with SNI {sni}"),
        || s.send("GET", host, path, &[]),
        |r| reached_with_sni(r, sni),
    );
}

/// `MakeRequestAndExpectEventuallyConsistentResponse` with one of `statuses`.
fn expect_status(s: &Suite, host: &str, path: &str, statuses: &[u16]) {
    s.eventually_consistent(
        &format!("GET http://{host}{path} answers one of {statuses:?}"),
        || s.send("GET", host, path, &[]),
        |r| statuses.contains(&r.status),
    );
}

/// `MakeRequestAndExpectFailure`: the request never succeeds, and five answers in a row are
/// errors (not a timeout, which the suite's client would retry).
fn expect_failure(s: &Suite, host: &str, path: &str) {
    s.eventually_consistent(
        &format!("GET http://{host}{path} fails"),
        || {
            let r = s.send("GET", host, path, &[]);
            assert_ne!(r.status, 200, "GET http://{host}{path} must fail: {}", r.body);
            r
        },
        |r| r.status >= 400 && r.status != 408 && r.status != 504,
    );
}

/// The policy with its `spec.validation.caCertificateRefs` set to `refs` (`kubectl apply`).
fn set_ca_refs(policy: &str, refs: Value) {
    let (ns, name) = split(policy);
    let mut object = cluster().get("BackendTLSPolicy", ns, name);
    object["spec"]["validation"]["caCertificateRefs"] = refs;
    object["metadata"] = json!({ "name": name, "namespace": ns });
    object.as_object_mut().unwrap().remove("status");
    cluster().admin.apply_value(&object, "test").unwrap();
}

/// A ConfigMap `ca.crt` in the infra namespace, applied.
fn ca_config_map(name: &str, ca: &str) -> Value {
    let map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": INFRA },
        "data": { "ca.crt": ca },
    });
    cluster().admin.apply_value(&map, "test").unwrap();
    map
}

#[test]
fn backendtlspolicy() {
    let s = Suite::start_l4("HTTPRoute", "backendtlspolicy.yaml");

    // Re-encrypt: HTTPS in, TLS to the backend with the policy's hostname.
    let https_gateway = "same-namespace-with-https-listener";
    s.accepted(https_gateway, &["backendtlspolicy-reencrypt"]);
    policy_condition("normative-test", https_gateway, ACCEPTED);
    policy_condition("normative-test", https_gateway, RESOLVED_REFS);
    s.eventually_consistent(
        "GET https://https-listener.org/backendtlspolicy reaches the backend with SNI abc.example.com",
        || s.send_tls("https-listener.org", "/backendtlspolicy"),
        |r| reached_with_sni(r, "abc.example.com"),
    );

    s.accepted(GATEWAY, &["backendtlspolicy"]);
    policy_condition("normative-test", GATEWAY, ACCEPTED);
    policy_condition("normative-test", GATEWAY, RESOLVED_REFS);
    expect_backend_sni(&s, "abc.example.com", "/backendtlspolicy", "abc.example.com");

    // The policy's hostname is not the certificate's.
    policy_condition("host-mismatch", GATEWAY, ACCEPTED);
    policy_condition("host-mismatch", GATEWAY, RESOLVED_REFS);
    expect_failure(&s, "abc.example.org", "/backendtlspolicy-host-mismatch");

    // The policy's CA did not sign the certificate.
    policy_condition("cert-mismatch", GATEWAY, ACCEPTED);
    policy_condition("cert-mismatch", GATEWAY, RESOLVED_REFS);
    expect_failure(&s, "abc.example.com", "/backendtlspolicy-cert-mismatch");

    // The CA's ConfigMap changes under the policy: missing, then present, emptied, restored.
    let policy = "reconcile-test";
    policy_condition(policy, GATEWAY, ACCEPTED);
    policy_condition(policy, GATEWAY, RESOLVED_REFS);
    let ca =
        cluster().get("ConfigMap", INFRA, tls_checks::CA_CONFIG_MAP)["data"]["ca.crt"].as_str().unwrap().to_string();
    let own = "tls-checks-ca-certificate-reconcile-test";
    let original_refs =
        cluster().get("BackendTLSPolicy", INFRA, policy)["spec"]["validation"]["caCertificateRefs"].clone();
    set_ca_refs(policy, json!([{ "group": "", "kind": "ConfigMap", "name": own }]));
    policy_condition(policy, GATEWAY, NO_VALID_CA);
    policy_condition(policy, GATEWAY, INVALID_CA_REF);
    let map = ca_config_map(own, &ca);
    policy_condition(policy, GATEWAY, ACCEPTED);
    policy_condition(policy, GATEWAY, RESOLVED_REFS);
    expect_backend_sni(&s, "abc.example.com", "/backendtlspolicy-reconcile-test", "abc.example.com");
    ca_config_map(own, "");
    policy_condition(policy, GATEWAY, NO_VALID_CA);
    policy_condition(policy, GATEWAY, INVALID_CA_REF);
    ca_config_map(own, &ca);
    policy_condition(policy, GATEWAY, ACCEPTED);
    policy_condition(policy, GATEWAY, RESOLVED_REFS);
    set_ca_refs(policy, original_refs);
    let (ns, name) = super::name_of(&map);
    cluster().admin.delete("ConfigMap", Some(&ns), &name);
}

#[test]
fn backendtlspolicy_san_validation() {
    let s = Suite::start_l4("HTTPRoute", "backendtlspolicy-san.yaml");
    s.accepted(GATEWAY, &["backendtlspolicy-san-test"]);
    let host = "abc.example.com";
    for policy in ["san-dns", "san-uri", "multiple-sans"] {
        policy_condition(policy, GATEWAY, ACCEPTED);
        expect_backend_sni(&s, host, &format!("/backendtlspolicy-{policy}"), host);
    }
    for policy in ["san-dns-mismatch", "san-uri-mismatch", "multiple-mismatch-sans"] {
        policy_condition(policy, GATEWAY, ACCEPTED);
        expect_failure(&s, host, &format!("/backendtlspolicy-{policy}"));
    }
}

#[test]
fn backendtlspolicy_invalid_ca_certificate_ref() {
    let s = Suite::start_l4("HTTPRoute", "backendtlspolicy-invalid-ca-certificate-ref.yaml");
    s.accepted(GATEWAY, &["backendtlspolicy-invalid-ca-certificate-ref"]);
    for policy in ["nonexistent-ca-certificate-ref", "malformed-ca-certificate-ref"] {
        policy_condition(policy, GATEWAY, NO_VALID_CA);
        policy_condition(policy, GATEWAY, INVALID_CA_REF);
        expect_status(&s, "abc.example.com", &format!("/backendtlspolicy-{policy}"), &[500, 502, 503]);
    }
}

#[test]
fn backendtlspolicy_invalid_kind() {
    let s = Suite::start_l4("HTTPRoute", "backendtlspolicy-invalid-kind.yaml");
    s.accepted(GATEWAY, &["backendtlspolicy-invalid-kind-test"]);
    policy_condition("invalid-kind", GATEWAY, NO_VALID_CA);
    policy_condition("invalid-kind", GATEWAY, ("ResolvedRefs", "False", "InvalidKind"));
    expect_status(&s, "abc.example.com", "/backendtlspolicy-invalid-kind", &[500, 502, 503]);
}

#[test]
fn backendtlspolicy_conflict_resolution() {
    let s = Suite::start_l4("HTTPRoute", "backendtlspolicy-conflict-resolution.yaml");
    s.accepted(GATEWAY, &["backendtlspolicy-conflict-resolution"]);
    let conflicted = ("Accepted", "False", "Conflicted");
    for case in ["without-section-name", "with-section-name"] {
        policy_condition(&format!("conflicted-{case}-1"), GATEWAY, ACCEPTED);
        policy_condition(&format!("conflicted-{case}-2"), GATEWAY, conflicted);
        expect_backend_sni(&s, "abc.example.com", &format!("/backendtlspolicy-conflicted-{case}"), "other.example.com");
    }
    policy_condition("not-conflicted-with-section-name", GATEWAY, ACCEPTED);
    policy_condition("not-conflicted-without-section-name", GATEWAY, ACCEPTED);
    let with = "/backendtlspolicy-not-conflicted-with-section-name";
    expect_backend_sni(&s, "abc.example.com", with, "other.example.com");
    let without = "/backendtlspolicy-not-conflicted-without-section-name";
    expect_backend_sni(&s, "abc.example.com", without, "abc.example.com");
}

#[test]
fn backendtlspolicy_observed_generation_bump() {
    let _s = Suite::start_l4("HTTPRoute", "backendtlspolicy-observed-generation-bump.yaml");
    let policy = "observed-generation-bump";
    policy_condition(policy, GATEWAY, ("Accepted", "True", ""));
    let original = cluster().get("BackendTLSPolicy", INFRA, policy);
    let mut changed = original.clone();
    changed["spec"]["validation"]["hostname"] = json!("foo.example.com");
    changed["metadata"] = json!({ "name": policy, "namespace": INFRA });
    changed.as_object_mut().unwrap().remove("status");
    cluster().admin.apply_value(&changed, "test").unwrap();
    policy_condition(policy, GATEWAY, ("Accepted", "True", ""));
    let updated = cluster().get("BackendTLSPolicy", INFRA, policy);
    assert_ne!(original["metadata"]["generation"], updated["metadata"]["generation"]);
    let ancestors = updated["status"]["ancestors"].as_array().cloned().unwrap_or_default();
    assert!(ancestors.iter().all(|a| latest(&updated, &a["conditions"])), "{updated:#}");
}

#[test]
fn gateway_tls_backend_client_certificate() {
    let s = Suite::start_l4("HTTPRoute", "gateway-tls-backend-client-certificate.yaml");
    let gateway = "gateway-tls-backend-client-certificate";
    s.accepted(gateway, &["gateway-tls-backend-client-certificate"]);
    policy_condition("gateway-tls-backend-client-certificate-test", gateway, ACCEPTED);
    gateway_condition(gateway, ("ResolvedRefs", "True", "ResolvedRefs"));
    // The backend requires a client certificate from the suite's CA: the Gateway's is presented.
    let client = tls_backend::certificate_file_id(
        &cluster().tls_checks.pki.path(&format!("{}.crt", tls_checks::BACKEND_CLIENT)),
    );
    s.eventually_consistent(
        "GET http://abc.example.com/ reaches the backend with the Gateway's client certificate",
        || s.send("GET", "abc.example.com", "/", &[]),
        |r| reached_with_sni(r, "abc.example.com") && r.body.ends_with(&format!(" client={client}\n")),
    );
}

#[test]
fn gateway_invalid_tls_backend_configuration() {
    let _s = Suite::start_l4("HTTPRoute", "gateway-invalid-tls-backend-configuration.yaml");
    let cases = [
        ("gateway-client-certificate-nonexistent-secret", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-unsupported-group", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-unsupported-kind", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-malformed-secret", "InvalidClientCertificateRef"),
        ("gateway-client-certificate-missing-reference-grant", "RefNotPermitted"),
    ];
    for (gateway, reason) in cases {
        gateway_condition(gateway, ("ResolvedRefs", "False", reason));
        gateway_condition(gateway, ("Accepted", "True", "Accepted"));
    }
}

/// `GatewayMustHaveCondition` (with its conditions current: `GatewayMustHaveLatestConditions`).
fn gateway_condition(gateway: &str, (type_, status, reason): (&str, &str, &str)) {
    let (ns, name) = split(gateway);
    status_until(
        &format!("Gateway {gateway}: {type_}={status} ({reason})"),
        || cluster().get("Gateway", ns, name),
        |gw| {
            latest(gw, &gw["status"]["conditions"]) && has_condition(&gw["status"]["conditions"], type_, status, reason)
        },
    );
}
