use std::sync::atomic::{AtomicBool, Ordering};

use ramjet_shared::{Backend, CertId, Certificate, PathKind, TableBuilder};

use super::*;

fn test_cert() -> (Vec<u8>, Vec<u8>) {
    let cert = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
    (cert.cert.pem().into_bytes(), cert.signing_key.serialize_pem().into_bytes())
}

/// A generation whose one TLS host uses a certificate with a distinct id (same key material, new id).
fn generation(number: u64, chain: &[u8], key: &[u8]) -> Generation {
    let parsed = crate::certs::parse_certificate(chain, key, "test").unwrap();
    let id = CertId([(number % 251) as u8; 32]);
    let cert = Arc::new(Certificate { id, key: parsed.key.clone(), source: format!("gen{number}"), not_after: None });
    let mut b = TableBuilder::new();
    let backend = Arc::new(Backend::respond("b", 0, 200, format!("{number}")));
    b.add_route("a.test", "/", PathKind::Prefix, backend, "t").unwrap();
    b.add_tls_host("a.test", id);
    Generation::new(number, b.build(None), vec![cert], vec![])
}

fn applier(published: &Arc<Published>, size: usize) -> Applier {
    Applier::new(published.clone(), size, AuditTrail::default(), Arc::default())
}

#[test]
fn no_loadable_table_names_a_certificate_the_store_lacks() {
    let published = Arc::new(Published::new());
    let applier = applier(&published, 10);
    let (chain, key) = test_cert();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let published = published.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut checks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // A worker's order: the table, then the store.
                    let generation = published.generation().load();
                    let store = published.certs().load();
                    for id in generation.table.cert_ids() {
                        assert!(
                            store.contains(&id),
                            "generation {} names {id:?} missing from the store",
                            generation.number
                        );
                    }
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for n in 1..=3000 {
        applier.apply(generation(n, &chain, &key));
    }
    stop.store(true, Ordering::Relaxed);
    let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(checks > 0);
    assert_eq!(published.current().number, 3000);
}

#[test]
fn pin_holds_back_new_generations_and_release_jumps_to_the_newest() {
    let published = Arc::new(Published::new());
    let applier = applier(&published, 10);
    let (chain, key) = test_cert();
    for n in 1..=3 {
        applier.apply(generation(n, &chain, &key));
    }
    let pin = applier.rollback(2).unwrap();
    assert_eq!((pin.serving, pin.pinned), (2, Some(2)));
    assert_eq!(published.current().number, 2);
    applier.apply(generation(4, &chain, &key));
    applier.apply(generation(5, &chain, &key));
    assert_eq!(published.current().number, 2, "nothing reaches the data plane while pinned");
    let (_, _, entries) = applier.snapshot();
    let held: Vec<(u64, bool)> = entries.iter().map(|(e, _)| (e.generation.number, e.published)).collect();
    assert_eq!(held[..2], [(5, false), (4, false)]);
    let (released, pin) = applier.release();
    assert!(released);
    assert_eq!((pin.serving, pin.pinned), (5, None));
    assert_eq!(published.current().number, 5);
    let (released, _) = applier.release();
    assert!(!released, "release is idempotent");
    assert_eq!(applier.rollback(99), Err(RollbackError::NotInHistory { wanted: 99, available: vec![5, 4, 3, 2, 1] }));
}

#[test]
fn certificates_of_forgotten_generations_are_dropped_after_the_grace_period() {
    let published = Arc::new(Published::new());
    let applier = applier(&published, 2);
    let (chain, key) = test_cert();
    for n in 1..=4 {
        applier.apply(generation(n, &chain, &key));
    }
    // Generations 1 and 2 left the ring; their certificates wait out the grace period.
    assert_eq!(published.certs().load().len(), 4);
    {
        let mut state = applier.lock();
        for since in state.unreferenced.values_mut() {
            *since -= CERT_GRACE;
        }
    }
    applier.prune();
    let store = published.certs().load();
    assert_eq!(store.len(), 2);
    assert!(store.contains(&CertId([3; 32])) && store.contains(&CertId([4; 32])));
}

/// Records every audit record's diff.
#[derive(Default)]
struct Diffs(Mutex<Vec<(Reason, crate::audit::diff::TableDiff)>>);

impl crate::audit::EventSink for Diffs {
    fn record(&self, record: &AuditRecord) {
        self.0.lock().unwrap().push((record.reason, record.diff.clone()));
    }
}

/// A pin across several generations compares only the host groups that changed at some step
/// between them, and says exactly what the whole diff says; so does its release, and so does a pin
/// to a generation that left the ring (the whole diff, then).
#[test]
fn a_pin_and_its_release_carry_the_whole_diff_across_several_generations() {
    let published = Arc::new(Published::new());
    let diffs = Arc::new(Diffs::default());
    let audit = AuditTrail { sinks: vec![diffs.clone()], ..AuditTrail::default() };
    let applier = Applier::new(published.clone(), 4, audit, Arc::default());
    let table = |changed: &[(&str, &str)]| {
        let mut b = TableBuilder::new();
        for host in ["a.test", "b.test", "c.test", "d.test"] {
            let body = changed.iter().find(|(h, _)| *h == host).map_or("same", |(_, body)| *body);
            let backend = Arc::new(Backend::respond(&format!("{host}-{body}"), 0, 200, body.to_string()));
            b.add_route(host, "/", PathKind::Prefix, backend, "t").unwrap();
        }
        b.build(None)
    };
    let steps: [&[(&str, &str)]; 5] = [
        &[],
        &[("a.test", "one")],
        &[("a.test", "one"), ("b.test", "two")],
        &[("a.test", "three"), ("b.test", "two")],
        &[("a.test", "three"), ("b.test", "two"), ("c.test", "four")],
    ];
    let whole = |from: usize, to: usize| diff_tables(&table(steps[from]), &table(steps[to]));
    for (n, step) in steps.iter().enumerate() {
        applier.apply(Generation::new(n as u64 + 1, table(step), vec![], vec![]));
    }
    let last = |reason: Reason| {
        let recorded = diffs.0.lock().unwrap();
        let (r, d) = recorded.last().unwrap().clone();
        assert_eq!(r, reason);
        d
    };
    // The ring holds generations 2..=5 (of 1..=5).
    applier.rollback(2).unwrap();
    assert_eq!(last(Reason::ConfigPinned), whole(4, 1));
    assert!(applier.release().0);
    assert_eq!(last(Reason::ConfigResumed), whole(1, 4));
    applier.rollback(4).unwrap();
    assert_eq!(last(Reason::ConfigPinned), whole(4, 3));
    assert_eq!(
        applier.rollback(1).unwrap_err(),
        RollbackError::NotInHistory { wanted: 1, available: vec![5, 4, 3, 2] }
    );
    applier.rollback(3).unwrap();
    assert_eq!(last(Reason::ConfigPinned), whole(3, 2));
}

/// A Gateway `edge` that admits routes from every namespace, one Service `web`, and one HTTPRoute
/// `shop/web` at `metadata.generation` `generation` routing `path` to it.
fn gateway_objects(generation: i64, path: &str) -> crate::compile::snapshot::ClusterSnapshot {
    let yaml = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{ name: ramjet }}
spec: {{ controllerName: ramjet.dev/gateway-controller }}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{ name: edge, namespace: infra }}
spec:
  gatewayClassName: ramjet
  listeners: [{{ name: http, port: 80, protocol: HTTP, allowedRoutes: {{ namespaces: {{ from: All }} }} }}]
---
apiVersion: v1
kind: Service
metadata: {{ name: web, namespace: shop }}
spec: {{ ports: [{{ name: http, port: 80 }}] }}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: web, namespace: shop, generation: {generation} }}
spec:
  parentRefs: [{{ name: edge, namespace: infra }}]
  hostnames: [shop.test]
  rules: [{{ matches: [{{ path: {{ type: PathPrefix, value: "{path}" }} }}], backendRefs: [{{ name: web, port: 80 }}] }}]
"#
    );
    let mut snapshot = crate::compile::snapshot::ClusterSnapshot::default();
    crate::manifests::parse(&yaml, "test.yaml", &mut snapshot);
    assert!(snapshot.diagnostics.is_empty(), "{:?}", snapshot.diagnostics);
    snapshot
}

/// Compiles `snapshot` as the rebuild loop does: the generation with its compile's status report,
/// or `None` when the table is the one compiled last.
fn compile_objects(
    compiler: &mut crate::compile::Compiler,
    snapshot: &crate::compile::snapshot::ClusterSnapshot,
) -> (Option<Generation>, crate::compile::status::Report) {
    let mut draft = crate::compile::cluster::compile(snapshot, compiler);
    let report = std::mem::take(&mut draft.gateway_status);
    (compiler.finish(draft), report)
}

/// The generation of `shop/web` that the served status report describes, with the served table's
/// number; checks that the report is the one compiled with the table on the wire.
fn served_route(applier: &Applier, published: &Published) -> (u64, Option<i64>) {
    let served = applier.served().borrow().clone().expect("a generation is served");
    assert!(Arc::ptr_eq(&served.generation, &published.current()), "the report is the served table's");
    let route = served.gateway_status.routes.iter().find(|r| r.name == "web").expect("shop/web in the report");
    (served.generation.number, route.generation)
}

/// Status is written from the served generation's own compile: a change compiled while a pin holds
/// generation A on the wire (generation B, a route at `metadata.generation` 2) does not reach the
/// report the status writer reads until B is published; the same table compiled again from newer
/// objects (`metadata.generation` 3, same routes) renews the report of the generation it is.
#[test]
fn the_status_report_is_the_served_generations() {
    let published = Arc::new(Published::new());
    let applier = applier(&published, 10);
    let mut served = applier.served();
    assert!(served.borrow_and_update().is_none(), "nothing to write before the first publish");
    let mut compiler = crate::compile::Compiler::new();
    let (a, report_a) = compile_objects(&mut compiler, &gateway_objects(1, "/"));
    let a = Arc::new(a.expect("generation A"));
    applier.apply(Compiled { generation: a.clone(), gateway_status: Arc::new(report_a) });
    assert!(served.has_changed().unwrap());
    assert_eq!(served_route(&applier, &published), (1, Some(1)));

    applier.rollback(1).unwrap();
    served.mark_unchanged();
    // B arrives between A's compile and the status write: compiled and applied, held back by the pin.
    let (b, report_b) = compile_objects(&mut compiler, &gateway_objects(2, "/shop"));
    let b = Arc::new(b.expect("generation B: another table"));
    applier.apply(Compiled { generation: b.clone(), gateway_status: Arc::new(report_b) });
    assert_eq!(published.current().number, 1);
    assert!(!served.has_changed().unwrap(), "the status writer is not woken for a table not served");
    assert_eq!(served_route(&applier, &published), (1, Some(1)), "status still says what A serves");

    // The release publishes B, and status follows it.
    assert!(applier.release().0);
    assert!(served.has_changed().unwrap());
    assert_eq!(served_route(&applier, &published), (2, Some(2)));

    // The same objects at a new metadata.generation: the same table, so no new generation; the
    // rebuild loop offers B again with the new report, and the served report is renewed.
    let (none, report_c) = compile_objects(&mut compiler, &gateway_objects(3, "/shop"));
    assert!(none.is_none(), "the same table is no new generation");
    applier.apply(Compiled { generation: b.clone(), gateway_status: Arc::new(report_c) });
    assert_eq!(served_route(&applier, &published), (2, Some(3)));
    let (_, _, entries) = applier.snapshot();
    assert_eq!(entries.len(), 2, "a renewed report is no new entry in the ring");
    // A rollback to A brings A's own report back with it.
    applier.rollback(1).unwrap();
    assert_eq!(served_route(&applier, &published), (1, Some(1)));
}

/// Each diagnostic is logged when it appears or changes, not again with every generation.
#[test]
fn diagnostics_are_logged_when_they_appear_change_or_go() {
    use ramjet_shared::{ObjectRef, Severity};
    let diag =
        |name: &str, message: &str| Diagnostic::new(ObjectRef::ingress("shop", name), Severity::Warning, message);
    let mut first = vec![diag("a", "no such Service"), diag("b", "bad annotation")];
    first.sort();
    let mut second = vec![diag("a", "no such Service"), diag("b", "another bad annotation"), diag("c", "new")];
    second.sort();
    let (appeared, gone) = diagnostic_changes(&[], &first);
    assert_eq!((appeared.len(), gone.len()), (2, 0));
    let (appeared, gone) = diagnostic_changes(&first, &first);
    assert!(appeared.is_empty() && gone.is_empty(), "the same diagnostics again are not logged again");
    let (appeared, gone) = diagnostic_changes(&first, &second);
    let messages = |list: &[&Diagnostic]| list.iter().map(|d| d.message.clone()).collect::<Vec<_>>();
    assert_eq!(messages(&appeared), ["another bad annotation", "new"]);
    assert_eq!(messages(&gone), ["bad annotation"]);
}
