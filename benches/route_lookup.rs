//! Route lookup and request-head parsing: the two pieces of per-request work the data plane does
//! itself. Lookup at 1,000 / 10,000 / 100,000 routes shows the cost does not grow with the table.
//! `route_lookup_canary` is the same table with every route a canary (ingress-nginx's header,
//! cookie and weight rules): lookup plus the pick a worker makes, reading the request's fields.
//! `route_pick` compares lookup plus pick on plain routes with the same on routes whose only rule
//! is a weighted split (what a weight-only canary, and so an auto-promoting one, compiles to): the
//! difference is what a weighted pick adds to a request.
//!
//! `cargo bench --bench route_lookup`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ramjet_dataplane::codec::http1::parse_request;
use ramjet_dataplane::conn::ConnFacts;
use ramjet_shared::{
    cookie_value, Backend, Condition, Matcher, PathKind, RequestView, RoutePolicy, Rule, TableBuilder, WeightedBackend,
};

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

/// A request's fields as a worker sees them (five fields, one of them a cookie).
struct Fields(&'static [(&'static str, &'static str)]);

impl RequestView for Fields {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes())
    }

    fn cookie(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .find_map(|(_, v)| cookie_value(v.as_bytes(), name))
    }

    fn method(&self) -> &[u8] {
        b"GET"
    }

    fn query(&self) -> &[u8] {
        b"verbose=1"
    }
    fn path(&self) -> &[u8] {
        b"/api/orders"
    }
    fn tls(&self) -> bool {
        false
    }
}

fn lookup_canary(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_lookup_canary");
    let primary = Arc::new(Backend::endpoints("b", 0, vec!["127.0.0.1:1".parse().unwrap()]));
    let canary = Arc::new(Backend::endpoints("c", 1, vec!["127.0.0.1:2".parse().unwrap()]));
    let header = |v: &str| Condition::Header { name: "x-canary".into(), value: Matcher::exact(v) };
    let cookie = |v: &str| Condition::Cookie { name: "beta".into(), value: Matcher::exact(v) };
    let policy = Arc::new(RoutePolicy::new(vec![
        Rule::to(vec![header("always")], canary.clone()),
        Rule::to(vec![header("never")], primary.clone()),
        Rule::to(vec![cookie("always")], canary.clone()),
        Rule::to(vec![cookie("never")], primary.clone()),
        Rule::split(
            vec![],
            vec![WeightedBackend::new(canary, 10), WeightedBackend::new(primary.clone(), 90)],
            100,
            false,
        ),
    ]));
    let routes = 100_000;
    let mut b = TableBuilder::new();
    for r in 0..routes {
        let host = format!("h{}.example.com", r / 10);
        let path = format!("/api/v{}", r % 10);
        b.add_route_with_policy(&host, &path, PathKind::Prefix, primary.clone(), Some(policy.clone()), "bench")
            .unwrap();
    }
    let table = b.build(None);
    let hosts: Vec<String> = (0..64).map(|i| format!("H{}.Example.com:8080", (i * 7919) % (routes / 10))).collect();
    let fields = Fields(&[
        ("user-agent", "wrk/4.2"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip"),
        ("cookie", "session=abcdef0123456789; theme=dark"),
        ("x-request-id", "42"),
    ]);
    let mut i = 0;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    };
    group.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |bench, _| {
        bench.iter(|| {
            i = (i + 1) % hosts.len();
            let route = table.route(&hosts[i], "/api/v3/users/42?verbose=1").unwrap();
            black_box(route.pick(&fields, &mut random).backend.slot)
        })
    });
    group.finish();
}

/// One host with 10 / 100 / 1,000 regex paths (ingress-nginx's `use-regex`), each with a capture
/// group, matched by the host's one DFA: the cost follows the path's length, not the number of
/// patterns. The table build (the DFA's compilation) is timed once per size and printed.
fn lookup_regex(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_lookup_regex");
    let backend = Arc::new(Backend::endpoints("b", 0, vec!["127.0.0.1:1".parse().unwrap()]));
    for routes in [10, 100, 1_000] {
        let mut b = TableBuilder::new();
        for r in 0..routes {
            let path = format!("/api/v{}/service{}/([0-9]+)/items", r % 10, r / 10);
            b.add_route("regex.example.com", &path, PathKind::Regex, backend.clone(), "bench").unwrap();
        }
        let built = std::time::Instant::now();
        let table = b.build(None);
        eprintln!("route_lookup_regex/{routes}: table built in {:?}", built.elapsed());
        let paths: Vec<String> = (0..64)
            .map(|i| format!("/API/v{}/service{}/42/items?verbose=1", i % 10, (i * 7) % (routes / 10).max(1)))
            .collect();
        let mut i = 0;
        group.bench_with_input(BenchmarkId::from_parameter(routes), &routes, |bench, _| {
            bench.iter(|| {
                i = (i + 1) % paths.len();
                black_box(table.route("regex.example.com", &paths[i]).is_some())
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

fn pick(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_pick");
    let primary = Arc::new(Backend::endpoints("b", 0, vec!["127.0.0.1:1".parse().unwrap()]));
    let canary = Arc::new(Backend::endpoints("c", 1, vec!["127.0.0.1:2".parse().unwrap()]));
    let split = Rule::split(
        vec![],
        vec![WeightedBackend::new(canary, 50), WeightedBackend::new(primary.clone(), 50)],
        100,
        false,
    );
    let weighted = Arc::new(RoutePolicy::new(vec![split]));
    let routes = 100_000;
    for (name, policy) in [("plain", None), ("weighted", Some(weighted))] {
        let mut b = TableBuilder::new();
        for r in 0..routes {
            let host = format!("h{}.example.com", r / 10);
            let path = format!("/api/v{}", r % 10);
            b.add_route_with_policy(&host, &path, PathKind::Prefix, primary.clone(), policy.clone(), "bench").unwrap();
        }
        let table = b.build(None);
        let hosts: Vec<String> = (0..64).map(|i| format!("H{}.Example.com:8080", (i * 7919) % (routes / 10))).collect();
        let fields = Fields(&[("user-agent", "wrk/4.2"), ("accept", "*/*")]);
        let mut i = 0;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
        };
        group.bench_function(name, |bench| {
            bench.iter(|| {
                i = (i + 1) % hosts.len();
                let route = table.route(&hosts[i], "/api/v3/users/42?verbose=1").unwrap();
                black_box(route.pick(&fields, &mut random).backend.slot)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, lookup, lookup_canary, lookup_regex, pick, head_parse);
criterion_main!(benches);
