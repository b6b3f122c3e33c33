//! Two replicas, one writer: the Lease decides who writes, and a takeover when the holder dies.

use super::*;

#[test]
fn two_replicas_one_writer_and_takeover() {
    let plane = ControlPlane::shared();
    let a = Backend::start("a");
    let install = Install::new("replicas");
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut one = install.ramjet("one");
    let mut two = install.ramjet("two");
    one.wait_ready();
    two.wait_ready();
    one.wait_served("web.test", "a");
    two.wait_served("web.test", "a");
    assert!(eventually(PATIENCE, || install.status_ips("web") == [LB_IP]));
    let leader = install.lease_holder().expect("a Lease holder");
    let (mut leader_proc, mut follower) = if leader == "one" { (one, two) } else { (two, one) };

    // Exactly one replica writes status.
    install.ingress("shop", "shop.test", "web");
    assert!(eventually(PATIENCE, || install.status_ips("shop") == [LB_IP]));
    let status_writes = plane
        .audit_entries()
        .iter()
        .filter(|e| e["objectRef"]["subresource"] == "status" && e["objectRef"]["namespace"] == install.ns.as_str())
        .filter(|e| e["objectRef"]["resource"] == "ingresses" && e["objectRef"]["name"] == "shop")
        .filter(|e| e["stage"] == "ResponseComplete" && e["user"]["username"] == install.user().as_str())
        .count();
    assert_eq!(status_writes, 1, "the new Ingress's status was written {status_writes} times by two replicas");
    // What each replica says about itself on /metrics.
    let leads = |r: &Ramjet| {
        let (_, text) = http(r.admin, "localhost", "/metrics").expect("metrics");
        text.lines().find_map(|l| l.strip_prefix("ramjet_leader ")).map(str::to_string)
    };
    assert_eq!(leads(&leader_proc).as_deref(), Some("1"));
    assert_eq!(leads(&follower).as_deref(), Some("0"));

    // SIGKILL the leader: the other takes over within the lease duration (15 s) of the leader's last
    // renewal and writes status. The follower watches the Lease, so it sees that renewal within the
    // watch's latency, and tries to take over the moment it expires (not at its next 2 s round):
    // the bound is the lease duration plus the slack of a watch event and one get and update on a
    // loaded machine, which the test takes as 1.5 s. Polling alone allowed 15 s + 2 × 2 s.
    const LEASE: Duration = Duration::from_secs(15);
    const SLACK: Duration = Duration::from_millis(1500);
    let killed = Instant::now();
    leader_proc.signal(libc::SIGKILL);
    assert!(leader_proc.wait_exit(Duration::from_secs(10)));
    let last_renewal = install.admin.get("Lease", Some(&install.ns), &install.election).unwrap();
    assert_eq!(last_renewal["spec"]["holderIdentity"], leader.as_str(), "{last_renewal:#}");
    assert!(
        eventually(Duration::from_secs(30), || install.lease_holder().as_deref() == Some(follower.identity.as_str())),
        "no takeover; log:\n{}",
        follower.log()
    );
    let takeover = killed.elapsed();
    let taken = install.admin.get("Lease", Some(&install.ns), &install.election).unwrap();
    // Both times are this machine's clock: the leader's renewTime, the new holder's acquireTime.
    let time = |lease: &Value, field: &str| -> k8s_openapi::jiff::Timestamp {
        lease["spec"][field].as_str().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{field}: {lease:#}"))
    };
    let after_renewal = Duration::try_from(time(&taken, "acquireTime") - time(&last_renewal, "renewTime")).unwrap();
    install.ingress("late", "late.test", "web");
    assert!(
        eventually(PATIENCE, || install.status_ips("late") == [LB_IP]),
        "the new leader writes no status; its log:\n{}",
        follower.log()
    );
    eprintln!(
        "leader SIGKILL → takeover {takeover:.1?} after the kill, {after_renewal:.1?} after its last renewal (lease {LEASE:?})"
    );
    assert!(after_renewal >= LEASE, "taken over {after_renewal:?} after the last renewal: before the lease expired");
    assert!(after_renewal <= LEASE + SLACK, "taken over {after_renewal:?} after the last renewal");
    assert!(takeover <= LEASE + SLACK, "takeover took {takeover:?} after the kill");

    // SIGTERM releases at once: a third replica takes over well before the lease would expire. It
    // sees the release on its watch and takes over within about 130 ms here; the bound leaves room
    // for one Lease request that hangs on a loaded machine (the election gives it up after a third
    // of the lease), and is still half the 15 s a Lease that was not released would take.
    const RELEASED: Duration = Duration::from_millis(7500);
    let mut three = install.ramjet("three");
    three.wait_ready();
    let stopped = Instant::now();
    follower.signal(libc::SIGTERM);
    assert!(
        eventually(Duration::from_secs(30), || install.lease_holder().as_deref() == Some("three")),
        "no takeover after SIGTERM; log:\n{}",
        three.log()
    );
    let released = stopped.elapsed();
    assert!(
        released < RELEASED,
        "takeover after SIGTERM took {released:?}; the stopped leader's log:\n{}\nthree's log:\n{}\nthe Lease requests:\n{}",
        follower.log(),
        three.full_log(),
        lease_requests(plane, &install)
    );
    eprintln!("leader SIGTERM → takeover {released:.1?}");
    assert!(follower.wait_exit(PATIENCE));
}

/// The API server's record of every request on the install's Lease: when, which verb, the answer.
fn lease_requests(plane: &ControlPlane, install: &Install) -> String {
    let entries = plane.audit_entries();
    let lines = entries
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "leases" && e["objectRef"]["namespace"] == install.ns.as_str())
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| {
            format!(
                "{} {} {} {}",
                e["requestReceivedTimestamp"].as_str().unwrap_or("?"),
                e["verb"].as_str().unwrap_or("?"),
                e["responseStatus"]["code"],
                e["userAgent"].as_str().unwrap_or("?"),
            )
        });
    lines.collect::<Vec<_>>().join("\n")
}

/// `--audit-events leader`: of two replicas, only the Lease holder writes the Events of what it
/// publishes (a large DaemonSet would write one per pod per change); both still serve every change.
#[test]
fn audit_events_from_the_leader_only() {
    let a = Backend::start("a");
    let install = Install::new("audit-leader");
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let kubeconfig = install.kubeconfig.clone();
    let mut one = install.ramjet_with("one", &kubeconfig, &["--audit-events=leader"]);
    let mut two = install.ramjet_with("two", &kubeconfig, &["--audit-events=leader"]);
    one.wait_ready();
    two.wait_ready();
    assert!(eventually(PATIENCE, || install.lease_holder().is_some()));
    // A change after the election: both replicas publish it.
    install.ingress("shop", "shop.test", "web");
    one.wait_served("shop.test", "a");
    two.wait_served("shop.test", "a");
    let leader = install.lease_holder().unwrap();
    let writers = || -> std::collections::BTreeSet<String> {
        install
            .events("ConfigApplied", &install.class)
            .iter()
            .filter_map(|e| e["reportingInstance"].as_str().map(String::from))
            .collect()
    };
    assert!(eventually(PATIENCE, || writers().contains(&leader)), "the leader wrote no ConfigApplied Event");
    // Give a follower's Event the time to arrive, were it written.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(writers(), std::collections::BTreeSet::from([leader.clone()]), "only the leader writes");
}
