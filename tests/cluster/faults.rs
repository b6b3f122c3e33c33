//! Faults, on a control plane of their own (these stop the API server): starting before it, and
//! outliving its outages.

use super::*;

/// How long the API server stays down under load (RAMJET_OUTAGE_SECS; 30 s by default).
fn outage() -> Duration {
    Duration::from_secs(std::env::var("RAMJET_OUTAGE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30))
}

#[test]
fn survives_the_api_server_starting_late_and_going_away() {
    let plane = ControlPlane::prepare("faults");
    plane.start_etcd();
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let dir = support::temp_dir("cluster-faults");
    let (http, https, admin) = (
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
    );
    // The API server is not up yet, so no ServiceAccount token can be had: ramjet runs with a static
    // token (user `ramjet`, whose reads the audit log records too).
    let kubeconfig = dir.join("ramjet.kubeconfig");
    plane.write_kubeconfig(&kubeconfig, control_plane::RAMJET_TOKEN, "default");
    let args: Vec<String> = vec![
        format!("--http-addr={http}"),
        format!("--https-addr={https}"),
        format!("--admin-addr={admin}"),
        "--io-driver=auto".into(),
        "--workers=1".into(),
        "--ingress-class=faults".into(),
        "--controller-name=ramjet.dev/faults".into(),
        format!("--publish-address={LB_IP}"),
        format!("--kubeconfig={}", kubeconfig.display()),
    ];
    let mut ramjet = spawn_ramjet(&dir, "faults", "default", &args, http, https, admin);

    // Started before the API server: /readyz answers 503, and the log says why.
    assert!(
        eventually(PATIENCE, || ramjet.readyz() == Some(503)),
        "/readyz never answered 503 while the API server was down: {:?}; log:\n{}",
        ramjet.readyz(),
        ramjet.log()
    );
    let down_since = Instant::now();
    while down_since.elapsed() < Duration::from_secs(3) {
        assert_eq!(ramjet.readyz(), Some(503));
        std::thread::sleep(Duration::from_millis(100));
    }
    ramjet.assert_running();
    let log = ramjet.full_log();
    assert!(
        log.contains(&plane.url.replace("https://", "")) || log.to_lowercase().contains("connect"),
        "the log does not say why ramjet is not ready:\n{log}"
    );

    plane.start_apiserver();
    let up = Instant::now();
    let admin_api = Kube::new(&plane.admin_kubeconfig);
    admin_api.apply("apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: faults }\nspec: { controller: ramjet.dev/faults }\n");
    admin_api.apply("apiVersion: v1\nkind: Namespace\nmetadata: { name: shop }\n");
    admin_api.apply(&Service::new("shop", "web").target_port(8080).service_yaml());
    admin_api.apply(&slice_yaml("shop", "web-1", "web", &[&a]));
    admin_api.apply(&ingress_yaml("shop", "faults", "web", "web.test", "web", None));
    ramjet.wait_ready();
    ramjet.wait_served("web.test", "a");
    eprintln!("started before the API server: ready and serving {:.1?} after it came up", up.elapsed());
    // No Event is lost on a brand-new cluster. Events about our (cluster-scoped) IngressClass go to
    // the `default` namespace, which the API server's bootstrap controller creates only after the
    // server answers: the first publish's Event used to be refused with 404 `namespaces "default"
    // not found` and dropped. Every generation published so far has its ConfigApplied Event.
    let published: Vec<u64> = ramjet.generations()["generations"]
        .as_array()
        .map(|g| g.iter().filter(|g| g["published"] == true).filter_map(|g| g["generation"].as_u64()).collect())
        .unwrap_or_default();
    assert!(published.contains(&1), "generation 1 was not published: {}", ramjet.generations());
    let applied_notes = || -> Vec<String> {
        admin_api
            .list("Event", Some("default"))
            .into_iter()
            .filter(|e| e["reason"] == "ConfigApplied" && e["regarding"]["name"] == "faults")
            .filter_map(|e| e["note"].as_str().map(String::from))
            .collect()
    };
    assert!(
        eventually(PATIENCE, || {
            let notes = applied_notes();
            published.iter().all(|g| notes.iter().any(|n| n.contains(&format!("→{g})"))))
        }),
        "a ConfigApplied Event is missing for generations {published:?}: {:?}; log:\n{}",
        applied_notes(),
        ramjet.full_log()
    );
    if ramjet.full_log().contains("namespace does not exist yet") {
        eprintln!("the first Event met the `default` namespace missing, and waited for it");
    }

    // Under load, the API server goes away: every request is still served by the last generation.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let outage = outage();
    let slice_lists = || {
        plane
            .audit_entries()
            .iter()
            .filter(|e| e["user"]["username"] == "ramjet" && e["verb"] == "list" && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["resource"] == "endpointslices")
            .count()
    };
    let lists_before = slice_lists();
    let (served, failed) = std::thread::scope(|s| {
        let load = s.spawn(|| {
            let (mut ok, mut failed) = (0u64, Vec::new());
            let mut conn = support::client::Conn::open(http);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                conn.send(b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n");
                match conn.read_response_to(false) {
                    Some(r) if r.status == 200 => ok += 1,
                    Some(r) => failed.push(r.status.to_string()),
                    None => {
                        failed.push("connection closed".into());
                        conn = support::client::Conn::open(http);
                    }
                }
            }
            (ok, failed)
        });
        // Whatever happens below (a failed assertion too), the load stops, or the scope never ends.
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(1));
        plane.stop_apiserver();
        let stopped = Instant::now();
        while stopped.elapsed() < outage {
            assert_eq!(ramjet.readyz(), Some(200), "not ready while the API server is away");
            std::thread::sleep(Duration::from_millis(500));
        }
        // While it is away, etcd forgets its history: ramjet's watches cannot resume (410 Gone) and
        // must list again.
        plane.compact_etcd();
        plane.start_apiserver();
        // A change made once the API server is back reaches traffic after ramjet reconnects.
        // The watches come back through their backoff (capped at 5 s): a resumed watch gets 410
        // Gone, waits once more and lists again. With kube-rs' default cap of 30 s this took 40-60 s.
        let admin_api = Kube::new(&plane.admin_kubeconfig);
        admin_api.apply(&slice_yaml("shop", "web-1", "web", &[&b]));
        let changed = Instant::now();
        assert!(
            eventually(PATIENCE, || ramjet.served("web.test") == "b"),
            "a change made after the API server came back never reached traffic; log:\n{}",
            ramjet.log()
        );
        eprintln!("after the outage: a change reached traffic {:.1?} after it was written", changed.elapsed());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.join().unwrap()
    });
    assert!(
        failed.is_empty(),
        "{} requests failed while the API server was away: {:?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    assert!(slice_lists() > lists_before, "no relist after the history was compacted away");
    // And it keeps watching afterwards: the relist left no gap.
    Kube::new(&plane.admin_kubeconfig).apply(&slice_yaml("shop", "web-1", "web", &[&a]));
    ramjet.wait_served("web.test", "a");
    eprintln!("API server away for {outage:?} under load: {served} requests served, none failed");

    // A wedged API server (its process stopped, connections open, every request hanging): the
    // election gives a hanging Lease request up after a third of the lease (5 s) and tries again,
    // so the leader renews once the server answers, without stepping down (it has 10 s).
    let lease_renewals = || {
        plane
            .audit_entries()
            .iter()
            .filter(|e| e["user"]["username"] == "ramjet" && e["verb"] == "update" && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["resource"] == "leases" && e["objectRef"]["name"] == "ramjet-leader")
            .count()
    };
    let renewals = lease_renewals();
    let log_before = ramjet.full_log().len();
    plane.freeze_apiserver(Duration::from_secs(7));
    assert!(
        eventually(PATIENCE, || lease_renewals() > renewals),
        "no Lease renewal after the API server came back; log:\n{}",
        ramjet.log()
    );
    let log = ramjet.full_log().split_off(log_before);
    assert!(
        log.contains("did not answer a Lease request in time"),
        "the hanging Lease request was not given up; log:\n{log}"
    );
    assert!(!log.contains("stepping down"), "the leader stepped down over a 7 s freeze; log:\n{log}");
    Kube::new(&plane.admin_kubeconfig).apply(&slice_yaml("shop", "web-1", "web", &[&b]));
    ramjet.wait_served("web.test", "b");
    ramjet.assert_running();
}
