//! Kubernetes objects into the Ingress compiler: never a panic, and compiling is deterministic and a
//! fixed point (the same snapshot twice gives no new generation; a fresh compiler gives the same
//! table).
//!
//! An input that starts with a NUL byte is a recipe: the rest drives [`arbitrary`] to build YAML
//! objects — IngressClasses, Ingresses, Services, EndpointSlices, Secrets (with real, damaged and
//! made-up certificates), `v1/List`s and other kinds — from a vocabulary of values that matter to the
//! compiler (hosts, wildcards, paths, path types, port numbers and names, addresses, timestamps,
//! class annotations), any string, or a value of the wrong type. Any other input is YAML text, as a
//! `--manifests` file holds it (the corpus seeds are such files). Both go through
//! `manifests::parse`, which deserializes each object into its k8s-openapi type as far as it goes,
//! and then `compile::cluster::compile`.
#![no_main]

use std::sync::Arc;

use arbitrary::{Result, Unstructured};
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use ramjet_control::compile::cluster::compile;
use ramjet_control::compile::snapshot::{ClusterSnapshot, IngressOptions};
use ramjet_control::compile::Compiler;
use ramjet_control::manifests;
use serde_json::{json, Map, Value};

fuzz_target!(|data: &[u8]| {
    let text = match data.split_first() {
        Some((0, recipe)) => match objects(&mut Unstructured::new(recipe)) {
            Ok(text) => text,
            Err(_) => return,
        },
        _ => match std::str::from_utf8(data) {
            Ok(text) => with_certificates(text),
            Err(_) => return,
        },
    };
    let mut snapshot = ClusterSnapshot { options: Arc::new(IngressOptions::default()), ..Default::default() };
    manifests::parse(&text, "fuzz.yaml", &mut snapshot);

    let mut compiler = Compiler::new();
    let draft = compile(&snapshot, &mut compiler);
    let first = compiler.finish(draft).expect("a first compile gives a generation");
    let draft = compile(&snapshot, &mut compiler);
    assert!(compiler.finish(draft).is_none(), "the same objects twice: no new generation");
    let mut fresh = Compiler::new();
    let draft = compile(&snapshot, &mut fresh);
    let other = fresh.finish(draft).expect("a first compile gives a generation");
    assert_eq!(first.table.digest(), other.table.digest(), "compiling is deterministic");
    for host in ["a.test", "x.b.test", "", "unknown.test"] {
        for path in ["/", "/a", "/a/b", "/ab"] {
            let _ = first.table.route(host, path);
        }
        let _ = first.table.certificate_for(host);
    }
});

/// Replaces the placeholders of the compiler's fixtures (`"__CERT_A__"`, `"__KEY_B__"`, ...) with
/// real PEM, as its tests do.
fn with_certificates(text: &str) -> String {
    if !text.contains("\"__") {
        return text.to_string();
    }
    let [(ca, ka), (cb, kb)] = &ramjet_fuzz::test_certs().pems;
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    text.replace("\"__CERT_A__\"", &quoted(ca))
        .replace("\"__KEY_A__\"", &quoted(ka))
        .replace("\"__CERT_B__\"", &quoted(cb))
        .replace("\"__KEY_B__\"", &quoted(kb))
}

const NAMES: &[&str] = &["a", "b", "web", "default", "", "ramjet", "nginx", "tls-a", "tls-b"];
const NAMESPACES: &[&str] = &["default", "a", ""];
const HOSTS: &[&str] = &[
    "a.test",
    "A.Test",
    "x.b.test",
    "*.b.test",
    "*.test",
    "*",
    "*.",
    "",
    "a..test",
    "-a.test",
    "a.test.",
    "a_b.test",
    "[::1]",
    "10.0.0.1",
    "a.test:80",
    "xn--bcher-kva.example",
    "ä.test",
];
const PATHS: &[&str] =
    &["/", "/a", "/a/", "/a/b", "/ab", "", "a", "/a b", "/a?b", "/a#b", "//", "/a/../b", "/%2F", "/\u{0}"];
const PATH_TYPES: &[&str] = &["Prefix", "Exact", "ImplementationSpecific", "", "prefix"];
const PORT_NAMES: &[&str] = &["http", "https", "", "grpc"];
const PORTS: &[i64] = &[80, 443, 8080, 0, -1, 65535, 65536, 2147483647, -2147483648];
const ADDRESSES: &[&str] = &["10.0.0.1", "10.0.0.2", "::1", "fe80::1%eth0", "256.0.0.1", "", "10.0.0.1 ", "a.test"];
const ADDRESS_TYPES: &[&str] = &["IPv4", "IPv6", "FQDN", ""];
const TIMES: &[&str] =
    &["2025-01-01T00:00:00Z", "2024-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "2025-01-01T00:00:00+01:00"];
const CLASS_ANNOTATIONS: &[&str] = &[
    "kubernetes.io/ingress.class",
    "ingressclass.kubernetes.io/is-default-class",
    "ramjet.dev/ssl-redirect",
    "nginx.ingress.kubernetes.io/ssl-redirect",
];
const ANNOTATION_VALUES: &[&str] = &["ramjet", "true", "TRUE", "false", "nginx", ""];

/// One of `vocabulary`, mostly; sometimes any string, or nothing, or a value of the wrong type.
fn string(u: &mut Unstructured, vocabulary: &[&str]) -> Result<Value> {
    Ok(match u.int_in_range(0..=15)? {
        0 => Value::String(u.arbitrary()?),
        1 => Value::Null,
        2 => json!(u.arbitrary::<i32>()?),
        _ => Value::String(u.choose(vocabulary)?.to_string()),
    })
}

fn port_number(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=9)? {
        0 => json!(u.arbitrary::<i64>()?),
        1 => json!("80"),
        _ => json!(*u.choose(PORTS)?),
    })
}

/// Up to `max` items made by `item`.
fn list(u: &mut Unstructured, max: usize, mut item: impl FnMut(&mut Unstructured) -> Result<Value>) -> Result<Value> {
    let n = u.int_in_range(0..=max)?;
    Ok(Value::Array((0..n).map(|_| item(u)).collect::<Result<_>>()?))
}

/// Sets `key` to `value` unless the recipe leaves it out.
fn put(u: &mut Unstructured, map: &mut Map<String, Value>, key: &str, value: Value) -> Result<()> {
    if u.ratio(7, 8)? {
        map.insert(key.to_string(), value);
    }
    Ok(())
}

fn metadata(u: &mut Unstructured, labels: Option<Value>) -> Result<Value> {
    let mut m = Map::new();
    let name = string(u, NAMES)?;
    put(u, &mut m, "name", name)?;
    if u.arbitrary()? {
        let namespace = string(u, NAMESPACES)?;
        m.insert("namespace".into(), namespace);
    }
    if u.arbitrary()? {
        let time = string(u, TIMES)?;
        m.insert("creationTimestamp".into(), time);
    }
    if u.ratio(1, 3)? {
        let mut annotations = Map::new();
        for _ in 0..u.int_in_range(0..=3)? {
            let key = u.choose(CLASS_ANNOTATIONS)?.to_string();
            let value = string(u, ANNOTATION_VALUES)?;
            annotations.insert(key, value);
        }
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if let Some(labels) = labels {
        m.insert("labels".into(), labels);
    }
    Ok(Value::Object(m))
}

fn backend(u: &mut Unstructured) -> Result<Value> {
    if u.ratio(1, 10)? {
        return Ok(json!({ "resource": { "apiGroup": "x", "kind": "Bucket", "name": "b" } }));
    }
    let mut port = Map::new();
    if u.arbitrary()? {
        port.insert("number".into(), port_number(u)?);
    }
    if u.arbitrary()? {
        port.insert("name".into(), string(u, PORT_NAMES)?);
    }
    Ok(json!({ "service": { "name": string(u, NAMES)?, "port": Value::Object(port) } }))
}

fn ingress(u: &mut Unstructured) -> Result<Value> {
    let mut spec = Map::new();
    if u.arbitrary()? {
        let class = string(u, NAMES)?;
        spec.insert("ingressClassName".into(), class);
    }
    if u.ratio(1, 4)? {
        spec.insert("defaultBackend".into(), backend(u)?);
    }
    let rules = list(u, 3, |u| {
        let paths = list(u, 3, |u| {
            let mut p = Map::new();
            let path = string(u, PATHS)?;
            put(u, &mut p, "path", path)?;
            let path_type = string(u, PATH_TYPES)?;
            put(u, &mut p, "pathType", path_type)?;
            let b = backend(u)?;
            put(u, &mut p, "backend", b)?;
            Ok(Value::Object(p))
        })?;
        let mut rule = Map::new();
        let host = string(u, HOSTS)?;
        put(u, &mut rule, "host", host)?;
        put(u, &mut rule, "http", json!({ "paths": paths }))?;
        Ok(Value::Object(rule))
    })?;
    put(u, &mut spec, "rules", rules)?;
    if u.arbitrary()? {
        let tls = list(u, 2, |u| {
            let mut t = Map::new();
            let hosts = list(u, 2, |u| string(u, HOSTS))?;
            put(u, &mut t, "hosts", hosts)?;
            let secret = string(u, NAMES)?;
            put(u, &mut t, "secretName", secret)?;
            Ok(Value::Object(t))
        })?;
        spec.insert("tls".into(), tls);
    }
    Ok(json!({ "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata(u, None)?, "spec": spec }))
}

fn ingress_class(u: &mut Unstructured) -> Result<Value> {
    let controller = string(u, &["ramjet.dev/ingress-controller", "k8s.io/ingress-nginx", ""])?;
    Ok(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": metadata(u, None)?, "spec": { "controller": controller },
    }))
}

fn service(u: &mut Unstructured) -> Result<Value> {
    let ports = list(u, 3, |u| {
        let mut p = Map::new();
        let name = string(u, PORT_NAMES)?;
        put(u, &mut p, "name", name)?;
        p.insert("port".into(), port_number(u)?);
        if u.arbitrary()? {
            let target = if u.arbitrary()? { port_number(u)? } else { string(u, PORT_NAMES)? };
            p.insert("targetPort".into(), target);
        }
        Ok(Value::Object(p))
    })?;
    let mut spec = Map::new();
    spec.insert("ports".into(), ports);
    if u.ratio(1, 8)? {
        let kind = string(u, &["ExternalName", "ClusterIP", "NodePort"])?;
        spec.insert("type".into(), kind);
    }
    Ok(json!({ "apiVersion": "v1", "kind": "Service", "metadata": metadata(u, None)?, "spec": spec }))
}

fn endpoint_slice(u: &mut Unstructured) -> Result<Value> {
    let labels = json!({ "kubernetes.io/service-name": string(u, NAMES)? });
    let ports = list(u, 2, |u| Ok(json!({ "name": string(u, PORT_NAMES)?, "port": port_number(u)? })))?;
    let endpoints = list(u, 4, |u| {
        let addresses = list(u, 2, |u| string(u, ADDRESSES))?;
        let mut conditions = Map::new();
        for key in ["ready", "serving", "terminating"] {
            if u.arbitrary()? {
                let v = if u.ratio(1, 10)? { json!("yes") } else { json!(u.arbitrary::<bool>()?) };
                conditions.insert(key.into(), v);
            }
        }
        Ok(json!({ "addresses": addresses, "conditions": conditions }))
    })?;
    Ok(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": metadata(u, Some(labels))?,
        "addressType": string(u, ADDRESS_TYPES)?, "ports": ports, "endpoints": endpoints,
    }))
}

/// Certificate or key material: real, from the other pair, damaged DER, or any bytes.
fn pem(u: &mut Unstructured, key: bool) -> Result<String> {
    let certs = ramjet_fuzz::test_certs();
    let pick = u.int_in_range(0..=5)?;
    Ok(match pick {
        0 | 1 => {
            let pair = &certs.pems[pick];
            if key {
                pair.1.clone()
            } else {
                pair.0.clone()
            }
        }
        2 if !key => {
            // The first certificate with a few bytes changed: deep into the DER parsers.
            let mut der = certs.der.clone();
            for _ in 0..u.int_in_range(1..=4)? {
                let at = u.choose_index(der.len())?;
                der[at] = u.arbitrary()?;
            }
            if u.arbitrary()? {
                der.truncate(u.choose_index(der.len())?);
            }
            ramjet_fuzz::pem_certificate(&der)
        }
        3 => ramjet_fuzz::pem_certificate(u.arbitrary::<&[u8]>()?),
        _ => u.arbitrary()?,
    })
}

fn secret(u: &mut Unstructured) -> Result<Value> {
    let (crt, key) = (pem(u, false)?, pem(u, true)?);
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut object = Map::new();
    object.insert("apiVersion".into(), json!("v1"));
    object.insert("kind".into(), json!("Secret"));
    object.insert("metadata".into(), metadata(u, None)?);
    let kind = string(u, &["kubernetes.io/tls", "Opaque"])?;
    put(u, &mut object, "type", kind)?;
    if u.arbitrary()? {
        object.insert("data".into(), json!({ "tls.crt": b64(&crt), "tls.key": b64(&key) }));
    } else {
        object.insert("stringData".into(), json!({ "tls.crt": crt, "tls.key": key }));
    }
    if u.ratio(1, 10)? {
        object.insert("data".into(), json!({ "tls.crt": "not base64!" }));
    }
    Ok(Value::Object(object))
}

fn object(u: &mut Unstructured, depth: u8) -> Result<Value> {
    Ok(match u.int_in_range(0..=11)? {
        0 => ingress_class(u)?,
        1..=3 => ingress(u)?,
        4 | 5 => service(u)?,
        6 | 7 => endpoint_slice(u)?,
        8 => secret(u)?,
        9 if depth == 0 => json!({ "apiVersion": "v1", "kind": "List", "items": list(u, 3, |u| object(u, 1))? }),
        10 => json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d" } }),
        _ => {
            // A known kind with the wrong apiVersion or a scrambled body.
            let mut o = ingress(u)?;
            if u.arbitrary()? {
                o["apiVersion"] = json!("extensions/v1beta1");
            } else {
                o["spec"] = string(u, NAMES)?;
            }
            o
        }
    })
}

/// The recipe's objects as YAML documents.
fn objects(u: &mut Unstructured) -> Result<String> {
    let mut text = String::new();
    for _ in 0..u.int_in_range(1..=10)? {
        let o = object(u, 0)?;
        text.push_str(&serde_yaml_ng::to_string(&o).map_err(|_| arbitrary::Error::IncorrectFormat)?);
        text.push_str("---\n");
    }
    Ok(text)
}
