//! Regex paths: ingress-nginx's `use-regex` host, where every path is a case-insensitive regular
//! expression location (`location ~* "^<path>"`) and the first one that matches, in ingress-nginx's
//! order (longest path first, then the greater path), takes the request.
//!
//! All the host's patterns are compiled into one DFA that reports every pattern matching the path;
//! the lowest-numbered one (the first in order) wins. A lookup is one pass over the path's bytes,
//! whatever the number of patterns, with no cache, no lock and no allocation.

use std::sync::Arc;

use regex_automata::dfa::dense::{self, DFA};
use regex_automata::dfa::{Automaton, OverlappingState};
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind};

use super::Route;

/// Largest DFA one host's regex paths may compile to.
const DFA_LIMIT: usize = 64 << 20;

/// A regex host's locations, in match order.
#[derive(Debug)]
pub(crate) struct RegexPaths {
    dfa: DFA<Vec<u32>>,
    routes: Box<[Arc<Route>]>,
}

fn syntax_config() -> syntax::Config {
    syntax::Config::new().unicode(false).utf8(false).case_insensitive(true)
}

/// The pattern nginx compiles for a location path: `^` and the path as written.
fn location_pattern(path: &str) -> String {
    format!("^{path}")
}

/// Whether `path` compiles as a regex location (syntax only; the host's combined automaton is
/// built with the table).
pub fn check_regex_path(path: &str) -> Result<(), String> {
    syntax::parse_with(&location_pattern(path), &syntax_config())
        .map(drop)
        .map_err(|e| format!("`{path}` is not a usable regular expression: {e}"))
}

/// ingress-nginx's location order: longer paths first, equal lengths by the greater path.
pub(crate) fn location_order(a: &str, b: &str) -> std::cmp::Ordering {
    b.len().cmp(&a.len()).then_with(|| b.cmp(a))
}

impl RegexPaths {
    /// `locations` are in match order ([`location_order`]).
    pub(crate) fn build(locations: &[(Arc<str>, Arc<Route>)]) -> Result<Self, String> {
        let patterns: Vec<String> = locations.iter().map(|(p, _)| location_pattern(p)).collect();
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .dfa_size_limit(Some(DFA_LIMIT))
                    .determinize_size_limit(Some(DFA_LIMIT)),
            )
            .syntax(syntax_config())
            .build_many(&patterns)
            .map_err(|e| format!("the host's regex paths do not compile together: {e}"))?;
        Ok(RegexPaths { dfa, routes: locations.iter().map(|(_, r)| r.clone()).collect() })
    }

    /// The first location (in order) whose pattern matches `path`.
    #[inline]
    pub(crate) fn find(&self, path: &str) -> Option<&Arc<Route>> {
        let input = Input::new(path);
        let mut state = OverlappingState::start();
        let mut best = usize::MAX;
        loop {
            if self.dfa.try_search_overlapping_fwd(&input, &mut state).is_err() {
                break;
            }
            match state.get_match() {
                Some(m) => best = best.min(m.pattern().as_usize()),
                None => break,
            }
            if best == 0 {
                break;
            }
        }
        self.routes.get(best)
    }
}
