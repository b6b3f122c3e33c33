//! Publish latency: the pointer store alone; compile + diff + publish at 10, 1,000, 10,000 and
//! 100,000 routes; a pin and its release (rollback to the previous generation and back) at the same
//! sizes; and a worker's load of the current generation while another thread publishes.
//!
//! `cargo bench --bench publish`

use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::Cache;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ramjet_control::apply::Applier;
use ramjet_control::audit::AuditTrail;
use ramjet_control::compile::{static_routes, Compiler};
use ramjet_control::routes_file::{parse, StaticRoutes};
use ramjet_shared::{CertStore, Generation, Published};

/// `routes` rules over `routes / 10` hosts, 10 paths each, 20 backends; `variant` moves one route.
fn config(routes: usize, variant: usize) -> StaticRoutes {
    let mut yaml = String::from("backends:\n");
    for b in 0..20 {
        yaml.push_str(&format!("  b{b}: {{ endpoints: [\"10.0.{b}.1:8080\", \"10.0.{b}.2:8080\"] }}\n"));
    }
    yaml.push_str("routes:\n");
    for r in 0..routes {
        let backend = if r == 0 { variant % 20 } else { r % 20 };
        yaml.push_str(&format!("  - {{ host: h{}.example.com, path: /p{}, backend: b{backend} }}\n", r / 10, r % 10));
    }
    parse(&yaml, Path::new("."), "bench.yaml").unwrap()
}

fn pointer_store(c: &mut Criterion) {
    let published = Published::new();
    let certs = Arc::new(CertStore::default());
    let generations = [Arc::new(Generation::empty()), Arc::new(Generation::empty())];
    let mut i = 0;
    c.bench_function("publish/pointer_store", |b| {
        b.iter(|| {
            i ^= 1;
            published.publish(certs.clone(), generations[i].clone());
        })
    });
}

fn compile_diff_publish(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish/compile_diff_publish");
    group.sample_size(10);
    for routes in [10, 1_000, 10_000, 100_000] {
        let configs = [config(routes, 1), config(routes, 2)];
        let published = Arc::new(Published::new());
        let applier = Applier::new(published.clone(), 10, AuditTrail::default(), Arc::default());
        let mut compiler = Compiler::new();
        let mut i = 0;
        let mut runs = 0u64;
        group.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |b, _| {
            b.iter(|| {
                // Each iteration changes one route, as a real edit does: a new generation every time.
                runs += 1;
                i ^= 1;
                let draft = static_routes::compile(&configs[i], &mut compiler);
                let generation = compiler.finish(draft).expect("a new generation");
                applier.apply(generation);
            })
        });
        // Every iteration published (unless a filter skipped this bench).
        assert!(runs == 0 || published.current().number > 1);
    }
    group.finish();
}

/// One rollback pin plus its release, as `POST /admin/rollback` and `/admin/release` do them: the
/// control thread's whole cost (publish, history, audit record), which must not grow with the table.
fn pin_and_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish/pin_and_release");
    for routes in [1_000, 10_000, 100_000] {
        let published = Arc::new(Published::new());
        let applier = Applier::new(published.clone(), 10, AuditTrail::default(), Arc::default());
        let mut compiler = Compiler::new();
        for variant in [1, 2] {
            let draft = static_routes::compile(&config(routes, variant), &mut compiler);
            applier.apply(compiler.finish(draft).expect("a new generation"));
        }
        let previous = published.current().number - 1;
        group.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |b, _| {
            b.iter(|| {
                applier.rollback(previous).expect("the previous generation is in the ring");
                assert!(applier.release().0);
            })
        });
    }
    group.finish();
}

fn load_while_publishing(c: &mut Criterion) {
    let published = Arc::new(Published::new());
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (published, stop) = (published.clone(), stop.clone());
        std::thread::spawn(move || {
            let certs = Arc::new(CertStore::default());
            while !stop.load(Ordering::Relaxed) {
                published.publish(certs.clone(), Arc::new(Generation::empty()));
            }
        })
    };
    struct Pointer(Arc<Published>);
    impl std::ops::Deref for Pointer {
        type Target = arc_swap::ArcSwap<Generation>;
        fn deref(&self) -> &Self::Target {
            self.0.generation()
        }
    }
    let mut cache = Cache::new(Pointer(published.clone()));
    c.bench_function("publish/worker_load_while_publishing", |b| b.iter(|| black_box(cache.load().number)));
    stop.store(true, Ordering::Relaxed);
    publisher.join().unwrap();
}

criterion_group!(benches, pointer_store, compile_diff_publish, pin_and_release, load_while_publishing);
criterion_main!(benches);
