//! Compiling Kubernetes objects: 10,000 Ingress paths (1,000 Ingresses of 10 paths over 100 hosts,
//! 1,000 Services with an EndpointSlice of 3 endpoints each, 10 TLS Secrets).
//!
//! * `cold`: a fresh compiler (start-up: nothing cached, every certificate parsed);
//! * `endpoint_slice_changed`: the steady state — one Deployment scaled, a new generation that
//!   shares everything else with the previous one;
//! * `unchanged`: a resync that compiles to the same table (no generation).
//!
//! `cargo bench --bench compile_ingress`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use ramjet_control::compile::cluster::compile;
use ramjet_control::compile::snapshot::{ClusterSnapshot, IngressOptions};
use ramjet_control::compile::Compiler;
use serde_json::json;

const INGRESSES: usize = 1_000;
const PATHS_PER_INGRESS: usize = 10;

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<T> {
    Arc::new(serde_json::from_value(value).unwrap())
}

fn slice(i: usize, endpoints: usize) -> Arc<EndpointSlice> {
    let list: Vec<_> = (0..endpoints)
        .map(|e| json!({ "addresses": [format!("10.{}.{}.{}", i / 250, i % 250, e + 1)], "conditions": { "ready": true } }))
        .collect();
    object(json!({
        "metadata": { "name": format!("svc-{i}-abcde"), "namespace": "bench",
                      "labels": { "kubernetes.io/service-name": format!("svc-{i}") } },
        "addressType": "IPv4",
        "ports": [{ "name": "http", "port": 8080 }],
        "endpoints": list,
    }))
}

fn snapshot() -> ClusterSnapshot {
    let mut s = ClusterSnapshot { options: Arc::new(IngressOptions::default()), ..Default::default() };
    s.ingress_classes.push(object::<IngressClass>(json!({
        "metadata": { "name": "ramjet" }, "spec": { "controller": "ramjet.dev/ingress-controller" }
    })));
    for t in 0..10 {
        let c = rcgen::generate_simple_self_signed(vec![format!("*.t{t}.example.com")]).unwrap();
        s.secrets.push(object::<Secret>(json!({
            "metadata": { "name": format!("tls-{t}"), "namespace": "bench" },
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": k8s_openapi::ByteString(c.cert.pem().into_bytes()),
                "tls.key": k8s_openapi::ByteString(c.signing_key.serialize_pem().into_bytes()),
            },
        })));
    }
    for i in 0..INGRESSES {
        s.services.push(object::<Service>(json!({
            "metadata": { "name": format!("svc-{i}"), "namespace": "bench" },
            "spec": { "ports": [{ "name": "http", "port": 80, "targetPort": 8080 }] },
        })));
        s.endpoint_slices.push(slice(i, 3));
        let host = format!("h{}.t{}.example.com", i / 10, i % 10);
        let paths: Vec<_> = (0..PATHS_PER_INGRESS)
            .map(|p| {
                json!({
                    "path": format!("/app{}/p{p}", i % 10), "pathType": if p % 2 == 0 { "Prefix" } else { "Exact" },
                    "backend": { "service": { "name": format!("svc-{i}"), "port": { "name": "http" } } },
                })
            })
            .collect();
        s.ingresses.push(object::<Ingress>(json!({
            "metadata": { "name": format!("ing-{i}"), "namespace": "bench",
                          "creationTimestamp": format!("2025-01-01T00:{:02}:{:02}Z", i / 60 % 60, i % 60) },
            "spec": {
                "ingressClassName": "ramjet",
                "tls": [{ "hosts": [format!("*.t{}.example.com", i % 10)], "secretName": format!("tls-{}", i % 10) }],
                "rules": [{ "host": host, "http": { "paths": paths } }],
            },
        })));
    }
    s
}

fn benches(c: &mut Criterion) {
    let base = snapshot();
    let mut scaled = base.clone();
    scaled.endpoint_slices[0] = slice(0, 5);
    let mut group = c.benchmark_group("compile_ingress");
    group.sample_size(20);

    group.bench_function("cold/10000_paths", |b| {
        b.iter(|| {
            let mut compiler = Compiler::new();
            let draft = compile(black_box(&base), &mut compiler);
            let generation = compiler.finish(draft).unwrap();
            assert_eq!(generation.table.route_count(), INGRESSES * PATHS_PER_INGRESS);
            generation
        })
    });

    let mut compiler = Compiler::new();
    let draft = compile(&base, &mut compiler);
    compiler.finish(draft).unwrap();
    let mut flip = false;
    group.bench_function("endpoint_slice_changed/10000_paths", |b| {
        b.iter(|| {
            flip = !flip;
            let input = if flip { &scaled } else { &base };
            let draft = compile(black_box(input), &mut compiler);
            compiler.finish(draft).expect("a new generation")
        })
    });

    group.bench_function("unchanged/10000_paths", |b| {
        let draft = compile(&base, &mut compiler);
        let _ = compiler.finish(draft);
        b.iter(|| {
            let draft = compile(black_box(&base), &mut compiler);
            assert!(compiler.finish(draft).is_none());
        })
    });
    group.finish();
}

criterion_group!(compile_ingress, benches);
criterion_main!(compile_ingress);
