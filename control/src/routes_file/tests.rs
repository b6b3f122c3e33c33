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
            vec![
                EndpointAddr::Addr("127.0.0.1:9001".parse().unwrap()),
                EndpointAddr::Addr("127.0.0.1:9002".parse().unwrap())
            ],
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
        BackendSpec::Endpoints(vec![EndpointAddr::Addr("127.0.0.1:1".parse().unwrap())], BackendProtocol::Grpc, None)
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
    let BackendSpec::Endpoints(written, BackendProtocol::Https, Some(tls)) = &r.backends["s"] else {
        panic!("{:?}", r.backends["s"])
    };
    assert_eq!(written, &[EndpointAddr::Name("localhost".into(), 8443)], "a name is resolved later, not here");
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

/// A directory holding `edge.crt` / `edge.key`, a certificate for `tls.example.com`.
fn certificate_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ramjet-routes-file-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["tls.example.com".to_string()]).unwrap();
    std::fs::write(dir.join("edge.crt"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("edge.key"), cert.signing_key.serialize_pem()).unwrap();
    dir
}

const RELAYS: &str = "backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\n  b: { endpoints: [\"127.0.0.1:2\"] }\n";

/// `tlsPorts:` entries share a port by server name: names in lower case, none for any name, the
/// mode in any case, a terminated name with its certificate (relative to the file), weights.
#[test]
fn tls_ports_share_a_port_by_name_passed_through_or_terminated() {
    let dir = certificate_dir("tls-ports");
    let yaml = format!(
        "{RELAYS}tlsPorts:\n  - port: 8883\n    hostnames: [MQTT.example.com, \"*.iot.example.com\"]\n    mode: passthrough\n    backends: [{{ name: a, weight: 3 }}, {{ name: b }}]\n  - port: 8883\n    hostnames: [tls.example.com]\n    mode: Terminate\n    certFile: edge.crt\n    keyFile: edge.key\n    backend: b\n  - {{ port: 9443, mode: Passthrough, backend: a }}\n"
    );
    let r = parse(&yaml, &dir, "routes.yaml").unwrap();
    assert_eq!(r.tls_ports.len(), 3);
    let passed = &r.tls_ports[0];
    assert_eq!(passed.relay, PortSpec { port: 8883, backends: vec![("a".into(), 3), ("b".into(), 1)] });
    assert_eq!(passed.hostnames, ["mqtt.example.com", "*.iot.example.com"]);
    assert!(passed.terminate.is_none());
    let terminated = &r.tls_ports[1];
    assert_eq!(terminated.relay, PortSpec { port: 8883, backends: vec![("b".into(), 1)] });
    assert!(terminated.terminate.as_ref().is_some_and(|c| c.source.ends_with("edge.crt")), "{terminated:?}");
    assert_eq!(r.tls_ports[2].hostnames, [""], "no hostnames: any name");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every mistake in a `tlsPorts:` entry refuses the file with the line, column and field it is
/// about; so does a port a `tcp:` entry has, in either order.
#[test]
fn a_tls_port_mistake_names_its_line_and_field() {
    let dir = certificate_dir("tls-port-mistakes");
    let entry = |fields: &str| format!("{RELAYS}tlsPorts:\n  - port: 8883\n    hostnames: [x.test]\n{fields}");
    let cases: Vec<(String, &str, &str, &str)> = vec![
        (entry("    mode: Passthrough\n    backend: c\n"), "8:14", "tlsPorts[0].backend", "unknown backend `c`; the backends defined are: a, b"),
        (
            format!("{RELAYS}  r: {{ respond: {{ status: 200 }} }}\n  s: {{ endpoints: [], protocol: HTTPS }}\ntlsPorts:\n  - {{ port: 1, mode: Passthrough, backends: [{{ name: a }}, {{ name: s }}] }}\n"),
            "7:67",
            "tlsPorts[0].backends[1].name",
            "backend `s` cannot be relayed to",
        ),
        (format!("{RELAYS}tlsPorts:\n  - {{ port: 0, mode: Passthrough, backend: a }}\n"), "5:13", "tlsPorts[0].port", "0 is not a port (1 to 65535)"),
        (format!("{RELAYS}tlsPorts:\n  - {{ port: 65536, mode: Passthrough, backend: a }}\n"), "5:13", "tlsPorts[0].port", "65536 is not a port"),
        (entry("    mode: passthrough\n    backend: a\n    certFile: edge.crt\n    keyFile: edge.key\n"), "5:5", "tlsPorts[0].certFile", "mode Passthrough hands the TLS session to the backend unopened"),
        (entry("    mode: passthrough\n    backend: a\n    keyFile: edge.key\n"), "5:5", "tlsPorts[0].keyFile", "leave certFile and keyFile out"),
        (entry("    mode: terminate\n    backend: a\n"), "5:5", "tlsPorts[0].certFile", "mode Terminate needs certFile and keyFile"),
        (entry("    mode: terminate\n    certFile: edge.crt\n    backend: a\n"), "5:5", "tlsPorts[0].certFile", "certFile and keyFile go together"),
        (entry("    mode: terminate\n    certFile: none.crt\n    keyFile: edge.key\n    backend: a\n"), "5:5", "tlsPorts[0].certFile", "cannot read"),
        (entry("    mode: Sideways\n    backend: a\n"), "7:11", "tlsPorts[0].mode", "`Sideways` is not a mode: Passthrough or Terminate"),
        (entry("    backend: a\n"), "5:5", "tlsPorts[0]", "missing field `mode`"),
        (entry("    mode: Passthrough\n"), "5:5", "tlsPorts[0].backend", "give exactly one of `backend` or a non-empty `backends`"),
        (entry("    mode: Passthrough\n    backends: [{ name: a, weight: 0 }, { name: b, weight: 0 }]\n"), "5:5", "tlsPorts[0].backends", "every weight is 0"),
        (entry("    mode: Passthrough\n    backend: a\n    sni: x.test\n"), "9:5", "tlsPorts[0]", "unknown field `sni`"),
        (format!("{RELAYS}tlsPorts:\n  - {{ port: 1, hostnames: [], mode: Passthrough, backend: a }}\n"), "5:5", "tlsPorts[0].hostnames", "is empty"),
        (format!("{RELAYS}tlsPorts:\n  - {{ port: 1, hostnames: [a.test, \"a b\"], mode: Passthrough, backend: a }}\n"), "5:36", "tlsPorts[0].hostnames[1]", "host `a b` is not a DNS name"),
        (format!("{RELAYS}tlsPorts:\n  - {{ port: 1, hostnames: [a.test, A.Test], mode: Passthrough, backend: a }}\n"), "5:5", "tlsPorts[0].hostnames", "`a.test` on port 1 is listed twice"),
        (
            format!("{RELAYS}tlsPorts:\n  - {{ port: 1, hostnames: [a.test], mode: Passthrough, backend: a }}\n  - {{ port: 2, hostnames: [a.test], mode: Passthrough, backend: a }}\n  - {{ port: 1, hostnames: [b.test, a.test], mode: Passthrough, backend: b }}\n"),
            "7:5",
            "tlsPorts[2].hostnames",
            "`a.test` on port 1 is already given to tlsPorts[0]: a name goes to one entry",
        ),
        (
            format!("{RELAYS}tlsPorts:\n  - {{ port: 1, mode: Passthrough, backend: a }}\n  - {{ port: 1, mode: Passthrough, backend: b }}\n"),
            "6:5",
            "tlsPorts[1].hostnames",
            "any server name (no `hostnames`) on port 1 is already given to tlsPorts[0]",
        ),
        (
            format!("{RELAYS}tcp:\n  - {{ port: 1, backend: a }}\ntlsPorts:\n  - {{ port: 1, mode: Passthrough, backend: a }}\n"),
            "7:5",
            "tlsPorts[0].port",
            "port 1 is already given to tcp[0]: a TCP port relays its connections as they come (`tcp:`) or by server name (`tlsPorts:`), not both",
        ),
        (
            format!("{RELAYS}tlsPorts:\n  - {{ port: 1, mode: Passthrough, backend: a }}\ntcp:\n  - {{ port: 2, backend: a }}\n  - {{ port: 1, backend: a }}\n"),
            "8:5",
            "tcp[1].port",
            "port 1 is already given to tlsPorts[0]",
        ),
    ];
    for (yaml, at, field, says) in cases {
        let e = parse(&yaml, &dir, "routes.yaml").expect_err(&yaml);
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("routes.yaml:{at}: {field}: ")), "{yaml}\n{shown}");
        assert!(e.message.contains(says), "{yaml}\n{shown}");
    }
    // A UDP port of the same number is another port, and TLS ports share theirs by name.
    let fine = format!("{RELAYS}udp:\n  - {{ port: 1, backend: a }}\ntlsPorts:\n  - {{ port: 1, hostnames: [a.test], mode: Passthrough, backend: a }}\n  - {{ port: 1, hostnames: [\"*.a.test\"], mode: Passthrough, backend: b }}\n");
    parse(&fine, &dir, "routes.yaml").unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// `tcp:` and `udp:` entries are checked the same way: a port is one entry's, and a backend
/// relayed to is plain `endpoints`; a mistake in the second entry names the second entry's line.
#[test]
fn a_tcp_or_udp_port_is_one_entrys() {
    for (yaml, at, field, says) in [
        (format!("{RELAYS}tcp:\n  - {{ port: 1, backend: a }}\n  - {{ port: 1, backend: b }}\n"), "6:5", "tcp[1].port", "port 1 is already given to tcp[0]: a port relays to one entry's backends"),
        (format!("{RELAYS}udp:\n  - {{ port: 1, backend: a }}\n  - {{ port: 1, backend: b }}\n"), "6:5", "udp[1].port", "port 1 is already given to udp[0]"),
        (format!("{RELAYS}tcp:\n  - {{ port: 1, backend: a }}\n  - {{ port: 2, backends: [{{ name: a, weight: 0 }}] }}\n"), "6:5", "tcp[1].backends", "every weight is 0"),
        (format!("{RELAYS}  h: {{ respond: {{ status: 200 }} }}\ntcp:\n  - {{ port: 1, backend: h }}\n"), "6:25", "tcp[0].backend", "backend `h` cannot be relayed to"),
    ] {
        let e = error(&yaml).to_string();
        assert!(e.starts_with(&format!("routes.yaml:{at}: {field}: ")) && e.contains(says), "{yaml}\n{e}");
    }
    let r = parse_str(&format!("{RELAYS}tcp:\n  - {{ port: 1, backend: a }}\nudp:\n  - {{ port: 1, backend: a }}\n"))
        .unwrap();
    assert_eq!((r.tcp.len(), r.udp.len()), (1, 1));
}
