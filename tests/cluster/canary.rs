//! Canary auto-promotion, decided by the Lease holder and kept in `ramjet.dev/canary-state`.

use super::*;

/// `web` (primary) and `web-v2` (canary) for shop.test; the canary Ingress auto-promotes with
/// these `ramjet.dev/canary-*` settings and carries the user's own annotation `team: shop`.
fn auto_canary(install: &Install, web: &Backend, v2: &Backend, settings: &[(&str, &str)]) {
    install.service("web", &[web]);
    install.service("web-v2", &[v2]);
    install.ingress("web", "shop.test", "web");
    install.admin.apply(&auto_canary_yaml(install, settings, &[]));
}

fn auto_canary_yaml(install: &Install, settings: &[(&str, &str)], extra: &[(&str, &str)]) -> String {
    let mut annotations = vec![
        "team: shop".to_string(),
        "nginx.ingress.kubernetes.io/canary: \"true\"".to_string(),
        "ramjet.dev/canary-auto-promote: \"true\"".to_string(),
    ];
    annotations.extend(settings.iter().map(|(k, v)| format!("ramjet.dev/canary-{k}: \"{v}\"")));
    annotations.extend(extra.iter().map(|(k, v)| format!("{k}: '{v}'")));
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web-canary\n  namespace: {}\n  \
         annotations: {{ {} }}\nspec:\n  ingressClassName: {}\n  rules: [{{ host: shop.test, http: {{ paths: \
         [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: web-v2, port: {{ name: http }} }} }} }}] }} }}]\n",
        install.ns,
        annotations.join(", "),
        install.class
    )
}

fn state_weight(install: &Install) -> Option<u64> {
    canary_state(install).and_then(|s| s["weight"].as_u64())
}

fn phase(install: &Install) -> String {
    canary_state(install).and_then(|s| s["phase"].as_str().map(String::from)).unwrap_or_default()
}

/// Requests to shop.test through `addr`, every few milliseconds, until dropped: what answered.
struct Traffic {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Traffic {
    fn start(addr: SocketAddr) -> Traffic {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stopping, record) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                // One connection per request: a restarting ramjet only costs a few failures.
                let answer = match http(addr, "shop.test", "/") {
                    Some((status, body)) => format!("{status} {}", body.trim()),
                    None => "down".to_string(),
                };
                record.lock().unwrap().push(answer);
                std::thread::sleep(Duration::from_millis(8));
            }
        });
        Traffic { stop, seen }
    }

    /// Waits until 20 answers in a row are `want`.
    fn wait_all(&self, want: &str) {
        self.take();
        let mut last = Vec::new();
        let ok = eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(300));
            last = self.take();
            last.len() >= 20 && last.iter().all(|s| s == want)
        });
        assert!(ok, "never all `{want}`; the last answers: {last:?}");
    }

    /// Answers since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A healthy canary steps 25 → 50 → 75 and is promoted (every request by weight to it); a restart
/// in the middle resumes from the annotation instead of starting over; the user's own annotation
/// and a later apply of the canary by the user leave ramjet's state alone, and its writes leave
/// theirs alone.
#[test]
fn a_healthy_canary_promotes_itself_and_a_restart_resumes() {
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("promote");
    let settings =
        [("step-weight", "25"), ("max-weight", "75"), ("interval", "2s"), ("min-requests", "5"), ("max-p99", "5s")];
    auto_canary(&install, &web, &v2, &settings);
    let webhook = Webhook::start();
    let extra = [format!("--audit-webhook={}", webhook.url), "--access-log-errors-only".to_string()];
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut ramjet = install.ramjet_with("promote", &install.kubeconfig, &extra);
    ramjet.wait_ready();
    let traffic = Traffic::start(ramjet.http);
    assert!(
        eventually(PATIENCE, || state_weight(&install) == Some(50)),
        "never stepped to 50: {:?}; log:\n{}",
        canary_state(&install),
        ramjet.log()
    );
    // The user re-applies the canary (their field manager, without ramjet's annotation): the state
    // stays, and ramjet's writes never took the user's annotation.
    install.admin.apply(&auto_canary_yaml(&install, &settings, &[]));
    let ingress = install.ingress_value("web-canary");
    assert_eq!(ingress["metadata"]["annotations"]["team"], "shop");
    assert_eq!(state_weight(&install), Some(50), "{ingress:#}");
    let managers = annotations_owned_by_ramjet(&ingress);
    assert_eq!(managers, ["f:ramjet.dev/canary-state"], "ramjet owns exactly its annotation: {ingress:#}");

    // Restart: a new process resumes at 50, never back to 25, and does not start over.
    drop(ramjet);
    let mut ramjet = install.ramjet_with("promote", &install.kubeconfig, &extra);
    ramjet.wait_ready();
    drop(traffic);
    let traffic = Traffic::start(ramjet.http);
    let mut weights = Vec::new();
    let promoted = eventually(PATIENCE, || {
        let w = state_weight(&install);
        if weights.last() != Some(&w) {
            weights.push(w);
        }
        phase(&install) == "Promoted"
    });
    assert!(promoted, "never promoted: {weights:?}; log:\n{}", ramjet.log());
    assert!(!weights.contains(&Some(25)), "started over after the restart: {weights:?}");
    assert_eq!(
        install.events("CanaryStarted", "web-canary").len(),
        1,
        "{:#?}",
        install.events("CanaryStarted", "web-canary")
    );
    let stepped = install.events("CanaryStepped", "web-canary");
    assert!(stepped.len() >= 2, "{stepped:#?}");
    let note = stepped[0]["note"].as_str().unwrap();
    assert!(note.contains("requests, success rate 100.00%, p99"), "{note}");
    let promoted = install.events("CanaryPromoted", "web-canary");
    assert_eq!(promoted.len(), 1, "{promoted:#?}");
    assert!(promoted[0]["note"].as_str().unwrap().contains("Make the primary Ingress's backend match the canary"));
    // Promoted: every request goes to the canary.
    traffic.wait_all("200 backend=web-v2");
    // The same decisions went to the audit webhook (and the `audit` log target beside it).
    let reasons = webhook.canary_reasons();
    assert!(
        ["CanaryStarted", "CanaryStepped", "CanaryPromoted"].iter().all(|r| reasons.iter().any(|x| x == r)),
        "{reasons:?}"
    );
    ramjet.assert_running();
}

/// A canary whose backend answers 500 fails its checks and is aborted to weight 0 after the
/// threshold; the primary gets everything again.
#[test]
fn a_failing_canary_aborts_to_zero() {
    let (web, v2) = (Backend::start("web"), Backend::answering("web-v2", 500));
    let install = Install::new("abort");
    let settings = [("step-weight", "50"), ("interval", "1s"), ("min-requests", "3"), ("failure-threshold", "2")];
    auto_canary(&install, &web, &v2, &settings);
    let mut ramjet = install.ramjet("abort");
    ramjet.wait_ready();
    let traffic = Traffic::start(ramjet.http);
    assert!(
        eventually(PATIENCE, || phase(&install) == "Aborted"),
        "never aborted: {:?}; log:\n{}",
        canary_state(&install),
        ramjet.log()
    );
    assert_eq!(state_weight(&install), Some(0));
    let failed = install.events("CanaryCheckFailed", "web-canary");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["type"], "Warning");
    assert!(failed[0]["note"].as_str().unwrap().contains("success rate 0.00% is below 99%"), "{failed:#?}");
    let aborted = install.events("CanaryAborted", "web-canary");
    assert_eq!(aborted.len(), 1, "{aborted:#?}");
    assert!(aborted[0]["note"].as_str().unwrap().contains("aborted to weight 0 after 2 failed checks"));
    traffic.wait_all("200 backend=web");
    // Deleting the annotation (`kubectl annotate ... ramjet.dev/canary-state-`) starts over.
    let api: kube::Api<k8s_openapi::api::networking::v1::Ingress> =
        kube::Api::namespaced(install.admin.client.clone(), &install.ns);
    let unset = json!({ "metadata": { "annotations": { "ramjet.dev/canary-state": null } } });
    let params = kube::api::PatchParams::default();
    install.admin.block_on(api.patch("web-canary", &params, &kube::api::Patch::Merge(&unset))).unwrap();
    assert!(
        eventually(PATIENCE, || install.events("CanaryStarted", "web-canary").len() == 2),
        "deleting the state did not start over: {:?}",
        canary_state(&install)
    );
    ramjet.assert_running();
}

/// A rollback pin pauses promotion entirely: no step and no write while it holds (one CanaryPaused
/// Event); after the release it goes on.
#[test]
fn a_pin_pauses_promotion() {
    let plane = ControlPlane::shared();
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("pause");
    let settings =
        [("step-weight", "10"), ("max-weight", "90"), ("interval", "1s"), ("min-requests", "1"), ("max-p99", "5s")];
    auto_canary(&install, &web, &v2, &settings);
    let mut ramjet = install.ramjet("pause");
    ramjet.wait_ready();
    let _traffic = Traffic::start(ramjet.http);
    assert!(eventually(PATIENCE, || state_weight(&install) >= Some(20)), "never stepped; log:\n{}", ramjet.log());
    let serving = ramjet.generations()["serving"].as_u64().unwrap();
    let (status, body) =
        ramjet.admin_request("POST", "/admin/rollback", &format!("{{\"generation\": {serving}}}")).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(eventually(PATIENCE, || install.events("CanaryPaused", "web-canary").len() == 1));
    let held = canary_state(&install);
    let since = audit_len(plane);
    // Several intervals with traffic flowing: nothing moves, nothing is written.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(canary_state(&install), held, "the state moved under a pin");
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w == "patch ingresses").collect();
    assert!(writes.is_empty(), "ramjet wrote the canary while pinned: {writes:?}");
    assert_eq!(install.events("CanaryPaused", "web-canary").len(), 1);
    let (status, body) = ramjet.admin_request("DELETE", "/admin/rollback", "").unwrap();
    assert_eq!(status, 200, "{body}");
    let before = held.as_ref().and_then(|s| s["weight"].as_u64());
    assert!(eventually(PATIENCE, || state_weight(&install) > before), "never went on after the release");
}

/// Another writer that keeps changing ramjet's annotation (a GitOps tool re-applying an old copy):
/// ramjet puts it right twice, then stops promoting that canary with a Warning Event, and writes
/// it no more.
#[test]
fn a_reverting_writer_makes_ramjet_stop() {
    let plane = ControlPlane::shared();
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("revert");
    let settings = [("step-weight", "20"), ("interval", "1h")];
    auto_canary(&install, &web, &v2, &settings);
    let mut ramjet = install.ramjet("revert");
    ramjet.wait_ready();
    assert!(eventually(PATIENCE, || state_weight(&install) == Some(20)), "never started; log:\n{}", ramjet.log());
    let old = format!(
        r#"{{"phase":"Progressing","weight":5,"step":1,"failures":0,"last":"started","at":"2026-01-01T00:00:00Z","backend":"{}/web-v2:80"}}"#,
        install.ns
    );
    let foreign = auto_canary_yaml(&install, &settings, &[("ramjet.dev/canary-state", &old)]);
    let mut changes = 0;
    while install.events("CanaryHalted", "web-canary").is_empty() {
        assert!(changes < 3, "still not halted after {changes} changes; log:\n{}", ramjet.log());
        install.admin.try_apply_as(&foreign, "gitops").unwrap();
        changes += 1;
        // ramjet puts its value back, or halts.
        assert!(eventually(PATIENCE, || state_weight(&install) == Some(20)
            || !install.events("CanaryHalted", "web-canary").is_empty()));
    }
    assert_eq!(changes, 3);
    let halted = install.events("CanaryHalted", "web-canary");
    assert_eq!(halted[0]["type"], "Warning");
    assert!(halted[0]["note"].as_str().unwrap().contains("changed 3 times by another writer"), "{halted:#?}");
    // It never fights again: the other writer's value stays, unwritten by ramjet.
    let since = audit_len(plane);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(state_weight(&install), Some(5));
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w == "patch ingresses").collect();
    assert!(writes.is_empty(), "{writes:?}");
    ramjet.assert_running();
}

/// Two replicas: only the Lease holder decides (one CanaryStarted, from it), and the follower
/// serves the weight it wrote, read back through its own watch.
#[test]
fn two_replicas_serve_the_weight_the_leader_wrote() {
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("weights");
    auto_canary(&install, &web, &v2, &[("step-weight", "100"), ("max-weight", "100"), ("interval", "1h")]);
    let mut one = install.ramjet("one");
    one.wait_ready();
    assert!(eventually(PATIENCE, || install.lease_holder().as_deref() == Some("one")));
    let mut two = install.ramjet("two");
    two.wait_ready();
    assert!(eventually(PATIENCE, || state_weight(&install) == Some(100)), "log:\n{}", one.log());
    // Weight 100 of 100: every request by weight goes to the canary on both.
    one.wait_served("shop.test", "web-v2");
    two.wait_served("shop.test", "web-v2");
    let started = install.events("CanaryStarted", "web-canary");
    assert_eq!(started.len(), 1, "{started:#?}");
    assert_eq!(started[0]["reportingInstance"], "one");
}

/// The leader judges a canary on the whole fleet's traffic (`--peers`, as the chart passes its
/// fleet Service): with every request going to the other replica, the leader still sees a healthy
/// canary and promotes it, and its Events count two replicas — the leader's own answer among the
/// peers' is recognised and not counted twice. Without the peers' figures the leader would see no
/// request at all and abort the canary.
#[test]
fn the_leader_promotes_a_canary_on_the_traffic_of_the_other_replicas() {
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("peers");
    let settings = [
        ("step-weight", "50"),
        ("max-weight", "100"),
        ("interval", "2s"),
        ("min-requests", "5"),
        ("max-p99", "5s"),
        ("failure-threshold", "2"),
    ];
    auto_canary(&install, &web, &v2, &settings);
    let free_admin = || -> SocketAddr { format!("127.0.0.1:{}", free_port()).parse().unwrap() };
    let (one_admin, two_admin) = (free_admin(), free_admin());
    // Both replicas' admin listeners, the leader's own included, as a headless Service resolves.
    let peers = format!("--peers=localhost:{},localhost:{}", one_admin.port(), two_admin.port());
    let mut one = install.ramjet_at("one", &install.kubeconfig, &[&peers], one_admin);
    one.wait_ready();
    assert!(eventually(PATIENCE, || install.lease_holder().as_deref() == Some("one")));
    let mut two = install.ramjet_at("two", &install.kubeconfig, &[&peers], two_admin);
    two.wait_ready();
    let _traffic = Traffic::start(two.http);
    let promoted = eventually(PATIENCE, || phase(&install) == "Promoted" || phase(&install) == "Aborted");
    assert!(promoted && phase(&install) == "Promoted", "{:?}; log:\n{}", canary_state(&install), one.log());
    let stepped = install.events("CanaryStepped", "web-canary");
    assert!(!stepped.is_empty(), "{stepped:#?}");
    for event in &stepped {
        assert_eq!(event["reportingInstance"], "one", "{event:#}");
        let note = event["note"].as_str().unwrap();
        assert!(note.contains("(over 2 replicas)"), "{note}");
    }
    two.wait_served("shop.test", "web-v2");
    one.assert_running();
    two.assert_running();
}
