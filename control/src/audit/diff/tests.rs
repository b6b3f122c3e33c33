use std::sync::Arc;

use proptest::prelude::*;
use ramjet_shared::{Backend, Filter, Mirror, PathKind, RoutePolicy, Rule, TableBuilder, TlsTarget, WeightedBackend};

use super::*;

/// A generated table: rules (host, path, exact, backend), TLS (host, cert), HTTPS redirects (host),
/// default backend. Backends are indexes: see [`backend`].
type Spec = (Vec<(u8, u8, bool, u8)>, Vec<(u8, u8)>, Vec<u8>, Option<u8>);

const HOSTS: [&str; 4] = ["", "a.com", "b.com", "*.c.com"];
const NAMED_HOSTS: [&str; 3] = ["a.com", "b.com", "*.c.com"];

/// Backend `i`: one of three names, with one to four endpoints or (every fifth) a direct response
/// whose status and body vary — so the same name can come with other content, as after an edit.
fn backend(i: u8) -> Arc<Backend> {
    let name = format!("b{}", i % 3);
    if i % 5 == 4 {
        let status = [200, 503][usize::from(i) % 2];
        return Arc::new(Backend::respond(&name, 0, status, format!("body {}", i % 7)));
    }
    let addrs = (0..=i % 4).map(|p| format!("127.0.0.1:{}", 9000 + p as u16).parse().unwrap()).collect();
    Arc::new(Backend::endpoints(&name, 0, addrs))
}

fn builder(spec: &Spec) -> TableBuilder {
    let paths = ["/", "/x", "/x/y", "/z"];
    let mut b = TableBuilder::new();
    for (h, p, exact, be) in &spec.0 {
        let kind = if *exact { PathKind::Exact } else { PathKind::Prefix };
        let policy = policy(*be);
        let _ =
            b.add_route_with_policy(HOSTS[*h as usize % 4], paths[*p as usize % 4], kind, backend(*be), policy, "t");
    }
    for (h, c) in &spec.1 {
        b.add_tls_host(NAMED_HOSTS[*h as usize % 3], CertId([*c % 3; 32]));
    }
    for h in &spec.2 {
        b.add_ssl_redirect(NAMED_HOSTS[*h as usize % 3], ramjet_shared::TrailingSlash::Drop);
    }
    if let Some(d) = spec.3 {
        b.set_default_backend(backend(d), "t");
    }
    b
}

/// The policy a generated route gets from its backend byte's top bits: none (most), a mirror, a
/// canary split, or both.
fn policy(be: u8) -> Option<Arc<RoutePolicy>> {
    let mirror = || {
        Filter::Mirror(Mirror {
            backend: backend(be >> 1),
            percent: 50 + be % 2 * 50,
            body: true,
            host: None,
            path: None,
        })
    };
    let split = || {
        let weight = u32::from(be % 4) * 10;
        Rule::split(
            vec![],
            vec![
                WeightedBackend::new(backend(be.wrapping_add(1)), weight),
                WeightedBackend::new(backend(be), 100 - weight),
            ],
            100,
            false,
        )
    };
    let rules = match be >> 5 {
        5 => vec![Rule::to(vec![], backend(be)).with_filters(vec![mirror()])],
        6 => vec![split()],
        7 => vec![split().with_filters(vec![mirror()])],
        _ => return None,
    };
    Some(Arc::new(RoutePolicy::new(rules)))
}

fn build(spec: &Spec) -> RouteTable {
    builder(spec).build(None)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<bool>(), any::<u8>()), 0..12),
        prop::collection::vec((any::<u8>(), any::<u8>()), 0..4),
        prop::collection::vec(any::<u8>(), 0..3),
        prop::option::of(any::<u8>()),
    )
}

proptest! {
    #[test]
    fn applying_the_diff_gives_the_new_table(a in spec(), b in spec()) {
        let (old, new) = (TableView::of(&build(&a)), TableView::of(&build(&b)));
        let d = diff(&old, &new);
        prop_assert_eq!(d.apply(&old), new.clone());
        prop_assert_eq!(d.is_empty(), old == new);
        // The applier's diff over changed parts only is the same diff.
        prop_assert_eq!(diff_tables(&build(&a), &build(&b)), d);
    }

    /// A pin's diff looks only at the groups that changed at each step between two generations,
    /// and it is the whole diff.
    #[test]
    fn the_diff_among_the_groups_changed_at_each_step_is_the_whole_diff(a in spec(), b in spec(), c in spec()) {
        let tables = [build(&a), build(&b), build(&c)];
        let step = |i: usize| TableView::changed_hosts(&tables[i], &tables[i + 1]);
        let changed: Vec<Arc<str>> = step(0).into_iter().chain(step(1)).collect();
        let among = diff_tables_among(&tables[0], &tables[2], changed.iter().map(|h| &**h));
        prop_assert_eq!(&among, &diff_tables(&tables[0], &tables[2]));
        let back = diff_tables_among(&tables[2], &tables[0], changed.iter().map(|h| &**h));
        prop_assert_eq!(back, diff_tables(&tables[2], &tables[0]));
    }

    /// The diff and the digest see the same table: a new digest always comes with a non-empty
    /// diff, and the same digest with an empty one.
    #[test]
    fn a_different_digest_always_gives_a_non_empty_diff(a in spec(), b in spec()) {
        let (old, new) = (build(&a), builder(&b).build(Some(&build(&a))));
        let d = diff_tables(&old, &new);
        prop_assert_eq!(old.digest() != new.digest(), !d.is_empty(), "{}", d.sentence());
        prop_assert_eq!(d.sentence() == "no route changes", d.is_empty());
    }

    #[test]
    fn compiling_the_same_rules_twice_gives_the_same_digest(a in spec(), b in spec()) {
        let table = build(&a);
        prop_assert_eq!(table.digest(), build(&a).digest());
        // Built on top of another table (sharing its unchanged hosts): still the same digest.
        prop_assert_eq!(builder(&a).build(Some(&build(&b))).digest(), table.digest());
        // And the digest is the one the item walk gives.
        prop_assert_eq!(table.recompute_digest(), table.digest());
    }
}

fn one_host(backend: Arc<Backend>) -> TableBuilder {
    let mut b = TableBuilder::new();
    b.add_route("a.com", "/", PathKind::Prefix, backend, "t").unwrap();
    b
}

#[test]
fn sentence_counts_what_changed() {
    let old = build(&(vec![(1, 0, false, 0), (1, 1, false, 0)], vec![(0, 1)], vec![], None));
    let new = build(&(vec![(1, 0, false, 1), (2, 1, false, 0), (2, 2, true, 0)], vec![(0, 2)], vec![1], Some(0)));
    let d = diff(&TableView::of(&old), &TableView::of(&new));
    assert_eq!(
        d.sentence(),
        "2 routes added, 1 route removed, 1 backend changed, 1 host added, 1 cert rotated, 1 HTTPS redirect added, \
         default backend now b0"
    );
    assert_eq!(diff(&TableView::of(&old), &TableView::of(&old)).sentence(), "no route changes");
}

/// The three changes that used to say "no route changes".
#[test]
fn a_changed_direct_response_is_a_changed_backend() {
    let old = one_host(Arc::new(Backend::respond("page", 0, 200, "old text"))).build(None);
    let new = one_host(Arc::new(Backend::respond("page", 0, 200, "new text"))).build(Some(&old));
    let d = diff_tables(&old, &new);
    assert_eq!(d.sentence(), "1 backend changed");
    let target = &d.backends_changed["a.com/"];
    assert_eq!(target.response.as_ref().map(|r| (r.status, r.body_bytes)), Some((200, 8)));

    let status = one_host(Arc::new(Backend::respond("page", 0, 503, "new text"))).build(Some(&new));
    assert_eq!(diff_tables(&new, &status).sentence(), "1 backend changed");
}

#[test]
fn an_https_redirect_added_or_removed_is_counted() {
    let plain = one_host(backend(0)).build(None);
    let mut b = one_host(backend(0));
    b.add_ssl_redirect("a.com", ramjet_shared::TrailingSlash::Drop);
    let redirecting = b.build(Some(&plain));
    let d = diff_tables(&plain, &redirecting);
    assert_eq!(d.sentence(), "1 HTTPS redirect added");
    assert_eq!(d.https_redirects_added, ["a.com"]);
    assert_eq!(diff_tables(&redirecting, &plain).sentence(), "1 HTTPS redirect removed");
}

#[test]
fn a_passthrough_added_moved_or_removed_is_counted_and_changes_the_digest() {
    let plain = one_host(backend(0)).build(None);
    let passing = |be: u8| {
        let mut b = one_host(backend(0));
        assert!(b.add_passthrough("Secure.com", TlsTarget::passthrough(backend(be), "ns/secure")));
        let other = TlsTarget::passthrough(backend(2), "ns/other");
        assert!(!b.add_passthrough("secure.com", other), "the first backend for a name stays");
        b.build(Some(&plain))
    };
    let (one, other) = (passing(0), passing(1));
    assert_ne!(plain.digest(), one.digest());
    assert_ne!(one.digest(), other.digest());
    assert_eq!(one.recompute_digest(), one.digest());
    let d = diff_tables(&plain, &one);
    assert_eq!(d.sentence(), "1 TLS passthrough changed");
    assert_eq!(d.passthrough_added.keys().collect::<Vec<_>>(), ["secure.com"]);
    assert!(diff_tables(&one, &other).passthrough_added["secure.com"].starts_with("passed through to b1 "));
    assert_eq!(diff_tables(&one, &plain).passthrough_removed, ["secure.com"]);
    let target = one.passthrough("SECURE.com:443").unwrap();
    assert_eq!(&*target.route.rule.backends[0].backend.name, "b0");
    assert!(plain.passthrough("secure.com").is_none() && !plain.has_passthrough());
}

#[test]
fn new_endpoints_behind_the_default_backend_change_the_default_backend() {
    let with = |n: u16| {
        let addrs = (0..n).map(|p| format!("127.0.0.1:{}", 9000 + p).parse().unwrap()).collect();
        let mut b = TableBuilder::new();
        b.set_default_backend(Arc::new(Backend::endpoints("default/web:80", 0, addrs)), "t");
        b.build(None)
    };
    let d = diff_tables(&with(1), &with(2));
    assert_eq!(d.sentence(), "default backend default/web:80 changed");
    assert!(d.counts().default_backend_changed);
    assert_eq!(d.default_backend.unwrap().unwrap().endpoints, ["127.0.0.1:9000", "127.0.0.1:9001"]);
    assert_eq!(diff_tables(&with(1), &RouteTable::default()).sentence(), "default backend removed");
}

fn with_policy(rules: Vec<Rule>) -> RouteTable {
    let mut b = TableBuilder::new();
    b.add_route_with_policy("a.com", "/", PathKind::Prefix, backend(0), Some(Arc::new(RoutePolicy::new(rules))), "t")
        .unwrap();
    b.build(None)
}

fn mirror_to(i: u8, percent: u8) -> Filter {
    Filter::Mirror(Mirror { backend: backend(i), percent, body: true, host: None, path: None })
}

#[test]
fn mirrors_added_and_removed_are_counted_by_route() {
    let plain = one_host(backend(0)).build(None);
    let mirrored = with_policy(vec![Rule::to(vec![], backend(0)).with_filters(vec![mirror_to(1, 100)])]);
    let d = diff_tables(&plain, &mirrored);
    assert_eq!(d.sentence(), "1 mirror added");
    assert_eq!(d.mirrors_added, ["a.com/ -> b1 100%"]);
    assert_eq!(diff_tables(&mirrored, &plain).sentence(), "1 mirror removed");
    // Another share is another mirror: one removed, one added, no backend change.
    let half = with_policy(vec![Rule::to(vec![], backend(0)).with_filters(vec![mirror_to(1, 50)])]);
    assert_eq!(diff_tables(&mirrored, &half).sentence(), "1 mirror added, 1 mirror removed");
    // A new route with a mirror, and a removed one.
    let mut b = one_host(backend(0));
    let policy = RoutePolicy::new(vec![Rule::to(vec![], backend(2)).with_filters(vec![mirror_to(1, 100)])]);
    b.add_route_with_policy("b.com", "/", PathKind::Prefix, backend(2), Some(Arc::new(policy)), "t").unwrap();
    let two = b.build(None);
    assert_eq!(diff_tables(&plain, &two).sentence(), "1 route added, 1 host added, 1 mirror added");
    assert_eq!(diff_tables(&two, &plain).sentence(), "1 route removed, 1 host removed, 1 mirror removed");
}

#[test]
fn a_canary_weight_that_moves_is_a_changed_backend() {
    let split = |w: u32| {
        with_policy(vec![Rule::split(
            vec![],
            vec![WeightedBackend::new(backend(1), w), WeightedBackend::new(backend(0), 100 - w)],
            100,
            false,
        )])
    };
    let (ten, twenty) = (split(10), split(20));
    assert_ne!(ten.digest(), twenty.digest());
    let d = diff_tables(&ten, &twenty);
    assert_eq!(d.sentence(), "1 backend changed");
    assert_eq!(d.backends_changed["a.com/"].rules, ["always -> b1 20/100, b0 80/100"]);
    // New endpoints behind the canary alone change the route too.
    let moved = with_policy(vec![Rule::split(
        vec![],
        vec![WeightedBackend::new(backend(4 + 3), 10), WeightedBackend::new(backend(0), 90)],
        100,
        false,
    )]);
    assert_eq!(diff_tables(&ten, &moved).sentence(), "1 backend changed");
    assert_eq!(diff_tables(&ten, &split(10)).sentence(), "no route changes");
}
