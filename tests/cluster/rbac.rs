//! The chart's RBAC is enough, and no more than needed: each rule taken away breaks something.

use super::*;

/// Everything a working install shows; [`what_fails`] names the ones that never happened.
const WORKS: &[&str] = &[
    "ready and serving",
    "Ingress change followed",
    "Service change followed",
    "EndpointSlice change followed",
    "Ingress status written",
    "ConfigApplied Event",
    "Lease held",
    "Lease renewed",
    "Lease watched",
    "Canary state written",
];

/// The objects [`what_fails`] expects before ramjet starts: `web.test` served by `a`; `svc.test`
/// naming a port its Service does not have yet; `eps.test` whose EndpointSlice has no endpoint yet;
/// an auto-promoting canary of `web.test` (on `web-v2`, also served by `a`).
fn rbac_objects(install: &Install, a: &Backend) {
    let ns = &install.ns;
    install.service("web", &[a]);
    install.ingress("web", "web.test", "web");
    install.service("web-v2", &[a]);
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web-canary\n  namespace: {ns}\n  \
         annotations: {{ nginx.ingress.kubernetes.io/canary: \"true\", ramjet.dev/canary-auto-promote: \"true\", \
         ramjet.dev/canary-interval: 1h }}\nspec:\n  ingressClassName: {}\n  rules: [{{ host: web.test, http: {{ paths: \
         [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: web-v2, port: {{ name: http }} }} }} }}] }} }}]\n",
        install.class
    ));
    install.admin.apply(&Service::new(ns, "svc").port("other", 80).target_port(8080).service_yaml());
    install.slice("svc-1", "svc", &[a]);
    install.ingress("svc", "svc.test", "svc");
    install.service("eps", &[]);
    install.ingress("eps", "eps.test", "eps");
}

/// What a working install shows within the deadline; each entry names what never happened. Once
/// ramjet serves, one change of each watched kind is made, and each must reach traffic.
fn what_fails(install: &Install, a: &Backend, ramjet: &mut Ramjet, deadline: Instant) -> BTreeSet<&'static str> {
    let mut missing: BTreeSet<&'static str> = WORKS.iter().copied().collect();
    let mut changed = false;
    let plane = ControlPlane::shared();
    while !missing.is_empty() && Instant::now() < deadline {
        ramjet.assert_running();
        if missing.contains("ready and serving") && ramjet.readyz() == Some(200) && ramjet.served("web.test") == "a" {
            missing.remove("ready and serving");
        }
        if !missing.contains("ready and serving") && !changed {
            install.ingress("new", "new.test", "web");
            install.service("svc", &[a]);
            install.slice("eps-1", "eps", &[a]);
            changed = true;
        }
        if changed {
            for (what, host) in [
                ("Ingress change followed", "new.test"),
                ("Service change followed", "svc.test"),
                ("EndpointSlice change followed", "eps.test"),
            ] {
                if missing.contains(what) && ramjet.served(host) == "a" {
                    missing.remove(what);
                }
            }
        }
        if missing.contains("Ingress status written") && install.status_ips("web") == [LB_IP] {
            missing.remove("Ingress status written");
        }
        if missing.contains("Canary state written") && canary_state(install).is_some() {
            missing.remove("Canary state written");
        }
        if missing.contains("ConfigApplied Event") && !install.events("ConfigApplied", &install.class).is_empty() {
            missing.remove("ConfigApplied Event");
        }
        let lease = install.admin.get("Lease", Some(&install.ns), &install.election);
        let spec = lease.as_ref().map(|l| l["spec"].clone()).unwrap_or_default();
        if spec["holderIdentity"] == ramjet.identity.as_str() {
            missing.remove("Lease held");
            if spec["renewTime"] != spec["acquireTime"] {
                missing.remove("Lease renewed");
            }
        }
        if missing.contains("Lease watched")
            && plane.audit_entries().iter().any(|e| {
                e["user"]["username"] == install.user().as_str()
                    && e["verb"] == "watch"
                    && e["objectRef"]["resource"] == "leases"
                    && e["responseStatus"]["code"] == 200
            })
        {
            missing.remove("Lease watched");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    missing
}

/// Exactly what must stop working when `verb` is taken out of this rule of the rendered chart
/// (everything else keeps working). A grant the test does not know fails the test: every verb the
/// chart grants needs a reason here.
fn needed_for(kind: &str, rule: &Value, verb: &str) -> BTreeSet<&'static str> {
    let resources: Vec<&str> = rule["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    let named = rule["resourceNames"].is_array();
    let set = match (kind, resources.as_slice(), verb) {
        ("ClusterRole", ["ingresses/status"], "patch") => vec!["Ingress status written"],
        ("ClusterRole", ["ingresses"], "patch") => vec!["Canary state written"],
        // Missing Event permission is skipped (logged at debug): nothing else changes.
        ("ClusterRole", ["events"], "create") => vec!["ConfigApplied Event"],
        // Without a first list nothing is compiled, published or written; the election still runs.
        ("ClusterRole", _, "list") => WORKS.iter().copied().filter(|w| !w.starts_with("Lease")).collect(),
        // Without the watch, the first list is served, and no change after it.
        ("ClusterRole", ["ingresses", "ingressclasses"], "watch") => vec!["Ingress change followed"],
        // ConfigMaps share the rule (custom-headers, BackendTLSPolicies' CAs): the Services decide.
        ("ClusterRole", ["services", "secrets", "configmaps"], "watch") => vec!["Service change followed"],
        ("ClusterRole", ["endpointslices"], "watch") => vec!["EndpointSlice change followed"],
        // Not elected: no status, no canary decisions; everything else works.
        ("Role", ["leases"], "create") if !named => {
            vec!["Lease held", "Lease renewed", "Ingress status written", "Canary state written"]
        }
        ("Role", ["leases"], "get") if named => {
            vec!["Lease held", "Lease renewed", "Ingress status written", "Canary state written"]
        }
        // Created and led for a while, never renewed (it steps down after two thirds of the lease).
        ("Role", ["leases"], "update") if named => vec!["Lease renewed"],
        // The election still works by reading the Lease every round; a takeover waits for it.
        ("Role", ["leases"], "list" | "watch") if named => vec!["Lease watched"],
        _ => panic!("the chart grants what no test knows the need of: {kind} {verb} in {rule}"),
    };
    set.into_iter().collect()
}

/// The rendered chart with `verb` taken out of rule `index` of the `kind` document (the whole rule
/// when it was its only verb).
fn without(mut docs: Vec<Value>, kind: &str, index: usize, verb: &str) -> Vec<Value> {
    let doc = docs.iter_mut().find(|d| d["kind"] == kind).unwrap();
    let rules = doc["rules"].as_array_mut().unwrap();
    let verbs = rules[index]["verbs"].as_array_mut().unwrap();
    verbs.retain(|v| v != verb);
    if verbs.is_empty() {
        rules.remove(index);
    }
    docs
}

#[test]
fn chart_rbac_is_enough_and_every_rule_is_needed() {
    let plane = ControlPlane::shared();
    let a = Backend::start("a");
    let base = "rbac";
    let docs = Install::render(base);
    let rules_of = |kind: &str| -> Vec<Value> {
        docs.iter().find(|d| d["kind"] == kind).unwrap()["rules"].as_array().unwrap().clone()
    };
    // Every variant: the chart as rendered (None), or with one verb of one rule taken out.
    type Variant = Option<(&'static str, usize, String)>;
    let mut variants: Vec<Variant> = vec![None];
    for kind in ["ClusterRole", "Role"] {
        for (i, rule) in rules_of(kind).iter().enumerate() {
            for verb in rule["verbs"].as_array().unwrap() {
                variants.push(Some((kind, i, verb.as_str().unwrap().to_string())));
            }
        }
    }
    let started = Instant::now();
    type Outcome<'a> = (&'a Variant, BTreeSet<&'static str>, String, BTreeSet<String>);
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = variants
            .iter()
            .enumerate()
            .map(|(n, variant)| {
                let a = &a;
                s.spawn(move || {
                    let name = if variant.is_none() { base.to_string() } else { format!("{base}-{n}") };
                    let mut docs = Install::render(&name);
                    if let Some((kind, i, verb)) = variant {
                        docs = without(docs, kind, *i, verb);
                    }
                    let install = Install::apply(&name, docs);
                    rbac_objects(&install, a);
                    let mut ramjet = install.ramjet("rbac");
                    // The full chart gets everything well within this; a missing grant never does.
                    let missing = what_fails(&install, a, &mut ramjet, Instant::now() + PATIENCE);
                    if variant.is_none() {
                        // Long enough for every kind of request to happen at least once.
                        std::thread::sleep(Duration::from_secs(3));
                    }
                    (variant, missing, ramjet.log(), requests_by(plane, &install.user()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut report = Vec::new();
    for (variant, missing, log, used) in &results {
        match variant {
            None => {
                assert!(missing.is_empty(), "with the chart's RBAC, never: {missing:?}; log:\n{log}");
                // No more than needed, verb by verb: every verb the chart grants is one ramjet used
                // (the audit log records all its requests).
                let mut granted = BTreeSet::new();
                for kind in ["ClusterRole", "Role"] {
                    for rule in rules_of(kind) {
                        for resource in rule["resources"].as_array().unwrap() {
                            for verb in rule["verbs"].as_array().unwrap() {
                                granted.insert(format!("{} {}", verb.as_str().unwrap(), resource.as_str().unwrap()));
                            }
                        }
                    }
                }
                eprintln!("chart RBAC: ramjet used {used:?}");
                let unused: Vec<&String> = granted.difference(used).collect();
                assert!(unused.is_empty(), "the chart grants what ramjet never uses: {unused:?} (used: {used:?})");
                let ungranted: Vec<&String> = used.difference(&granted).collect();
                assert!(ungranted.is_empty(), "ramjet used what the chart does not grant: {ungranted:?}");
            }
            Some((kind, i, verb)) => {
                let rule = &rules_of(kind)[*i];
                let expected = needed_for(kind, rule, verb);
                report.push(format!("{kind} {verb} {} removed: {missing:?}", rule["resources"]));
                assert_eq!(
                    missing, &expected,
                    "taking {verb} out of {kind} rule {rule} should break exactly {expected:?}, but what failed was {missing:?}; log:\n{log}"
                );
            }
        }
    }
    eprintln!("chart RBAC ({} variants in {:.1?}):\n  {}", results.len(), started.elapsed(), report.join("\n  "));
}
