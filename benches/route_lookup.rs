//! Route lookup and request-head parsing: the two pieces of per-request work the data plane does
//! itself. Lookup at 1,000 / 10,000 / 100,000 routes shows the cost does not grow with the table.
//!
//! `cargo bench --bench route_lookup`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ramjet_dataplane::http1::{parse_request, ConnFacts};
use ramjet_shared::{Backend, PathKind, TableBuilder};

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_lookup");
    for routes in [1_000, 10_000, 100_000] {
        let backend = Arc::new(Backend::endpoints("b", 0, vec!["127.0.0.1:1".parse().unwrap()]));
        let mut b = TableBuilder::new();
        for r in 0..routes {
            b.add_route(
                &format!("h{}.example.com", r / 10),
                &format!("/api/v{}", r % 10),
                PathKind::Prefix,
                backend.clone(),
                "bench",
            )
            .unwrap();
        }
        let table = b.build(None);
        let hosts: Vec<String> = (0..64).map(|i| format!("H{}.Example.com:8080", (i * 7919) % (routes / 10))).collect();
        let mut i = 0;
        group.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |bench, _| {
            bench.iter(|| {
                i = (i + 1) % hosts.len();
                black_box(table.route(&hosts[i], "/api/v3/users/42?verbose=1").is_some())
            })
        });
    }
    group.finish();
}

fn head_parse(c: &mut Criterion) {
    let raw = b"GET /api/v3/users/42?verbose=1 HTTP/1.1\r\nHost: h17.example.com\r\nUser-Agent: wrk/4.2\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nCookie: session=abcdef0123456789\r\n\r\n";
    let facts = ConnFacts::new("10.0.0.1:40000".parse().unwrap(), false, 8080);
    let mut out = Vec::with_capacity(4096);
    c.bench_function("head_parse/typical_get", |b| {
        b.iter(|| black_box(parse_request(black_box(raw), &facts, &mut out).unwrap().unwrap().head_len))
    });
}

criterion_group!(benches, lookup, head_parse);
criterion_main!(benches);
