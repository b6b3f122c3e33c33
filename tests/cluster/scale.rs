//! Scale, on a control plane of its own (thousands of objects would slow every other test's lists).

use super::*;

/// How many Ingresses (each with its Service and EndpointSlice): RAMJET_SCALE_INGRESSES, 5,000 by default.
fn scale() -> usize {
    std::env::var("RAMJET_SCALE_INGRESSES").ok().and_then(|s| s.parse().ok()).unwrap_or(5_000)
}

#[test]
fn scale_thousands_of_ingresses() {
    let n = scale();
    let plane = ControlPlane::start("scale");
    let install = Install::apply_on(&plane, "scale", Install::render("scale"));
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let ns = install.ns.clone();
    let class = install.class.clone();
    let writing = Instant::now();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (plane, a, ns, class) = (&plane, &a, &ns, &class);
            s.spawn(move || {
                let kube = Kube::new(&plane.admin_kubeconfig);
                for i in (t..n).step_by(4) {
                    let name = format!("web-{i}");
                    kube.apply(&Service::new(ns, &name).target_port(8080).service_yaml());
                    kube.apply(&slice_yaml(ns, &format!("{name}-1"), &name, &[a]));
                    kube.apply(&ingress_yaml(ns, class, &name, &format!("{name}.test"), &name, None));
                }
            });
        }
    });
    eprintln!("scale: wrote {n} Ingresses, Services and EndpointSlices in {:.1?}", writing.elapsed());

    let since = audit_len(&plane);
    let started = Instant::now();
    let mut ramjet = install.ramjet("scale");
    ramjet.wait_ready_within(Duration::from_secs(300));
    let ready = started.elapsed();
    ramjet.wait_served("web-0.test", "a");
    ramjet.wait_served(&format!("web-{}.test", n - 1), "a");
    let rss_kb: u64 = std::fs::read_to_string(format!("/proc/{}/status", ramjet.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0);
    let requests: Vec<String> = plane.audit_entries()[since..]
        .iter()
        .filter(|e| e["user"]["username"] == install.user().as_str() && e["stage"] == "ResponseComplete")
        .filter(|e| e["objectRef"]["resource"] != "leases" && e["objectRef"]["resource"] != "events")
        .filter(|e| e["verb"] == "list" || e["verb"] == "watch" || e["verb"] == "get")
        .map(|e| {
            format!("{} {}", e["verb"].as_str().unwrap_or("?"), e["objectRef"]["resource"].as_str().unwrap_or("?"))
        })
        .collect();

    // All status written (one write per Ingress), and how long that takes.
    let status_writes = || {
        plane.audit_entries()[since..]
            .iter()
            .filter(|e| e["user"]["username"] == install.user().as_str() && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["subresource"] == "status" && e["objectRef"]["resource"] == "ingresses")
            .count()
    };
    assert!(
        eventually(Duration::from_secs(600), || status_writes() >= n),
        "status written for {} of {n} Ingresses; log:\n{}",
        status_writes(),
        ramjet.log()
    );
    let all_status = started.elapsed();

    // One change reaches traffic.
    let mut conn = support::client::Conn::open(ramjet.http);
    install.admin.apply(&slice_yaml(&ns, "web-7-1", "web-7", &[&b]));
    let written = Instant::now();
    while served_by(&conn.get("web-7.test", "/")) != "b" {
        assert!(written.elapsed() < PATIENCE, "the change never reached traffic");
    }
    let change = written.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(status_writes(), n, "status written more than once per Ingress");
    eprintln!(
        "scale: {n} Ingresses: ready {ready:.1?} after start, RSS {:.1} MB, {} read requests until then {:?}, \
         status on all {n} after {all_status:.1?}, one EndpointSlice change → traffic {change:.1?}",
        rss_kb as f64 / 1024.0,
        requests.len(),
        requests,
    );
}
