//! The suite's client-certificate tests (v1.6.1, a Gateway's `spec.tls.frontend`): listener status,
//! then HTTPS requests that present the client certificate of one CA or another, or none. The
//! client certificates and their CAs are the suite's (`tls_checks.rs`). A request the validation
//! refuses fails in the handshake (`MakeTLSRequestAndExpectFailureResponse`: the request errs).
//!
//! The suite sends each listener's requests to its port (443 or 8443); ramjet serves every HTTPS
//! port of the Gateways on one TLS listener, so the port is the HTTPS listener's, and the server
//! name chooses the listener's validation, as it chooses its certificate.

use std::path::PathBuf;

use super::{cluster, has_condition, listener_until, split, status_until, Suite};

/// The CA ConfigMaps of `spec.tls.frontend` in the suite's manifests.
const DEFAULT_CA: &str = "tls-validity-checks-ca-certificate";
const PER_PORT_CA: &str = "tls-validity-checks-per-port-ca-certificate";

/// The client certificate the CA of ConfigMap `ca` signed.
fn client_of(ca: &str) -> (PathBuf, PathBuf) {
    cluster().tls_checks.client_certificate(ca)
}

/// `GatewayListenerMustHaveConditions`: the listener's conditions include each of `conditions`
/// (an empty reason: any), and the Gateway's are current.
fn listener_conditions(gateway: &str, listener: &str, conditions: &[(&str, &str, &str)]) {
    listener_until(gateway, listener, &format!("{conditions:?}"), |l| {
        conditions.iter().all(|(t, s, r)| has_condition(&l["conditions"], t, s, r))
    });
}

/// `MakeTLSRequestAndExpectEventuallyConsistentResponse`: a GET of `/` for `host`, presenting
/// `client`, answers `200`.
fn expect_ok(s: &Suite, host: &str, client: Option<&(PathBuf, PathBuf)>) {
    s.eventually_consistent(
        &format!("GET https://{host}/ with {client:?} answers 200"),
        || s.send_tls_as(host, "/", client),
        |r| r.as_ref().is_ok_and(|r| r.status == 200),
    );
}

/// `MakeTLSRequestAndExpectFailureResponse`: the request fails.
fn expect_refused(s: &Suite, host: &str, client: Option<&(PathBuf, PathBuf)>) {
    let answer = s.send_tls_as(host, "/", client);
    assert!(answer.is_err(), "GET https://{host}/ with {client:?} must fail: {answer:?}");
}

#[test]
fn gateway_frontend_client_certificate_validation() {
    let s = Suite::start_l4("HTTPRoute", "gateway-with-clientcertificate-validation.yaml");
    let routes = ["client-certificate-validation-https-test", "client-certificate-validation-https-test-no-hostname"];
    s.accepted("client-validation-default", &routes);
    let (default, per_port) = (client_of(DEFAULT_CA), client_of(PER_PORT_CA));
    // The listener on 443 (any name): the default validation.
    expect_ok(&s, "example.org", Some(&default));
    expect_refused(&s, "example.org", Some(&per_port));
    // The listener on 8443 (`second-example.org`): its port's.
    expect_ok(&s, "second-example.org", Some(&per_port));
    expect_refused(&s, "second-example.org", Some(&default));
}

#[test]
fn gateway_frontend_insecure_fallback() {
    let s = Suite::start_l4("HTTPRoute", "gateway-with-clientcertificate-validation-insecure-fallback.yaml");
    let gateway = "client-validation-insecure-fallback";
    let routes =
        ["client-cert-validation-insecure-fallback-test", "client-cert-validation-insecure-fallback-test-no-hostname"];
    s.accepted(gateway, &routes);
    let (ns, name) = split(gateway);
    status_until(
        &format!("Gateway {gateway}: InsecureFrontendValidationMode"),
        || cluster().get("Gateway", ns, name),
        |gw| {
            has_condition(&gw["status"]["conditions"], "InsecureFrontendValidationMode", "True", "ConfigurationChanged")
        },
    );
    let (default, per_port) = (client_of(DEFAULT_CA), client_of(PER_PORT_CA));
    for host in ["example.org", "second-example.org"] {
        for client in [Some(&default), Some(&per_port), None] {
            expect_ok(&s, host, client);
        }
    }
}

#[test]
fn gateway_frontend_invalid_client_certificate_validation() {
    // The Gateway's listeners are on 443, 7443, 8443 and 6443: ramjet's HTTPS ports here.
    let tests = cluster().l4_tests.clone();
    let test = "gateway-with-invalid-clientcertificate-validation.yaml";
    let _s = Suite::start_with("HTTPRoute", &tests, test, &[443, 6443, 7443, 8443]);
    let gateway = "gateway-with-invalid-client-cert-validation";
    let ready = [("ResolvedRefs", "True", ""), ("Accepted", "True", ""), ("Programmed", "True", "")];
    listener_conditions(gateway, "https", &ready);
    let refused = |reason| {
        [("ResolvedRefs", "False", reason), ("Accepted", "False", "NoValidCACertificate"), ("Programmed", "False", "")]
    };
    listener_conditions(gateway, "https-unresolved", &refused("InvalidCACertificateRef"));
    listener_conditions(gateway, "https-invalid-kind", &refused("InvalidCACertificateKind"));
    listener_conditions(gateway, "https-grant-missing", &refused("RefNotPermitted"));
}

#[test]
fn gateway_invalid_default_frontend_client_certificate_validation() {
    let s = Suite::start_l4("HTTPRoute", "gateway-invalid-default-frontend-client-certificate-validation.yaml");
    let gateway = "invalid-default-client-validation-config";
    // The HTTP listener has no TLS to validate: its port's entry does not apply.
    listener_conditions(
        gateway,
        "http",
        &[("ResolvedRefs", "True", ""), ("Accepted", "True", ""), ("Programmed", "True", "")],
    );
    s.eventually_consistent(
        "GET http://example.org/ answers 200",
        || s.send("GET", "example.org", "/", &[]),
        |r| r.status == 200,
    );
    // The HTTPS listener's default names no usable CA: it is not served.
    let refused = [
        ("ResolvedRefs", "False", "InvalidCACertificateRef"),
        ("Accepted", "False", "NoValidCACertificate"),
        ("Programmed", "False", ""),
    ];
    listener_conditions(gateway, "https", &refused);
    expect_refused(&s, "example.org", None);
}
