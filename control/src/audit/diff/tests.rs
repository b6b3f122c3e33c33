use std::sync::Arc;

use proptest::prelude::*;
use ramjet_shared::{Backend, PathKind, TableBuilder};

use super::*;

/// A generated table: rules (host index, path index, exact, backend index), TLS (host, cert), default.
type Spec = (Vec<(u8, u8, bool, u8)>, Vec<(u8, u8)>, Option<u8>);

fn build(spec: &Spec) -> RouteTable {
    let hosts = ["", "a.com", "b.com", "*.c.com"];
    let paths = ["/", "/x", "/x/y", "/z"];
    let backend = |i: u8| {
        let n = i % 4;
        let addrs = (0..=n).map(|p| format!("127.0.0.1:{}", 9000 + p as u16).parse().unwrap()).collect();
        Arc::new(Backend::endpoints(&format!("b{}", i % 3), 0, addrs))
    };
    let mut b = TableBuilder::new();
    for (h, p, exact, be) in &spec.0 {
        let kind = if *exact { PathKind::Exact } else { PathKind::Prefix };
        let _ = b.add_route(hosts[*h as usize % 4], paths[*p as usize % 4], kind, backend(*be), "t");
    }
    for (h, c) in &spec.1 {
        b.add_tls_host(["a.com", "b.com", "*.c.com"][*h as usize % 3], CertId([*c % 3; 32]));
    }
    if let Some(d) = spec.2 {
        b.set_default_backend(backend(d), "t");
    }
    b.build(None)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<bool>(), any::<u8>()), 0..12),
        prop::collection::vec((any::<u8>(), any::<u8>()), 0..4),
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

    #[test]
    fn compiling_the_same_rules_twice_gives_the_same_digest(a in spec()) {
        prop_assert_eq!(build(&a).digest(), build(&a).digest());
    }
}

#[test]
fn sentence_counts_what_changed() {
    let old = build(&(vec![(1, 0, false, 0), (1, 1, false, 0)], vec![(0, 1)], None));
    let new = build(&(vec![(1, 0, false, 1), (2, 1, false, 0), (2, 2, true, 0)], vec![(0, 2)], Some(0)));
    let d = diff(&TableView::of(&old), &TableView::of(&new));
    assert_eq!(
        d.sentence(),
        "2 routes added, 1 route removed, 1 backend changed, 1 host added, 1 cert rotated, default backend now b0"
    );
    assert_eq!(diff(&TableView::of(&old), &TableView::of(&old)).sentence(), "no route changes");
}
