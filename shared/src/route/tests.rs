use super::*;

fn backend(name: &str) -> Arc<Backend> {
    Arc::new(Backend::respond(name, 0, 200, name.to_string()))
}

fn table(rules: &[(&str, &str, PathKind, &str)]) -> RouteTable {
    let mut b = TableBuilder::new();
    for (host, path, kind, name) in rules {
        b.add_route(host, path, *kind, backend(name), "test").unwrap();
    }
    b.build(None)
}

fn target(t: &RouteTable, host: &str, path: &str) -> Option<String> {
    t.route(host, path).map(|r| r.backend.name.to_string())
}

#[test]
fn prefix_matches_whole_elements_only() {
    let t = table(&[("", "/foo", PathKind::Prefix, "foo")]);
    for p in ["/foo", "/foo/", "/foo/bar", "/foo/bar/baz?x=1", "/foo?q"] {
        assert_eq!(target(&t, "h", p).as_deref(), Some("foo"), "{p}");
    }
    for p in ["/foobar", "/fo", "/", "/bar/foo"] {
        assert_eq!(target(&t, "h", p), None, "{p}");
    }
}

#[test]
fn trailing_slash_in_prefix_rule_is_ignored() {
    let t = table(&[("", "/foo/", PathKind::Prefix, "foo")]);
    assert_eq!(target(&t, "h", "/foo").as_deref(), Some("foo"));
    assert_eq!(target(&t, "h", "/foo/x").as_deref(), Some("foo"));
    assert_eq!(target(&t, "h", "/foox"), None);
}

#[test]
fn exact_is_exact_and_case_sensitive() {
    let t = table(&[("", "/foo", PathKind::Exact, "foo")]);
    assert_eq!(target(&t, "h", "/foo").as_deref(), Some("foo"));
    assert_eq!(target(&t, "h", "/foo?x").as_deref(), Some("foo"));
    for p in ["/foo/", "/FOO", "/foo/bar"] {
        assert_eq!(target(&t, "h", p), None, "{p}");
    }
}

#[test]
fn exact_before_prefix_and_longest_prefix_first() {
    let t = table(&[
        ("", "/", PathKind::Prefix, "root"),
        ("", "/a", PathKind::Prefix, "a"),
        ("", "/a/b", PathKind::Prefix, "ab"),
        ("", "/a/b", PathKind::Exact, "ab-exact"),
    ]);
    assert_eq!(target(&t, "h", "/a/b").as_deref(), Some("ab-exact"));
    assert_eq!(target(&t, "h", "/a/b/c").as_deref(), Some("ab"));
    assert_eq!(target(&t, "h", "/a/bc").as_deref(), Some("a"));
    assert_eq!(target(&t, "h", "/x").as_deref(), Some("root"));
    assert_eq!(target(&t, "h", "/").as_deref(), Some("root"));
}

#[test]
fn hosts_exact_then_wildcard_then_any() {
    let t = table(&[
        ("example.com", "/", PathKind::Prefix, "exact"),
        ("*.example.com", "/", PathKind::Prefix, "wild"),
        ("", "/", PathKind::Prefix, "any"),
    ]);
    assert_eq!(target(&t, "example.com", "/").as_deref(), Some("exact"));
    assert_eq!(target(&t, "EXAMPLE.COM:8080", "/").as_deref(), Some("exact"));
    assert_eq!(target(&t, "a.example.com", "/").as_deref(), Some("wild"));
    assert_eq!(target(&t, "A.Example.Com.", "/").as_deref(), Some("wild"));
    assert_eq!(target(&t, "a.b.example.com", "/").as_deref(), Some("any"));
    assert_eq!(target(&t, ".example.com", "/").as_deref(), Some("any"));
    assert_eq!(target(&t, "other.org", "/").as_deref(), Some("any"));
}

#[test]
fn a_host_with_rules_does_not_fall_through_to_any_host() {
    let t = table(&[("example.com", "/api", PathKind::Prefix, "api"), ("", "/", PathKind::Prefix, "any")]);
    assert_eq!(target(&t, "example.com", "/other"), None);
    let mut b = TableBuilder::new();
    b.add_route("example.com", "/api", PathKind::Prefix, backend("api"), "t").unwrap();
    b.set_default_backend(backend("fallback"), "t");
    let t = b.build(None);
    assert_eq!(target(&t, "example.com", "/other").as_deref(), Some("fallback"));
    assert_eq!(target(&t, "nohost.org", "/").as_deref(), Some("fallback"));
}

#[test]
fn conflicts_keep_the_first_and_duplicates_merge() {
    let mut b = TableBuilder::new();
    let api = backend("api");
    b.add_route("h", "/x", PathKind::Prefix, api.clone(), "first").unwrap();
    b.add_route("h", "/x/", PathKind::Prefix, api, "same").unwrap();
    let err = b.add_route("h", "/x", PathKind::Prefix, backend("other"), "second").unwrap_err();
    assert_eq!(&*err.kept, "first");
    let t = b.build(None);
    assert_eq!(target(&t, "h", "/x").as_deref(), Some("api"));
}

#[test]
fn digest_is_content_and_unchanged_hosts_are_shared() {
    let rules = [("a.com", "/", PathKind::Prefix, "a"), ("b.com", "/", PathKind::Prefix, "b")];
    let t1 = table(&rules);
    let t2 = table(&rules);
    assert_eq!(t1.digest(), t2.digest());

    let mut b = TableBuilder::new();
    b.add_route("a.com", "/", PathKind::Prefix, backend("a"), "x").unwrap();
    b.add_route("b.com", "/", PathKind::Prefix, backend("b2"), "x").unwrap();
    let t3 = b.build(Some(&t1));
    assert_ne!(t1.digest(), t3.digest());
    assert!(Arc::ptr_eq(t1.host_routes("a.com").unwrap(), t3.host_routes("a.com").unwrap()));
    assert!(!Arc::ptr_eq(t1.host_routes("b.com").unwrap(), t3.host_routes("b.com").unwrap()));
}

#[test]
fn normalize_host_handles_ports_and_ipv6() {
    let mut buf = [0u8; 256];
    assert_eq!(normalize_host("Example.COM:443", &mut buf), Some("example.com"));
    assert_eq!(normalize_host("[::1]:8080", &mut buf), Some("[::1]"));
    assert_eq!(normalize_host("", &mut buf), None);
    assert_eq!(normalize_host(&"a".repeat(300), &mut buf), None);
}

#[test]
fn certificate_for_exact_then_wildcard() {
    let mut b = TableBuilder::new();
    let one = CertId([1; 32]);
    let two = CertId([2; 32]);
    b.add_tls_host("example.com", one);
    b.add_tls_host("*.example.com", two);
    let t = b.build(None);
    assert_eq!(t.certificate_for("example.com"), Some(one));
    assert_eq!(t.certificate_for("www.example.com"), Some(two));
    assert_eq!(t.certificate_for("a.b.example.com"), None);
    assert_eq!(t.cert_ids(), vec![one, two]);
}

#[test]
fn any_depth_wildcards_match_more_labels_longest_suffix_first() {
    let t = table(&[
        ("**.example.com", "/", PathKind::Prefix, "deep"),
        ("**.b.example.com", "/", PathKind::Prefix, "deeper"),
        ("*.one.example.com", "/", PathKind::Prefix, "one-label"),
        ("*.ingress.test", "/", PathKind::Prefix, "ingress"),
        ("", "/", PathKind::Prefix, "any"),
    ]);
    for (host, want) in [
        ("a.example.com", "deep"),
        ("a.b.c.example.com", "deep"),
        ("x.b.example.com", "deeper"),
        ("x.y.b.example.com", "deeper"),
        ("b.example.com", "deep"),
        ("x.one.example.com", "one-label"),
        ("x.y.one.example.com", "deep"),
        ("example.com", "any"),
        ("a.ingress.test", "ingress"),
        // An Ingress wildcard stays one label deep.
        ("a.b.ingress.test", "any"),
    ] {
        assert_eq!(target(&t, host, "/").as_deref(), Some(want), "{host}");
    }
    assert_eq!(t.host_group("**.example.com").map(|g| &*g.host), Some("**.example.com"));
    assert_eq!(t.host_count(), 4);
}

#[test]
fn certificates_for_any_depth_wildcards_and_for_any_name() {
    let (deep, exact, any) = (CertId([1; 32]), CertId([2; 32]), CertId([3; 32]));
    let mut b = TableBuilder::new();
    b.add_tls_host("**.example.com", deep);
    b.add_tls_host("shop.example.com", exact);
    let t = b.build(None);
    assert_eq!(t.certificate_for("a.b.example.com"), Some(deep));
    assert_eq!(t.certificate_for("shop.example.com"), Some(exact));
    assert_eq!(t.certificate_for("example.com"), None);
    assert_eq!(t.any_certificate(), None);
    let mut b = TableBuilder::new();
    b.add_tls_host("", any);
    b.add_tls_host("shop.example.com", exact);
    let t = b.build(None);
    assert_eq!(t.certificate_for("other.test"), Some(any));
    assert_eq!(t.certificate_for("shop.example.com"), Some(exact));
    assert_eq!(t.any_certificate(), Some(any));
}

#[test]
fn the_digest_is_taken_over_the_items_the_table_walks() {
    let mut b = TableBuilder::new();
    b.add_route("a.com", "/x", PathKind::Exact, backend("a"), "x").unwrap();
    b.add_route("a.com", "/", PathKind::Prefix, backend("a"), "x").unwrap();
    b.add_route("", "/z", PathKind::Prefix, backend("z"), "x").unwrap();
    b.set_default_backend(backend("d"), "x");
    b.add_tls_host("a.com", CertId([1; 32]));
    b.add_ssl_redirect("a.com", crate::TrailingSlash::Drop);
    let t = b.build(None);
    assert_eq!(t.recompute_digest(), t.digest());
    let kinds: Vec<&str> = t
        .items()
        .iter()
        .map(|i| match i {
            TableItem::Route { .. } => "route",
            TableItem::DefaultBackend(_) => "default",
            TableItem::Tls { .. } => "tls",
            TableItem::HttpsRedirect { .. } => "redirect",
            TableItem::Passthrough { .. } => "passthrough",
            TableItem::ClientAuth { .. } => "client auth",
            TableItem::Hsts(_) => "hsts",
            TableItem::NoTlsRedirect(_) => "no tls redirect",
            TableItem::UnloggedUnmatched => "unlogged unmatched",
            TableItem::PortRoute { .. } => "port",
            TableItem::TlsPortName { .. } => "tls port",
        })
        .collect();
    assert_eq!(kinds, ["route", "route", "route", "default", "tls", "redirect"]);

    // Each kind of item moves the digest on its own.
    let mut b = TableBuilder::new();
    b.add_route("a.com", "/x", PathKind::Exact, backend("a"), "x").unwrap();
    b.add_route("a.com", "/", PathKind::Prefix, backend("a"), "x").unwrap();
    b.add_route("", "/z", PathKind::Prefix, backend("z"), "x").unwrap();
    b.set_default_backend(backend("d"), "x");
    b.add_tls_host("a.com", CertId([1; 32]));
    let without_redirect = b.build(None);
    assert_ne!(without_redirect.digest(), t.digest());
    assert_eq!(without_redirect.recompute_digest(), without_redirect.digest());
}

/// A request as the policy sees it: fields, cookies, method, query.
struct View {
    headers: Vec<(&'static str, &'static str)>,
    method: &'static str,
    query: &'static str,
}

impl RequestView for View {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes())
    }

    fn cookie(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .find_map(|(_, v)| request::cookie_value(v.as_bytes(), name))
    }

    fn method(&self) -> &[u8] {
        self.method.as_bytes()
    }

    fn query(&self) -> &[u8] {
        self.query.as_bytes()
    }

    fn path(&self) -> &[u8] {
        b"/api/v2/orders"
    }
    fn tls(&self) -> bool {
        false
    }
}

fn get(headers: Vec<(&'static str, &'static str)>) -> View {
    View { headers, method: "GET", query: "" }
}

fn routed(policy: RoutePolicy) -> Arc<Route> {
    let mut b = TableBuilder::new();
    b.add_route_with_policy("", "/", PathKind::Prefix, backend("primary"), Some(Arc::new(policy)), "t").unwrap();
    b.build(None).route("h", "/").unwrap().clone()
}

#[test]
fn the_first_rule_whose_conditions_all_hold_decides() {
    let route = routed(RoutePolicy::new(vec![
        Rule::to(
            vec![Condition::Method("POST".into()), Condition::Query { name: "v".into(), value: Matcher::exact("2") }],
            backend("post-v2"),
        ),
        Rule::to(vec![Condition::Cookie { name: "beta".into(), value: Matcher::exact("always") }], backend("beta")),
        Rule::to(
            vec![Condition::Header { name: "x-version".into(), value: Matcher::regex("^v[0-9]+$").unwrap() }],
            backend("versioned"),
        ),
    ]));
    let mut never = || -> u32 { unreachable!("no rule here is split") };
    let mut pick = |view: View| route.pick(&view, &mut never).backend.name.to_string();
    assert_eq!(pick(get(vec![])), "primary");
    assert_eq!(pick(View { headers: vec![], method: "POST", query: "a=1&v=2" }), "post-v2");
    assert_eq!(pick(View { headers: vec![], method: "POST", query: "v=3" }), "primary");
    assert_eq!(pick(View { headers: vec![], method: "GET", query: "v=2" }), "primary");
    assert_eq!(pick(get(vec![("Cookie", "a=b; BETA=always")])), "beta");
    assert_eq!(pick(get(vec![("Cookie", "beta=Always")])), "primary");
    assert_eq!(pick(get(vec![("X-Version", "v12")])), "versioned");
    assert_eq!(pick(get(vec![("X-Version", "12")])), "primary");
    // Unanchored patterns search anywhere, as PCRE does.
    let route = routed(RoutePolicy::new(vec![Rule::to(
        vec![Condition::Header { name: "ua".into(), value: Matcher::regex("bot").unwrap() }],
        backend("bots"),
    )]));
    assert_eq!(route.pick(&get(vec![("ua", "a googlebot/2")]), &mut never).backend.name.as_ref(), "bots");
}

#[test]
fn a_split_follows_the_draw_and_a_sticky_one_the_cookie() {
    let split = |sticky| {
        routed(RoutePolicy::new(vec![Rule::split(
            vec![],
            vec![WeightedBackend::new(backend("canary"), 25), WeightedBackend::new(backend("primary"), 75)],
            100,
            sticky,
        )]))
    };
    let route = split(false);
    // Draws are scaled to 0..100: the lowest quarter goes to the canary.
    for (random, want) in [(0u32, "canary"), (u32::MAX / 4 - 1_000, "canary"), (u32::MAX / 4 + 1_000, "primary")] {
        let pick = route.pick(&get(vec![]), &mut || random);
        assert_eq!(pick.backend.name.as_ref(), want, "{random}");
        assert_eq!(pick.new_sticky, None);
    }
    let route = split(true);
    let pick = route.pick(&get(vec![]), &mut || u32::MAX / 2);
    assert_eq!((pick.backend.name.as_ref(), pick.new_sticky), ("primary", Some(STICKY_RANGE / 2 - 1)));
    let mut never = || -> u32 { unreachable!("a known user draws nothing") };
    for (cookie, want) in
        [("ramjet_canary=0", "canary"), ("ramjet_canary=2499", "canary"), ("ramjet_canary=2500", "primary")]
    {
        let pick = route.pick(&get(vec![("cookie", cookie)]), &mut never);
        assert_eq!((pick.backend.name.as_ref(), pick.new_sticky), (want, None), "{cookie}");
    }
    // A cookie that is not a draw gets a new one.
    let pick = route.pick(&get(vec![("cookie", "ramjet_canary=99999")]), &mut || 0);
    assert_eq!((pick.backend.name.as_ref(), pick.new_sticky), ("canary", Some(0)));
}

#[test]
fn a_policy_is_part_of_the_digest() {
    let plain = table(&[("", "/", PathKind::Prefix, "primary")]);
    let with = |w: u32| {
        let mut b = TableBuilder::new();
        let rules = vec![Rule::split(
            vec![],
            vec![WeightedBackend::new(backend("canary"), w), WeightedBackend::new(backend("primary"), 100 - w)],
            100,
            false,
        )];
        b.add_route_with_policy(
            "",
            "/",
            PathKind::Prefix,
            backend("primary"),
            Some(Arc::new(RoutePolicy::new(rules))),
            "t",
        )
        .unwrap();
        b.build(None)
    };
    assert_ne!(plain.digest(), with(10).digest());
    assert_ne!(with(10).digest(), with(20).digest());
    assert_eq!(with(10).digest(), with(10).digest());
    assert_eq!(with(10).recompute_digest(), with(10).digest());
    // The same key with another policy is a conflict, the same policy merges.
    let mut b = TableBuilder::new();
    let policy = || Some(Arc::new(RoutePolicy::new(vec![Rule::to(vec![], backend("x"))])));
    b.add_route_with_policy("", "/", PathKind::Prefix, backend("primary"), policy(), "a").unwrap();
    b.add_route_with_policy("", "/", PathKind::Prefix, backend("primary"), policy(), "b").unwrap();
    assert!(b.add_route("", "/", PathKind::Prefix, backend("primary"), "c").is_err());
}

/// ingress-nginx's docs (ingress-path-matching.md): regex locations are tried longest path first
/// and the first match wins, case-insensitively, even over a longer literal path.
#[test]
fn regex_paths_match_in_ingress_nginx_order() {
    let t = table(&[
        ("test.com", "/foo/bar", PathKind::Regex, "service1"),
        ("test.com", "/foo/bar/", PathKind::Regex, "service2"),
        ("test.com", "/foo/bar/(.+)", PathKind::Regex, "service3"),
        ("warn.com", "/foo/bar/bar", PathKind::Regex, "literal"),
        ("warn.com", "/foo/bar/[A-Z0-9]{3}", PathKind::Regex, "regex"),
    ]);
    assert_eq!(target(&t, "test.com", "/foo/bar/1").as_deref(), Some("service3"));
    assert_eq!(target(&t, "test.com", "/foo/bar/").as_deref(), Some("service2"));
    assert_eq!(target(&t, "test.com", "/foo/bar").as_deref(), Some("service1"));
    assert_eq!(target(&t, "test.com", "/FOO/BAR?x=1").as_deref(), Some("service1"), "case-insensitive");
    assert_eq!(target(&t, "test.com", "/foo/barbaz").as_deref(), Some("service1"), "^ anchors the start only");
    assert_eq!(target(&t, "test.com", "/x/foo/bar"), None);
    assert_eq!(target(&t, "warn.com", "/foo/bar/bar").as_deref(), Some("regex"), "the documented warning");
}

/// A regex path that cannot be compiled leaves the host's regex paths out and says so.
#[test]
fn a_regex_host_that_does_not_compile_is_reported() {
    let mut b = TableBuilder::new();
    b.add_route("h", "/a(", PathKind::Regex, backend("a"), "ns/bad").unwrap();
    b.add_route("h", "/b", PathKind::Prefix, backend("b"), "ns/good").unwrap();
    let (t, problems) = b.build_checked(None);
    assert_eq!(problems.len(), 1);
    assert_eq!(&*problems[0].sources[0], "ns/bad");
    assert_eq!(target(&t, "h", "/b").as_deref(), Some("b"));
    assert_eq!(target(&t, "h", "/a"), None);
    assert_eq!(t.recompute_digest(), t.digest());
}

fn edits(set: &[(&str, &str)], add: &[(&str, &str)], remove: &[&str]) -> HeaderEdits {
    let pairs = |l: &[(&str, &str)]| l.iter().map(|(n, v)| (Box::from(*n), Box::from(*v))).collect();
    HeaderEdits { set: pairs(set), add: pairs(add), remove: remove.iter().map(|n| Box::from(*n)).collect() }
}

#[test]
fn header_edits_then_later_ones_is_both_in_order() {
    let rule = edits(&[("x-set", "rule"), ("x-keep", "rule")], &[("x-add", "rule"), ("x-gone", "rule")], &["x-drop"]);
    let own = edits(&[("x-set", "own")], &[("x-add", "own")], &["x-gone"]);
    let both = rule.then(&own);
    // What the later edits drop goes, whoever appended it; the rest appends in order.
    assert_eq!(
        both.appended().collect::<Vec<_>>(),
        [("x-keep", "rule"), ("x-set", "own"), ("x-add", "rule"), ("x-add", "own")]
    );
    for name in ["x-set", "x-keep", "x-drop", "x-gone"] {
        assert!(both.drops(name.as_bytes()), "{name}");
    }
    assert!(!both.drops(b"x-add"));
}

#[test]
fn a_backend_with_filters_of_its_own_gets_them_after_the_rule_s() {
    let rule_filters = vec![Filter::RequestHeaders(edits(&[("x-rule", "1")], &[], &[]))];
    let own = [
        Filter::RequestHeaders(edits(&[("x-own", "2")], &[], &[])),
        Filter::ResponseHeaders(edits(&[], &[("x-r", "3")], &[])),
    ];
    let plain = WeightedBackend::new(backend("plain"), 1);
    let tuned = WeightedBackend::new(backend("tuned"), 1).with_own_filters(&rule_filters, &own);
    let rule = Rule::split(vec![], vec![plain, tuned], 2, false).with_filters(rule_filters);
    let (plain, tuned) = (&rule.backends[0], &rule.backends[1]);
    assert_eq!(rule.filters_for(plain), &rule.filters[..]);
    let edits = Edits::of(rule.filters_for(tuned));
    let appended: Vec<_> = edits.request.unwrap().appended().collect();
    assert_eq!(appended, [("x-rule", "1"), ("x-own", "2")]);
    assert_eq!(edits.response.unwrap().appended().collect::<Vec<_>>(), [("x-r", "3")]);
    assert_eq!(rule.pick(1).backend.name.as_ref(), "tuned");
    assert!(rule.to_string().contains("tuned 1/2 [request"), "{rule}");
}

mod every_field;
