use std::collections::BTreeMap;

use super::*;

fn one(key: &str, value: &str) -> Finding {
    let annotations = BTreeMap::from([(key.to_string(), value.to_string())]);
    let mut found = review(Some(&annotations), false, true);
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// `review` finds entries by binary search.
#[test]
fn the_table_is_sorted_without_duplicates() {
    for pair in TABLE.windows(2) {
        assert!(pair[0].name < pair[1].name, "{} before {}", pair[0].name, pair[1].name);
    }
}

/// What the compiler reads is listed as honoured under both prefixes.
#[test]
fn the_annotations_the_compiler_reads_are_honoured() {
    for key in SSL_REDIRECT_ANNOTATIONS {
        assert_eq!(one(key, "true").verdict, Verdict::Honoured, "{key}");
    }
    for key in BACKEND_PROTOCOL_ANNOTATIONS {
        for value in ["GRPC", "h2c", "HTTP", "HTTPS", "grpcs"] {
            assert_eq!(one(key, value).verdict, Verdict::Honoured, "{key}: {value}");
        }
        let unknown = one(key, "FCGI");
        assert_eq!(unknown.verdict, Verdict::RefusedToServe, "{key}");
        assert!(unknown.diagnostic().unwrap().contains("unknown backend protocol"), "{unknown:?}");
    }
    // TLS to backends, under both prefixes.
    for prefix in [NGINX_PREFIX, RAMJET_PREFIX] {
        for (name, value) in [
            ("proxy-ssl-secret", "shop/backend-ca"),
            ("proxy-ssl-name", "api.internal"),
            ("proxy-ssl-verify", "on"),
            ("proxy-ssl-verify", "off"),
            ("proxy-ssl-server-name", "on"),
        ] {
            let key = format!("{prefix}{name}");
            assert_eq!(one(&key, value).verdict, Verdict::Honoured, "{key}: {value}");
        }
        // ingress-nginx would take a typo for "off" and not verify; ramjet does not serve it.
        let typo = one(&format!("{prefix}proxy-ssl-verify"), "true");
        assert_eq!(typo.verdict, Verdict::RefusedToServe);
        assert!(typo.diagnostic().unwrap().contains("neither \"on\" nor \"off\""), "{typo:?}");
    }
    assert_eq!(one("nginx.ingress.kubernetes.io/proxy-ssl-ciphers", "HIGH").verdict, Verdict::Approximated);
}

#[test]
fn each_kind_of_answer() {
    let snippet = one(
        "nginx.ingress.kubernetes.io/server-snippet",
        "# rate\nlimit_req zone=one burst=5;\nif ($host = a) { return 403; }\nlocation /x { deny all; }",
    );
    assert_eq!(snippet.verdict, Verdict::Refused);
    assert!(
        snippet.detail.contains("its directives (limit_req, if, return, location, deny) are not applied"),
        "{snippet:?}"
    );

    assert_eq!(one("nginx.ingress.kubernetes.io/limit-rate", "1024").verdict, Verdict::Ignored);
    assert_eq!(one("nginx.ingress.kubernetes.io/limit-rpm", "60").verdict, Verdict::Honoured);
    assert_eq!(one("ramjet.dev/limit-connections", "10").verdict, Verdict::Honoured);
    assert_eq!(one("nginx.ingress.kubernetes.io/limit-rps", "ten").verdict, Verdict::RefusedToServe);
    assert_eq!(one("nginx.ingress.kubernetes.io/whitelist-source-range", "10.0.0.0/8").verdict, Verdict::Honoured);
    assert_eq!(
        one("nginx.ingress.kubernetes.io/whitelist-source-range", "10.0.0.0/8, intranet").verdict,
        Verdict::RefusedToServe
    );
    assert_eq!(one("nginx.ingress.kubernetes.io/auth-type", "basic").verdict, Verdict::Honoured);
    assert_eq!(one("ramjet.dev/auth-type", "basic").verdict, Verdict::Honoured);
    assert_eq!(one("nginx.ingress.kubernetes.io/auth-type", "digest").verdict, Verdict::RefusedToServe);
    assert_eq!(one("nginx.ingress.kubernetes.io/auth-url", "http://auth.shop/verify").verdict, Verdict::Honoured);
    assert_eq!(one("nginx.ingress.kubernetes.io/auth-url", "https://$host/oauth2/auth").verdict, Verdict::Honoured);
    // A host outside the cluster is reached by its DNS name (https verified).
    assert_eq!(
        one("nginx.ingress.kubernetes.io/auth-url", "https://auth.example.com/verify").verdict,
        Verdict::Honoured
    );
    for unreachable in ["http://$host$request_uri", "ftp://auth"] {
        let found = one("nginx.ingress.kubernetes.io/auth-url", unreachable);
        assert_eq!(found.verdict, Verdict::RefusedToServe, "{unreachable}");
    }
    assert_eq!(one("nginx.ingress.kubernetes.io/upstream-hash-by", "$request_uri").verdict, Verdict::Honoured);
    assert_eq!(one("nginx.ingress.kubernetes.io/upstream-hash-by", "${uri").verdict, Verdict::RefusedToServe);
    assert_eq!(one("nginx.ingress.kubernetes.io/proxy-buffer-size", "16k").verdict, Verdict::Approximated);
    assert_eq!(one("nginx.ingress.kubernetes.io/rewrite-targt", "/").verdict, Verdict::Unknown);
    assert_eq!(one("ramjet.dev/nope", "1").verdict, Verdict::Unknown);
    // One table, two prefixes: a name is known only under the prefixes that define it.
    assert_eq!(one("ramjet.dev/auth-cache-key", "$remote_user").verdict, Verdict::Unknown);
    assert_eq!(one("nginx.ingress.kubernetes.io/canary-auto-promote", "true").verdict, Verdict::Unknown);
    assert_eq!(one("ramjet.dev/canary-auto-promote", "true").verdict, Verdict::Honoured);
    // ingress-nginx's own default value asks for nothing, whatever ramjet supports.
    for (key, value) in [("use-regex", "false"), ("backend-protocol", "http"), ("enable-cors", "False")] {
        let found = one(&format!("{NGINX_PREFIX}{key}"), value);
        assert_eq!(found.verdict, Verdict::Honoured, "{key}: {value}");
        assert_eq!(found.diagnostic(), None);
    }
    // Other annotations are not ours to judge.
    let others = BTreeMap::from([("kubernetes.io/ingress.class".to_string(), "nginx".to_string())]);
    assert!(review(Some(&others), false, true).is_empty());
}

#[test]
fn a_tls_ingress_from_ingress_nginx_is_told_about_the_redirect_default() {
    let annotated = BTreeMap::from([("nginx.ingress.kubernetes.io/proxy-buffering".to_string(), "off".to_string())]);
    let found = review(Some(&annotated), true, true);
    let redirect = found.iter().find(|f| f.value.is_none()).expect("the redirect default");
    assert!(redirect.diagnostic().unwrap().contains("set one to keep the redirect"), "{redirect:?}");
    // Not without TLS, not when ssl-redirect is set either way, not for Ingresses written for ramjet.
    assert!(review(Some(&annotated), false, true).iter().all(|f| f.value.is_some()));
    let set = BTreeMap::from([("nginx.ingress.kubernetes.io/ssl-redirect".to_string(), "false".to_string())]);
    assert!(review(Some(&set), true, true).iter().all(|f| f.value.is_some()));
    assert!(review(None, true, false).is_empty());
}

#[test]
fn snippet_directives_skip_comments_and_stop_at_five() {
    assert_eq!(directives("# only a comment\n"), "");
    assert_eq!(directives("a 1; b 2; c { d; } e; f; g;"), "a, b, c, d, e, ...");
    assert_eq!(directives("more_set_headers \"A: b\"; # trailing\nmore_set_headers \"C: d\";"), "more_set_headers");
}

/// docs/migrating-from-ingress-nginx.md lists every annotation with ramjet's answer.
#[test]
fn the_migration_guide_lists_every_annotation_with_its_answer() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/migrating-from-ingress-nginx.md");
    let guide = std::fs::read_to_string(path).unwrap();
    for entry in TABLE.iter().filter(|e| e.nginx.is_some()) {
        let row = format!("| `{}` | {} |", entry.name, entry.support.verdict());
        assert!(guide.contains(&row), "the guide has no row {row}");
    }
}

/// The chart's ValidatingAdmissionPolicy (charts/ramjet/files/admission/) rejects at `kubectl apply`
/// what ramjet would refuse to serve, and never what it serves: its list of ramjet.dev names is
/// the registry's, and each value pattern agrees with the registry's check on every sample.
#[test]
fn the_admission_policy_files_agree_with_the_registry() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/ramjet/files/admission");
    let read = |file: &str| std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
    let listed: Vec<String> = serde_json::from_str(&read("ramjet-annotations.json")).unwrap();
    let mut known: Vec<String> = TABLE.iter().filter(|e| e.ramjet.is_some()).map(|e| e.name.to_string()).collect();
    known.sort();
    assert_eq!(
        listed, known,
        "charts/ramjet/files/admission/ramjet-annotations.json is the registry's ramjet.dev names"
    );

    let patterns: BTreeMap<String, String> = serde_json::from_str(&read("value-patterns.json")).unwrap();
    let samples = [
        "",
        " ",
        "0",
        "1",
        "007",
        " 5 ",
        "10",
        "4000000000",
        "99999999999",
        "-1",
        "1.5",
        "abc",
        "8m",
        "8M",
        "1k",
        "0k",
        "8mb",
        "true",
        "false",
        "True",
        "FALSE",
        "t",
        "yes",
        "on",
        "round_robin",
        "ewma",
        "random",
        "basic",
        "digest",
        "CN=foo",
        "cn=foo",
        "CN=(a|b)",
        " CN=x",
    ];
    for (name, pattern) in &patterns {
        let entry = TABLE.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name} is not in the registry"));
        assert!(matches!(entry.support, Checked { .. }), "{name}: only checked values keep an Ingress out");
        let matcher = ramjet_shared::Matcher::regex(pattern).unwrap();
        let mut refused = 0;
        for value in samples {
            let admitted = value.trim().is_empty() || matcher.matches(value.as_bytes());
            let key = format!("{NGINX_PREFIX}{name}");
            let annotations = BTreeMap::from([(key, value.to_string())]);
            let serves = review(Some(&annotations), false, false).iter().all(|f| f.verdict != Verdict::RefusedToServe);
            assert!(admitted || !serves, "{name}: the policy would refuse {value:?}, which ramjet serves");
            refused += usize::from(!admitted);
        }
        assert!(refused > 0, "{name}: the pattern refuses none of the samples");
    }
}

/// docs/ingress-nginx-e2e.md's summary counts what its tables say: each row of an e2e case has one
/// status, and the totals per part are the rows'.
#[test]
fn the_e2e_record_summary_counts_its_rows() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/ingress-nginx-e2e.md");
    let text = std::fs::read_to_string(path).unwrap();
    const STATUSES: [&str; 4] = ["passes", "differs on purpose", "config-only, equivalent", "not yet"];
    // Per part: cases, each status, and the untested among `not yet`.
    let mut counted: BTreeMap<&str, [usize; 6]> = BTreeMap::new();
    let mut part = None;
    for line in text.lines() {
        part = match line {
            l if l.starts_with("# Annotations") => Some("annotations"),
            l if l.starts_with("# Settings") => Some("settings"),
            l if l.starts_with("# Default backend") => Some("defaultbackend"),
            _ => part,
        };
        let Some(part) = part else { continue };
        if !line.starts_with("| ") || line.starts_with("| case") {
            continue;
        }
        let last = line.trim_end().trim_end_matches('|').rsplit('|').next().unwrap();
        let status = STATUSES.iter().position(|s| last.contains(&format!("**{s}**")));
        let status = status.unwrap_or_else(|| panic!("a row without a status: {line}"));
        let row = counted.entry(part).or_default();
        row[0] += 1;
        row[1 + status] += 1;
        row[5] += usize::from(status == 3 && last.contains("**not yet** (untested)"));
    }
    for (part, label) in
        [("annotations", "| annotations"), ("settings", "| settings"), ("defaultbackend", "| defaultbackend")]
    {
        let summary = text.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no summary row {label}"));
        let figures: Vec<usize> = summary.split('|').skip(2).filter_map(|c| c.trim().parse().ok()).collect();
        assert_eq!(figures, counted[part], "docs/ingress-nginx-e2e.md: the summary row of {part}");
    }
}
