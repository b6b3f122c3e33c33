//! It follows the cluster: Ingress, Service and EndpointSlice changes reach traffic, canaries and
//! mirrors from annotations, and how long an API write takes to be served.

use super::*;

#[test]
fn follows_the_cluster_through_the_api_server() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let install = Install::new("follow");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut ramjet = install.ramjet("follow");
    ramjet.wait_ready();
    ramjet.wait_served("web.test", "a");

    // EndpointSlice changed: the new endpoint serves.
    install.slice("web-1", "web", &[&b]);
    ramjet.wait_served("web.test", "b");
    // A second EndpointSlice of the same Service adds its endpoints; deleting it takes them away.
    install.slice("web-2", "web", &[&a]);
    assert!(eventually(PATIENCE, || {
        let seen: BTreeSet<String> = (0..8).map(|_| ramjet.served("web.test")).collect();
        seen == BTreeSet::from(["a".to_string(), "b".to_string()])
    }));
    install.admin.delete("EndpointSlice", Some(&ns), "web-2");
    assert!(eventually(PATIENCE, || (0..8).all(|_| ramjet.served("web.test") == "b")));

    // Ingress changed: the new host serves, the old one no longer does.
    install.ingress("web", "shop.test", "web");
    ramjet.wait_served("shop.test", "b");
    ramjet.wait_served("web.test", "404");

    // Service changed: a port that the Ingress names no longer exists → 503 for the route.
    install.admin.apply(&Service::new(&ns, "web").port("other", 80).target_port(8080).service_yaml());
    assert!(eventually(PATIENCE, || ramjet.served("shop.test") != "b"), "a Service port removed still serves");
    install.service("web", &[&b]);
    ramjet.wait_served("shop.test", "b");

    // TLS Secret created, rotated and deleted.
    let (ca1, ca2) = (TestCa::new("one"), TestCa::new("two"));
    install.admin.apply(&ca1.secret(&ns, "shop-tls", "shop.test"));
    install.admin.apply(&ingress_yaml(&ns, &install.class, "web", "shop.test", "web", Some("shop-tls")));
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "shop.test", &ca1.pem, &install.dir) == "200"),
        "HTTPS never served with the Secret's certificate: {}",
        https_status(&ramjet, "shop.test", &ca1.pem, &install.dir)
    );
    install.admin.apply(&ca2.secret(&ns, "shop-tls", "shop.test"));
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "shop.test", &ca2.pem, &install.dir) == "200"),
        "the rotated certificate never served"
    );
    assert_ne!(https_status(&ramjet, "shop.test", &ca1.pem, &install.dir), "200", "the old certificate still serves");
    install.admin.delete("Secret", Some(&ns), "shop-tls");
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "shop.test", &ca2.pem, &install.dir) != "200"),
        "a deleted Secret's certificate still serves"
    );

    // Ingress deleted, then the IngressClass: nothing of ours is served.
    install.ingress("web", "shop.test", "web");
    ramjet.wait_served("shop.test", "b");
    install.admin.delete("Ingress", Some(&ns), "web");
    ramjet.wait_served("shop.test", "404");
    install.ingress("web", "shop.test", "web");
    ramjet.wait_served("shop.test", "b");
    install.admin.delete("IngressClass", None, &install.class);
    ramjet.wait_served("shop.test", "404");
    ramjet.assert_running();
}

/// A canary Ingress with ingress-nginx's annotations and a mirror annotation on the primary, written
/// through the API server: the header decides, the weight follows an edit, the mirror gets copies,
/// and the generation's audit record counts the mirror.
#[test]
fn canaries_and_mirrors_through_the_api_server() {
    let (web, v2, shadow) = (Backend::start("web"), Backend::start("web-v2"), Backend::start("shadow"));
    let install = Install::new("canary");
    let (ns, class) = (install.ns.clone(), install.class.clone());
    install.service("web", &[&web]);
    install.service("web-v2", &[&v2]);
    install.service("shadow", &[&shadow]);
    let ingress = |name: &str, service: &str, annotations: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
             annotations: {{ {annotations} }}\nspec:\n  ingressClassName: {class}\n  rules: [{{ host: shop.test, http: \
             {{ paths: [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: {service}, port: {{ name: http }} }} }} }}] }} }}]\n"
        )
    };
    install.admin.apply(&ingress("web", "web", "ramjet.dev/mirror-backend: \"shadow:http\""));
    let canary = |weight: u32| {
        ingress(
            "web-canary",
            "web-v2",
            &format!(
                "nginx.ingress.kubernetes.io/canary: \"true\", nginx.ingress.kubernetes.io/canary-by-header: X-Canary, \
                 nginx.ingress.kubernetes.io/canary-weight: \"{weight}\""
            ),
        )
    };
    install.admin.apply(&canary(0));
    let mut ramjet = install.ramjet("canary");
    ramjet.wait_ready();
    ramjet.wait_served("shop.test", "web");
    let with_header = |value: &str| {
        let mut conn = support::client::Conn::open(ramjet.http);
        served_by(&conn.get_with("shop.test", "/", &format!("X-Canary: {value}\r\n")))
    };
    assert!(eventually(PATIENCE, || with_header("always") == "web-v2"), "the canary header never reached web-v2");
    assert_eq!(with_header("never"), "web");
    assert!(eventually(PATIENCE, || shadow.requests() > 0), "the mirror never got a copy");
    // Weight 100: everything but `never` goes to the canary.
    install.admin.apply(&canary(100));
    ramjet.wait_served("shop.test", "web-v2");
    assert_eq!(with_header("never"), "web");
    let generations = ramjet.generations();
    let counted = generations["generations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|g| g["changes"]["mirrors_added"].as_u64() == Some(1));
    assert!(counted, "no generation counts the mirror added: {generations}");
    ramjet.assert_running();
}

/// The time from an API write being answered to the first request the new generation serves,
/// over 100 EndpointSlice changes (alternating between two backends).
#[test]
fn api_write_to_first_served_latency() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let install = Install::new("latency");
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut ramjet = install.ramjet("latency");
    ramjet.wait_ready();
    ramjet.wait_served("web.test", "a");
    let mut conn = support::client::Conn::open(ramjet.http);
    let mut samples = Vec::new();
    for i in 0..100 {
        let (to, name) = if i % 2 == 0 { (&b, "b") } else { (&a, "a") };
        let yaml = slice_yaml(&install.ns, "web-1", "web", &[to]);
        install.admin.apply(&yaml);
        let written = Instant::now();
        loop {
            let response = conn.get("web.test", "/");
            if served_by(&response) == name {
                break;
            }
            assert!(written.elapsed() < PATIENCE, "change {i} never reached traffic; log:\n{}", ramjet.log());
        }
        samples.push(written.elapsed());
    }
    samples.sort();
    let (p50, p99, max) = (percentile(&samples, 0.50), percentile(&samples, 0.99), samples[samples.len() - 1]);
    eprintln!("API write → first request served by the new generation, 100 changes: p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}");
    assert!(p99 < Duration::from_secs(5), "p99 {p99:?}");
}

/// `--default-ssl-certificate NAMESPACE/NAME` through the real API server: a name no Ingress has
/// a certificate for gets the Secret's, and a renewed Secret is served without a restart.
#[test]
fn the_default_ssl_certificate_follows_its_secret() {
    let a = Backend::start("a");
    let install = Install::new("default-ssl");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let (ca1, ca2) = (TestCa::new("one"), TestCa::new("two"));
    install.admin.apply(&ca1.secret(&ns, "fallback-tls", "any.test"));
    let flag = format!("--default-ssl-certificate={ns}/fallback-tls");
    let kubeconfig = install.kubeconfig.clone();
    let mut ramjet = install.ramjet_with("one", &kubeconfig, &[&flag]);
    ramjet.wait_ready();
    // No route for any.test: the handshake verifies against the Secret's CA, then a 404.
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "any.test", &ca1.pem, &install.dir) == "404"),
        "the Secret's certificate is not served: {}",
        https_status(&ramjet, "any.test", &ca1.pem, &install.dir)
    );
    install.admin.apply(&ca2.secret(&ns, "fallback-tls", "any.test"));
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "any.test", &ca2.pem, &install.dir) == "404"),
        "the renewed Secret is not served"
    );
    assert_ne!(https_status(&ramjet, "any.test", &ca1.pem, &install.dir), "404", "the old certificate still serves");
}
