//! Status is a fixed point (written once, kept when another writer sets its own), and Events pass
//! the real API server's validation.

use super::*;

/// How long the idle window watches the audit log: the issue's 60 s (RAMJET_IDLE_WINDOW_SECS
/// shortens it while working on the test).
fn idle_window() -> Duration {
    let secs = std::env::var("RAMJET_IDLE_WINDOW_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    Duration::from_secs(secs)
}

#[test]
fn status_is_a_fixed_point() {
    let plane = ControlPlane::shared();
    let a = Backend::start("a");
    let install = Install::new("fixed");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    install.ingress("shop", "shop.test", "web");
    let mut ramjet = install.ramjet("fixed");
    ramjet.wait_ready();
    assert!(
        eventually(PATIENCE, || install.status_ips("web") == [LB_IP] && install.status_ips("shop") == [LB_IP]),
        "status never written; log:\n{}",
        ramjet.log()
    );

    // Status follows the --publish-service Service's address (the chart's Service).
    let published = flag(&install.args, "--publish-service").expect("the chart passes --publish-service");
    let (_, service) = published.split_once('/').unwrap();
    for ip in ["203.0.113.11", LB_IP] {
        install
            .admin
            .apply_status(
                "Service",
                &ns,
                service,
                "test-cloud",
                json!({ "loadBalancer": { "ingress": [{ "ip": ip }] } }),
            )
            .unwrap();
        assert!(
            eventually(PATIENCE, || install.status_ips("web") == [ip] && install.status_ips("shop") == [ip]),
            "status did not follow the Service's address to {ip}"
        );
    }

    // Field manager `ramjet` owns status.loadBalancer and nothing else.
    let ingress = install.ingress_value("web");
    let managers = ingress["metadata"]["managedFields"].as_array().unwrap();
    let ours: Vec<&Value> = managers.iter().filter(|m| m["manager"] == "ramjet").collect();
    assert_eq!(ours.len(), 1, "{managers:#?}");
    assert_eq!(ours[0]["operation"], "Apply", "{managers:#?}");
    assert_eq!(ours[0]["subresource"], "status", "{managers:#?}");
    let fields = &ours[0]["fieldsV1"];
    assert_eq!(fields.as_object().unwrap().keys().collect::<Vec<_>>(), ["f:status"], "{fields}");
    assert_eq!(fields["f:status"].as_object().unwrap().keys().collect::<Vec<_>>(), ["f:loadBalancer"], "{fields}");

    // Re-applying the same manifests changes no resourceVersion, and ramjet writes nothing back.
    let versions = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .map(|n| install.ingress_value(n)["metadata"]["resourceVersion"].as_str().unwrap().to_string())
            .collect()
    };
    let before = versions(&["web", "shop"]);
    let generation_before = ramjet.generations();
    install.ingress("web", "web.test", "web");
    install.ingress("shop", "shop.test", "web");
    install.service("web", &[&a]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(versions(&["web", "shop"]), before, "re-applying the same manifests changed an Ingress");

    // The idle window: no write by ramjet but its Lease renewals.
    let since = audit_len(plane);
    std::thread::sleep(idle_window());
    let writes = writes_by(plane, &install.user(), since);
    let others: Vec<&String> = writes.iter().filter(|w| *w != "update leases").collect();
    assert!(others.is_empty(), "ramjet wrote while idle: {others:?}");
    assert!(writes.iter().any(|w| w == "update leases"), "no Lease renewal in the idle window: {writes:?}");
    assert_eq!(versions(&["web", "shop"]), before, "an Ingress changed while idle");
    let generation_after = ramjet.generations();
    assert_eq!(
        generation_before.to_string().len(),
        generation_after.to_string().len(),
        "a generation was published while idle:\n{generation_before}\n{generation_after}"
    );
    eprintln!("idle window {:?}: writes by ramjet: {} Lease renewals, nothing else", idle_window(), writes.len());

    // Another writer that keeps reverting the address: ramjet stops and says so with a warning Event.
    let mut reverted = 0;
    let stopped = eventually(PATIENCE, || {
        if install.status_ips("shop") == [LB_IP] {
            install.apply_status_as_other("shop");
            reverted += 1;
        }
        !install.events("StatusReverted", "shop").is_empty()
    });
    assert!(stopped, "ramjet kept fighting over status ({reverted} reverts) and said nothing; log:\n{}", ramjet.log());
    let event = &install.events("StatusReverted", "shop")[0];
    assert_eq!(event["type"], "Warning", "{event:#}");
    assert_eq!(event["regarding"]["kind"], "Ingress", "{event:#}");
    assert_eq!(event["regarding"]["namespace"], ns.as_str(), "{event:#}");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(note.contains("ramjet stops writing it"), "the Event does not say ramjet stopped: {note}");
    // Once stopped, it stays stopped: no more status writes, and the other writer's value stays.
    let since = audit_len(plane);
    std::thread::sleep(Duration::from_secs(5));
    let writes = writes_by(plane, &install.user(), since);
    assert!(!writes.iter().any(|w| w == "patch ingresses/status"), "ramjet still writes status: {writes:?}");
    assert_eq!(install.status_ips("shop"), ["198.51.100.1"]);
    assert_eq!(install.events("StatusReverted", "shop").len(), 1, "more than one StatusReverted Event");
    eprintln!("a writer reverting status: ramjet stopped after {reverted} reverts, with one warning Event");

    // An Ingress that stops being ours loses the address ramjet wrote.
    install.admin.apply(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: elsewhere }\nspec: { controller: example.com/other }\n",
    );
    install.admin.apply(&ingress_yaml(&ns, "elsewhere", "web", "web.test", "web", None));
    assert!(
        eventually(PATIENCE, || install.status_ips("web").is_empty()),
        "the address stayed on an Ingress of another class: {:?}",
        install.status_ips("web")
    );
    // Back in our class it gets the address again; when our IngressClass is deleted, it loses it.
    install.ingress("web", "web.test", "web");
    assert!(eventually(PATIENCE, || install.status_ips("web") == [LB_IP]));

    // An Ingress that names no class is ours while our IngressClass is the cluster's default; when
    // the default moves to another controller's class, the Ingress moves with it and loses the
    // address. (Created while no class is the default, so the API server's DefaultIngressClass
    // admission leaves its class unset.)
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: unnamed, namespace: {ns} }}\n\
         spec:\n  rules: [{{ host: unnamed.test, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ service: {{ name: web, port: {{ name: http }} }} }} }}] }} }}]\n"
    ));
    let class_yaml = |name: &str, controller: &str, default: bool| {
        let annotation = if default { "\"ingressclass.kubernetes.io/is-default-class\": \"true\"" } else { "" };
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
             metadata: {{ name: {name}, annotations: {{ {annotation} }} }}\nspec: {{ controller: {controller} }}\n"
        )
    };
    let ours = format!("ramjet.dev/{}", install.name);
    install.admin.apply(&class_yaml(&install.class, &ours, true));
    assert!(
        eventually(PATIENCE, || install.status_ips("unnamed") == [LB_IP]),
        "an Ingress of the default class (ours) got no address; log:\n{}",
        ramjet.log()
    );
    install.admin.apply(&class_yaml(&install.class, &ours, false));
    install.admin.apply(&class_yaml("elsewhere", "example.com/other", true));
    let moved = eventually(PATIENCE, || install.status_ips("unnamed").is_empty());
    // The cluster has no default class again, whatever happened.
    install.admin.apply(&class_yaml("elsewhere", "example.com/other", false));
    assert!(
        moved,
        "the address stayed on an Ingress that moved to another controller: {:?}",
        install.status_ips("unnamed")
    );
    install.admin.delete("IngressClass", None, &install.class);
    assert!(
        eventually(PATIENCE, || install.status_ips("web").is_empty()),
        "the address stayed after our IngressClass was deleted: {:?}",
        install.status_ips("web")
    );
    // What another writer set is not ramjet's to remove.
    assert_eq!(install.status_ips("shop"), ["198.51.100.1"]);
    ramjet.assert_running();
}

impl Install {
    /// Another field manager sets the Ingress's address to its own value.
    fn apply_status_as_other(&self, name: &str) {
        self.admin
            .apply_status(
                "Ingress",
                &self.ns,
                name,
                "someone-else",
                json!({ "loadBalancer": { "ingress": [{ "ip": "198.51.100.1" }] } }),
            )
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Events pass the real validation.
// ---------------------------------------------------------------------------------------------

#[test]
fn events_pass_the_real_validation() {
    let a = Backend::start("a");
    let install = Install::new("events");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    // A DNS server that never answers (a UDP socket nobody reads), so that an ExternalName Service
    // does not resolve here, whatever the machine's DNS does.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dns = format!("--dns-server={}", silent.local_addr().unwrap());
    let kubeconfig = install.kubeconfig.clone();
    let mut ramjet = install.ramjet_with("events", &kubeconfig, &[&dns]);
    ramjet.wait_ready();
    assert!(
        eventually(PATIENCE, || install.events("ConfigApplied", &install.class).len() == 1),
        "no ConfigApplied Event; log:\n{}",
        ramjet.log()
    );
    let event = &install.events("ConfigApplied", &install.class)[0];
    assert_eq!(event["regarding"]["kind"], "IngressClass", "{event:#}");
    assert_eq!(event["type"], "Normal", "{event:#}");
    for field in ["reportingController", "reportingInstance", "action", "eventTime", "note"] {
        assert!(event[field].is_string() && event[field] != "", "{field} missing: {event:#}");
    }

    // One Event per publish: a change makes exactly one more.
    install.ingress("shop", "shop.test", "web");
    ramjet.wait_served("shop.test", "a");
    assert!(eventually(PATIENCE, || install.events("ConfigApplied", &install.class).len() == 2));

    // A pin and its release: ConfigPinned and ConfigResumed on the IngressClass, one each.
    let (status, body) = ramjet.admin_request("POST", "/admin/rollback", r#"{"generation": 1}"#).unwrap();
    assert_eq!(status, 200, "{body}");
    ramjet.wait_served("shop.test", "404");
    let (status, body) = ramjet.admin_request("DELETE", "/admin/rollback", "").unwrap();
    assert_eq!(status, 200, "{body}");
    ramjet.wait_served("shop.test", "a");
    for reason in ["ConfigPinned", "ConfigResumed"] {
        assert!(
            eventually(PATIENCE, || install.events(reason, &install.class).len() == 1),
            "{reason}: {:#?}",
            install.events(reason, &install.class)
        );
    }

    // Bad Ingresses: a missing TLS Secret and an unknown Service port get a warning Event each.
    install.admin.apply(&ingress_yaml(&ns, &install.class, "no-secret", "tls.test", "web", Some("missing")));
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: bad-port, namespace: {ns} }}\n\
         spec:\n  ingressClassName: {}\n  rules: [{{ host: port.test, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ service: {{ name: web, port: {{ name: nope }} }} }} }}] }} }}]\n",
        install.class
    ));
    let warnings = |name: &str| -> Vec<Value> {
        install
            .admin
            .list("Event", Some(&ns))
            .into_iter()
            .filter(|e| e["regarding"]["name"] == name && e["type"] == "Warning")
            .collect()
    };
    // What ramjet cannot serve is said plainly: an ExternalName Service, a resource backend.
    install.admin.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: ext, namespace: {ns} }}\n\
         spec: {{ type: ExternalName, externalName: example.com, ports: [{{ name: http, port: 80 }}] }}\n"
    ));
    install.admin.apply(&ingress_yaml(&ns, &install.class, "external-name", "ext.test", "ext", None));
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: resource-backend, namespace: {ns} }}\n\
         spec:\n  ingressClassName: {}\n  rules: [{{ host: res.test, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ resource: {{ apiGroup: k8s.example.com, kind: StorageBucket, name: static }} }} }}] }} }}]\n",
        install.class
    ));
    for (name, says) in [
        ("no-secret", "missing"),
        ("bad-port", "nope"),
        // An ExternalName Service is resolved (by a DNS server that never answers: it does not
        // resolve, and says so).
        ("external-name", "externalName example.com does not resolve"),
        ("resource-backend", "resource backends (StorageBucket static) are not supported"),
    ] {
        // The Event that says it (an ExternalName's first one says it is being resolved).
        let saying = || warnings(name).into_iter().find(|e| e["note"].as_str().is_some_and(|n| n.contains(says)));
        assert!(
            eventually(PATIENCE, || saying().is_some()),
            "no warning Event on {name} saying \"{says}\": {:#?}\nlog:\n{}",
            warnings(name),
            ramjet.log()
        );
        let event = saying().unwrap();
        assert_eq!(event["regarding"]["kind"], "Ingress", "{event:#}");
        assert!(event["note"].as_str().unwrap().len() <= 1024, "{event:#}");
    }
    // The rest of the cluster still serves.
    ramjet.wait_served("web.test", "a");

    // Idle: no more Events (about this install's objects: other tests run beside this one).
    let ours = || {
        let events = install.admin.list("Event", None);
        events
            .iter()
            .filter(|e| {
                e["regarding"]["namespace"] == install.ns.as_str() || e["regarding"]["name"] == install.class.as_str()
            })
            .count()
    };
    let count = ours();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(ours(), count, "Events written while idle");
    ramjet.assert_running();
}
