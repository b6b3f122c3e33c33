//! Table-driven tests: each file under `control/tests/fixtures/ingress/` holds real Kubernetes
//! objects and, last, an `Expect` document saying what the compiled table answers, which
//! certificate each host gets and which diagnostics are reported.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use ramjet_shared::{BackendKind, CertId, RouteTable};
use serde::Deserialize;

use super::*;
use crate::compile::cluster::compile;
use crate::compile::Compiler;
use crate::manifests;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[allow(dead_code)]
    #[serde(rename = "apiVersion")]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    routes: Vec<ExpectRoute>,
    #[serde(default)]
    endpoints: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    tls: BTreeMap<String, Option<String>>,
    #[serde(default)]
    redirects: Vec<String>,
    diagnostics: Vec<ExpectDiagnostic>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectRoute {
    host: String,
    path: String,
    backend: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ExpectDiagnostic {
    object: String,
    contains: String,
    /// `error` (the Ingress is not served) or `warning` (part of it is ignored), when given.
    #[serde(default)]
    severity: Option<String>,
}

/// Two certificate/key pairs, generated once per test run.
fn pems() -> &'static [(String, String); 2] {
    static PEMS: OnceLock<[(String, String); 2]> = OnceLock::new();
    PEMS.get_or_init(|| {
        let make = |host: &str| {
            let c = rcgen::generate_simple_self_signed(vec![host.to_string()]).unwrap();
            (c.cert.pem(), c.signing_key.serialize_pem())
        };
        [make("a.test"), make("b.test")]
    })
}

fn fixture_text(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingress").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let [(ca, ka), (cb, kb)] = pems();
    let quoted = |s: &str| serde_json::to_string(s).unwrap();
    text.replace("\"__CERT_A__\"", &quoted(ca))
        .replace("\"__KEY_A__\"", &quoted(ka))
        .replace("\"__CERT_B__\"", &quoted(cb))
        .replace("\"__KEY_B__\"", &quoted(kb))
}

/// The objects of a fixture (without its `Expect` document).
fn snapshot(name: &str) -> ClusterSnapshot {
    snapshot_and_expect(name).0
}

fn snapshot_and_expect(name: &str) -> (ClusterSnapshot, Option<Expect>) {
    let text = fixture_text(name);
    let mut objects = String::new();
    let mut expect = None;
    for document in text.split("\n---\n") {
        if document.contains("kind: Expect") {
            expect = Some(serde_yaml_ng::from_str(document).unwrap_or_else(|e| panic!("{name}: Expect: {e}")));
        } else {
            objects.push_str(document);
            objects.push_str("\n---\n");
        }
    }
    let mut snapshot = ClusterSnapshot { options: Arc::new(IngressOptions::default()), ..Default::default() };
    manifests::parse(&objects, name, &mut snapshot);
    assert!(snapshot.diagnostics.is_empty(), "{name}: the fixture does not parse: {:?}", snapshot.diagnostics);
    (snapshot, expect)
}

fn route_name(table: &RouteTable, host: &str, path: &str) -> Option<String> {
    table.route(host, path).map(|r| r.backend.name.to_string())
}

fn cert_id(pem: &(String, String)) -> CertId {
    CertId::of(pem.0.as_bytes(), pem.1.as_bytes())
}

fn run(name: &str) {
    let (snapshot, expect) = snapshot_and_expect(name);
    let expect = expect.unwrap_or_else(|| panic!("{name} has no Expect document"));
    let mut compiler = Compiler::new();
    let generation = next(&mut compiler, &snapshot).expect("a first generation");
    let table = &generation.table;
    let mut failures = Vec::new();
    for r in &expect.routes {
        let got = route_name(table, &r.host, &r.path);
        if got != r.backend {
            failures.push(format!("{}{}: expected {:?}, got {:?}", r.host, r.path, r.backend, got));
        }
    }
    for (backend, want) in &expect.endpoints {
        let found = table.hosts().flat_map(|h| h.routes().map(|(_, r)| r.backend.clone()).collect::<Vec<_>>());
        let found = found.chain(table.default_route().map(|r| r.backend.clone())).find(|b| &*b.name == backend);
        match found.as_deref().map(|b| &b.kind) {
            Some(BackendKind::Endpoints(addrs)) => {
                let got: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
                if &got != want {
                    failures.push(format!("endpoints of {backend}: expected {want:?}, got {got:?}"));
                }
            }
            other => failures.push(format!("endpoints of {backend}: expected {want:?}, got {other:?}")),
        }
    }
    let [a, b] = pems();
    for (host, want) in &expect.tls {
        let want = want.as_deref().map(|w| match w {
            "A" => cert_id(a),
            "B" => cert_id(b),
            other => panic!("{name}: unknown certificate {other}"),
        });
        let got = table.certificate_for(host);
        if got != want {
            failures.push(format!("certificate for {host}: expected {want:?}, got {got:?}"));
        }
        if let Some(id) = got {
            if !generation.certificates.iter().any(|c| c.id == id) {
                failures.push(format!("certificate for {host} is not carried by the generation"));
            }
        }
    }
    for host in &expect.redirects {
        if !table.redirects_to_https(host) {
            failures.push(format!("{host} does not redirect to HTTPS"));
        }
    }
    let mut unmatched: Vec<_> = generation.diagnostics.iter().collect();
    for want in &expect.diagnostics {
        let matches = |d: &&ramjet_shared::Diagnostic| {
            d.object.to_string() == want.object
                && d.message.contains(&want.contains)
                && want.severity.as_ref().is_none_or(|s| s == d.severity.as_str())
        };
        match unmatched.iter().position(matches) {
            Some(i) => {
                unmatched.remove(i);
            }
            None => failures.push(format!("missing diagnostic {want:?}")),
        }
    }
    for extra in unmatched {
        failures.push(format!("unexpected diagnostic {extra:?}"));
    }
    assert!(failures.is_empty(), "{name}:\n  {}", failures.join("\n  "));
}

macro_rules! fixtures {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run(concat!(stringify!($name), ".yaml"));
            }
        )*
    };
}

fixtures!(
    class_selection,
    class_not_default,
    hosts_and_paths,
    default_backend,
    conflicts,
    service_ports,
    endpoints,
    bad_objects,
    tls,
    annotations,
);

/// Every fixture file is run by a test above.
#[test]
fn every_fixture_is_listed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingress");
    let listed = [
        "class_selection",
        "class_not_default",
        "hosts_and_paths",
        "default_backend",
        "conflicts",
        "service_ports",
        "endpoints",
        "bad_objects",
        "tls",
        "annotations",
        "scaling",
    ];
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().trim_end_matches(".yaml").to_string();
        assert!(listed.contains(&name.as_str()), "fixture {name}.yaml is not run by any test");
    }
}

fn next(compiler: &mut Compiler, snapshot: &ClusterSnapshot) -> Option<ramjet_shared::Generation> {
    let draft = compile(snapshot, compiler);
    compiler.finish(draft)
}

fn ingress_mut<'a>(snapshot: &'a mut ClusterSnapshot, name: &str) -> &'a mut Ingress {
    let i = snapshot.ingresses.iter().position(|i| i.metadata.name.as_deref() == Some(name)).unwrap();
    Arc::make_mut(&mut snapshot.ingresses[i])
}

/// Prefix `/foo` → `/foo/` compiles to the same table: no generation.
#[test]
fn an_edit_to_the_same_table_is_no_generation() {
    let mut compiler = Compiler::new();
    let mut snapshot = snapshot("hosts_and_paths.yaml");
    assert!(next(&mut compiler, &snapshot).is_some());
    let site = ingress_mut(&mut snapshot, "site");
    let paths = &mut site.spec.as_mut().unwrap().rules.as_mut().unwrap()[0].http.as_mut().unwrap().paths;
    assert_eq!(paths[1].path.as_deref(), Some("/foo"));
    paths[1].path = Some("/foo/".into());
    assert!(next(&mut compiler, &snapshot).is_none(), "/foo → /foo/ made a generation");
    // The same objects in another order: still the same table.
    snapshot.ingress_classes.reverse();
    snapshot.services.reverse();
    assert!(next(&mut compiler, &snapshot).is_none());
}

/// A Deployment scaling 3 → 5 (only the EndpointSlice changes) is a new generation, and the hosts it
/// does not touch are shared with the previous one.
#[test]
fn an_endpoint_slice_change_is_a_new_generation() {
    let mut compiler = Compiler::new();
    let mut snapshot = snapshot("scaling.yaml");
    let first = next(&mut compiler, &snapshot).unwrap();
    let backend = |g: &ramjet_shared::Generation, host: &str| g.table.route(host, "/").unwrap().backend.clone();
    assert_eq!(backend(&first, "web.test").endpoint_count(), 3);
    let i = snapshot.endpoint_slices.iter().position(|s| s.metadata.name.as_deref() == Some("web-1")).unwrap();
    let slice = Arc::make_mut(&mut snapshot.endpoint_slices[i]);
    let mut more = slice.endpoints[0].clone();
    for ip in ["10.0.0.4", "10.0.0.5"] {
        more.addresses = vec![ip.into()];
        slice.endpoints.push(more.clone());
    }
    let second = next(&mut compiler, &snapshot).expect("a new generation");
    assert_eq!(second.number, first.number + 1);
    assert_eq!(backend(&second, "web.test").endpoint_count(), 5);
    assert!(Arc::ptr_eq(&backend(&first, "other.test"), &backend(&second, "other.test")));
    let group = |g: &ramjet_shared::Generation| g.table.host_routes("other.test").unwrap().clone();
    assert!(Arc::ptr_eq(&group(&first), &group(&second)), "the untouched host is shared");
}

/// A bad Ingress added next to good ones changes nothing they serve.
#[test]
fn a_bad_ingress_does_not_change_the_good_ones() {
    let mut compiler = Compiler::new();
    let mut snapshot = snapshot("scaling.yaml");
    let first = next(&mut compiler, &snapshot).unwrap();
    let mut bad = (*snapshot.ingresses[0]).clone();
    bad.metadata.name = Some("bad".into());
    let rule = &mut bad.spec.as_mut().unwrap().rules.as_mut().unwrap()[0];
    rule.host = Some("bad.test".into());
    // A port its Service does not have (a Service that does not exist would be served, 503).
    let service = rule.http.as_mut().unwrap().paths[0].backend.service.as_mut().unwrap();
    service.port = Some(k8s_openapi::api::networking::v1::ServiceBackendPort { number: Some(9999), name: None });
    snapshot.ingresses.push(Arc::new(bad));
    let draft = compile(&snapshot, &mut compiler);
    assert_eq!(draft.diagnostics.len(), 1);
    assert_eq!(draft.diagnostics[0].object, ramjet_shared::ObjectRef::ingress("default", "bad"));
    assert_eq!(draft.diagnostics[0].severity, ramjet_shared::Severity::Error);
    assert!(compiler.finish(draft).is_none(), "the table is the same");
    assert!(first.table.route("web.test", "/").is_some());
}

/// Every fixture compiles to the same digest in a fresh compiler, to no new generation in the same
/// one, and to the digest its table's item walk gives (what the audit diff compares).
#[test]
fn compiling_the_same_objects_twice_gives_the_same_digest() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingress");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        let snapshot = snapshot(&name);
        let mut compiler = Compiler::new();
        let first = next(&mut compiler, &snapshot).unwrap();
        assert!(next(&mut compiler, &snapshot).is_none(), "{name}: the same objects made a generation");
        let again = next(&mut Compiler::new(), &snapshot).unwrap();
        assert_eq!(first.digest, again.digest, "{name}");
        assert_eq!(first.table.recompute_digest(), first.digest, "{name}");
    }
}

/// `backend-protocol` (ramjet's or ingress-nginx's) makes every backend of that Ingress speak it;
/// other Ingresses' backends are untouched, and a protocol that cannot be served is reported.
#[test]
fn backend_protocol_annotations_set_the_backends_protocol() {
    use ramjet_shared::BackendProtocol;
    let mut compiler = Compiler::new();
    let mut snapshot = snapshot("scaling.yaml");
    let protocol = |g: &ramjet_shared::Generation, host: &str| g.table.route(host, "/").unwrap().backend.protocol;
    let first = next(&mut compiler, &snapshot).unwrap();
    assert_eq!(protocol(&first, "web.test"), BackendProtocol::Http1);
    let name = snapshot.ingresses[0].metadata.name.clone().unwrap();
    let annotate = |snapshot: &mut ClusterSnapshot, key: &str, value: &str| {
        let ingress = ingress_mut(snapshot, &name);
        ingress.metadata.annotations = Some([(key.to_string(), value.to_string())].into());
    };
    annotate(&mut snapshot, "nginx.ingress.kubernetes.io/backend-protocol", "GRPC");
    let second = next(&mut compiler, &snapshot).expect("a new generation: the protocol is part of the table");
    assert_ne!(first.digest, second.digest);
    let host = snapshot.ingresses[0].spec.as_ref().unwrap().rules.as_ref().unwrap()[0].host.clone().unwrap();
    assert_eq!(protocol(&second, &host), BackendProtocol::Grpc);
    annotate(&mut snapshot, "ramjet.dev/backend-protocol", "h2c");
    assert_eq!(protocol(&next(&mut compiler, &snapshot).unwrap(), &host), BackendProtocol::H2c);
    annotate(&mut snapshot, "ramjet.dev/backend-protocol", "FCGI");
    let draft = compile(&snapshot, &mut compiler);
    assert!(
        draft.diagnostics.iter().any(|d| d.message.contains("unknown backend protocol")),
        "{:?}",
        draft.diagnostics
    );
}

/// HTTPS and GRPCS backends with ingress-nginx's proxy-ssl-* semantics: encrypt without verifying
/// and without SNI by default; `proxy-ssl-secret`'s `ca.crt` verifies with `proxy-ssl-verify: on`
/// and its certificate is presented; `proxy-ssl-name` replaces the Service's DNS name. What
/// cannot be honoured keeps the Ingress out, with the reason.
#[test]
fn tls_backends_follow_the_proxy_ssl_annotations() {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::ByteString;
    use ramjet_shared::{BackendProtocol, Severity};
    let [(cert, key), (ca, _)] = pems();
    let mut snapshot = snapshot("scaling.yaml");
    let secret = |name: &str, ca: Option<&str>| {
        let mut data = BTreeMap::from([
            ("tls.crt".to_string(), ByteString(cert.as_bytes().to_vec())),
            ("tls.key".to_string(), ByteString(key.as_bytes().to_vec())),
        ]);
        if let Some(ca) = ca {
            data.insert("ca.crt".to_string(), ByteString(ca.as_bytes().to_vec()));
        }
        let mut s = Secret { type_: Some(TLS_SECRET_TYPE.into()), data: Some(data), ..Default::default() };
        s.metadata.name = Some(name.into());
        s.metadata.namespace = Some("default".into());
        Arc::new(s)
    };
    snapshot.secrets.push(secret("backend-ca", Some(ca)));
    snapshot.secrets.push(secret("no-ca", None));
    let annotate = |snapshot: &mut ClusterSnapshot, pairs: &[(&str, &str)]| {
        let site = ingress_mut(snapshot, "site");
        site.metadata.annotations =
            Some(pairs.iter().map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), v.to_string())).collect());
    };
    let mut compiler = Compiler::new();
    let backend = |g: &ramjet_shared::Generation, host: &str| g.table.route(host, "/").unwrap().backend.clone();

    // HTTPS alone: encrypted, not verified, no SNI, the Service's name.
    annotate(&mut snapshot, &[("backend-protocol", "HTTPS")]);
    let g = next(&mut compiler, &snapshot).unwrap();
    let web = backend(&g, "web.test");
    let tls = web.tls.as_ref().expect("TLS settings");
    assert_eq!(web.protocol, BackendProtocol::Https);
    assert_eq!((tls.verified_by.as_deref(), tls.sni), (None, false));
    assert_eq!(format!("{:?}", tls.server_name), format!("{:?}", server_name("web.default.svc")));
    assert_eq!(
        format!("{:?}", backend(&g, "other.test").tls.as_ref().unwrap().server_name),
        format!("{:?}", server_name("other.default.svc"))
    );

    // Verified against the Secret's CA, under the name given, with SNI: a new generation.
    annotate(
        &mut snapshot,
        &[
            ("backend-protocol", "GRPCS"),
            ("proxy-ssl-secret", "default/backend-ca"),
            ("proxy-ssl-verify", "on"),
            ("proxy-ssl-name", "api.internal"),
            ("proxy-ssl-server-name", "on"),
        ],
    );
    let g2 = next(&mut compiler, &snapshot).expect("the TLS settings are part of the table");
    assert_ne!(g.digest, g2.digest);
    let web = backend(&g2, "web.test");
    let tls = web.tls.as_ref().unwrap();
    assert_eq!(web.protocol, BackendProtocol::Grpcs);
    assert_eq!((tls.verified_by.as_deref(), tls.sni), (Some("default/backend-ca"), true));
    assert_eq!(format!("{:?}", tls.server_name), format!("{:?}", server_name("api.internal")));
    // The same objects again: the same settings, shared (no generation, same value).
    assert!(next(&mut compiler, &snapshot).is_none());
    let again = compile(&snapshot, &mut compiler);
    let rebuilt = again.builder.build(None);
    assert!(Arc::ptr_eq(
        rebuilt.route("web.test", "/").unwrap().backend.tls.as_ref().unwrap(),
        web.tls.as_ref().unwrap()
    ));

    // What cannot be honoured is refused, and the Ingress is not served.
    for (pairs, reason) in [
        (vec![("proxy-ssl-verify", "on")], "no proxy-ssl-secret"),
        (vec![("proxy-ssl-secret", "default/missing")], "Secret default/missing does not exist"),
        (vec![("proxy-ssl-secret", "no-ca")], "has no ca.crt"),
        (vec![("proxy-ssl-secret", "elsewhere/backend-ca")], "in another namespace"),
        (vec![("proxy-ssl-name", "not a name")], "not a DNS name"),
        (vec![("proxy-ssl-verify", "yes")], "neither \"on\" nor \"off\""),
    ] {
        let mut all = vec![("backend-protocol", "HTTPS")];
        all.extend(pairs.iter().copied());
        annotate(&mut snapshot, &all);
        let draft = compile(&snapshot, &mut compiler);
        let refused = draft.diagnostics.iter().find(|d| d.message.contains(reason));
        assert!(refused.is_some_and(|d| d.severity == Severity::Error), "{reason}: {:?}", draft.diagnostics);
        assert!(draft.builder.build(None).route("web.test", "/").is_none(), "{reason}: served");
    }

    // proxy-ssl-* on a plain backend do nothing, and the user is told.
    annotate(&mut snapshot, &[("proxy-ssl-verify", "on")]);
    let draft = compile(&snapshot, &mut compiler);
    assert!(
        draft.diagnostics.iter().any(|d| d.severity == Severity::Warning && d.message.contains("have no effect")),
        "{:?}",
        draft.diagnostics
    );
    assert!(draft.builder.build(None).route("web.test", "/").unwrap().backend.tls.is_none());
}

fn server_name(name: &str) -> rustls::pki_types::ServerName<'static> {
    rustls::pki_types::ServerName::try_from(name.to_string()).unwrap()
}

#[test]
fn mirror_target_urls_are_read_as_ingress_nginx_writes_them() {
    let url = |u: &str| super::MirrorUrl::parse(u);
    let parsed = url("http://Shadow.shop.svc.cluster.local/$request_uri").unwrap();
    assert_eq!(
        (parsed.host.as_str(), parsed.port, parsed.path.as_deref()),
        ("shadow.shop.svc.cluster.local", 80, None)
    );
    assert_eq!(parsed.service("web"), Some(("shadow".into(), "shop".into())));
    let parsed = url("http://localhost:8080/mirror").unwrap();
    assert_eq!((parsed.port, parsed.path.as_deref()), (8080, Some("/mirror")));
    assert_eq!(parsed.service("web"), Some(("localhost".into(), "web".into())));
    assert_eq!(url("http://mirror.partner.example").unwrap().service("web"), None);
    let secure = url("https://test.env.com/$request_uri").unwrap();
    assert_eq!((secure.https, secure.port, secure.path), (true, 443, None));
    assert!(url("http://a/$uri").unwrap_err().contains("only `/$request_uri`"));
    assert!(url("http://a:x/").unwrap_err().contains("not a port"));
    assert!(url("ftp://a/").is_err() && url("http:///x").is_err());
}
