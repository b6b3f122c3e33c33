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
