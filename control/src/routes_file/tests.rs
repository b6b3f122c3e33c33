use super::*;

fn parse_str(text: &str) -> Result<StaticRoutes, ConfigError> {
    parse(text, Path::new("."), "routes.yaml")
}

#[test]
fn parses_the_quickstart_shape() {
    let r = parse_str(
        r#"
backends:
  api:   { endpoints: ["127.0.0.1:9001", "127.0.0.1:9002"] }
  hello: { respond: { status: 200, body: "hello from ramjet\n" } }
defaultBackend: hello
routes:
  - { host: Example.com, path: /api, pathType: Prefix, backend: api }
  - { host: "*.example.com", path: /exact, pathType: Exact, backend: api }
  - { path: /, backend: hello }
"#,
    )
    .unwrap();
    assert_eq!(r.routes.len(), 3);
    assert_eq!(r.routes[0].host, "example.com");
    assert!(r.routes[1].exact);
    assert_eq!(r.routes[2].host, "");
    assert_eq!(r.default_backend.as_deref(), Some("hello"));
    assert_eq!(
        r.backends["api"],
        BackendSpec::Endpoints(
            vec!["127.0.0.1:9001".parse().unwrap(), "127.0.0.1:9002".parse().unwrap()],
            BackendProtocol::Http1,
            None
        )
    );
}

fn error(text: &str) -> ConfigError {
    parse_str(text).unwrap_err()
}

#[test]
fn errors_name_line_and_field() {
    let e = error("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\nroutes:\n  - { path: /, backend: b }\n");
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("routes[0].backend"), "{e}");
    assert!(e.message.contains("unknown backend `b`") && e.message.contains("a"), "{e}");

    let e = error("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\nroutes:\n  - { path: nope, backend: a }\n");
    assert_eq!(e.line, Some(4));
    assert!(e.message.contains("routes[0].path: `nope` must start with `/`"), "{e}");

    let e = error("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\ndefaultBackend: c\n");
    assert_eq!(e.line, Some(3));
    assert!(e.message.starts_with("defaultBackend: unknown backend `c`"), "{e}");

    let e = error("backends:\n  a: { endpoints: [\"999.0.0.1:x\"] }\n");
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("backends.a.endpoints: endpoint `999.0.0.1:x`"), "{e}");

    let e = error("backends: {}\nroutse: []\n");
    assert_eq!(e.line, Some(2));
    assert!(e.message.contains("unknown field `routse`"), "{e}");

    let e = error("backends:\n  a: { endpoints: [] , respond: { status: 200 } }\n");
    assert!(e.message.contains("exactly one"), "{e}");

    let e = error("backends:\n  a: { respond: { status: 200 } }\nroutes:\n  - { host: \"a b\", backend: a }\n");
    assert!(e.message.contains("not a DNS name"), "{e}");

    let e = error("backends:\n  a: { respond: { status: 200 } }\ntls:\n  - { hosts: [a.com], certFile: /nonexistent.crt, keyFile: /nonexistent.key }\n");
    assert_eq!(e.line, Some(4));
    assert!(e.message.contains("/nonexistent.crt"), "{e}");
    assert!(e.to_string().starts_with("routes.yaml:4:"), "{e}");
}

#[test]
fn a_backend_names_its_protocol() {
    let r = parse_str("backends:\n  g: { endpoints: [\"127.0.0.1:1\"], protocol: grpc }\n  h: { endpoints: [] }\n")
        .unwrap();
    assert_eq!(
        r.backends["g"],
        BackendSpec::Endpoints(vec!["127.0.0.1:1".parse().unwrap()], BackendProtocol::Grpc, None)
    );
    assert_eq!(r.backends["h"], BackendSpec::Endpoints(vec![], BackendProtocol::Http1, None));

    let e = error("backends:\n  g: { endpoints: [], protocol: SPDY }\n");
    assert!(e.message.contains("unknown backend protocol"), "{e}");
    let e = error("backends:\n  g: { respond: { status: 200 }, protocol: H2C }\n");
    assert!(e.message.contains("`protocol` applies to `endpoints`"), "{e}");
}

/// `protocol: HTTPS` / `GRPCS` take a `tls:` with ingress-nginx's defaults (encrypt without
/// verifying, no SNI, the first endpoint's host as the name); mistakes are refused with the field.
#[test]
fn a_tls_backend_takes_its_settings_with_ingress_nginx_defaults() {
    let r = parse_str("backends:\n  s: { endpoints: [\"localhost:8443\"], protocol: HTTPS }\n").unwrap();
    let BackendSpec::Endpoints(_, BackendProtocol::Https, Some(tls)) = &r.backends["s"] else {
        panic!("{:?}", r.backends["s"])
    };
    assert!(tls.0.verify.is_none() && !tls.0.sni && tls.0.client_cert.is_none());
    assert_eq!(tls.0.server_name, "localhost");
    let r = parse_str("backends:\n  g: { endpoints: [\"127.0.0.1:1\"], protocol: GRPCS, tls: { serverName: api.internal, sni: true } }\n")
        .unwrap();
    let BackendSpec::Endpoints(_, BackendProtocol::Grpcs, Some(tls)) = &r.backends["g"] else { panic!() };
    assert_eq!((tls.0.server_name.as_str(), tls.0.sni), ("api.internal", true));

    for (yaml, field, says) in [
        ("{ endpoints: [], protocol: HTTP, tls: {} }", "tls", "HTTPS or GRPCS"),
        ("{ endpoints: [], protocol: HTTPS, tls: { verify: true } }", "tls.verify", "needs caFile"),
        (
            "{ endpoints: [], protocol: HTTPS, tls: { verify: true, caFile: /nonexistent.pem } }",
            "tls.caFile",
            "cannot read",
        ),
        ("{ endpoints: [], protocol: HTTPS, tls: { serverName: \"a b\" } }", "tls.serverName", "not a DNS name"),
        ("{ endpoints: [], protocol: HTTPS, tls: { certFile: c.crt } }", "tls.certFile", "go together"),
        ("{ endpoints: [], protocol: HTTPS, tls: { verfy: true } }", "", "unknown field `verfy`"),
    ] {
        let e = error(&format!("backends:\n  s: {yaml}\n"));
        assert!(e.message.contains(field) && e.message.contains(says), "{yaml}: {e}");
        assert_eq!(e.line, Some(2), "{yaml}: {e}");
    }
}

/// A static canary cannot auto-promote (no place to keep its state; docs/canaries.md): the field
/// is refused with its line rather than ignored.
#[test]
fn a_static_canary_cannot_auto_promote() {
    let e = error(
        "backends:\n  a: { respond: { status: 200 } }\n  b: { respond: { status: 200 } }\nroutes:\n  - host: a.test\n    backend: a\n    canary: { backend: b, autoPromote: true }\n",
    );
    assert_eq!(e.line, Some(7), "{e}");
    assert!(e.message.contains("unknown field `autoPromote`"), "{e}");
}
