//! Rewriting the path a request is sent upstream with (or redirected to).
//!
//! [`PathRewrite::Full`] and [`PathRewrite::Prefix`] are Gateway API's `ReplaceFullPath` and
//! `ReplacePrefixMatch` (URLRewrite and RequestRedirect filters).
//!
//! [`PathRewrite::Regex`] is ingress-nginx's `rewrite-target`: nginx's `rewrite "(?i)<path>"
//! <target> break;` — the route's path regex searched case-insensitively in the request path and,
//! when it matches, the whole path replaced by the target with `$1`…`$9` taken from the captures.
//! The query string is kept (nginx appends the arguments). Capturing needs scratch memory: each
//! worker keeps one [`RewriteScratch`] and reuses it, so a rewrite allocates nothing once warm.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use regex_automata::nfa::thompson::{self, pikevm::PikeVM};
use regex_automata::util::primitives::NonMaxUsize;
use regex_automata::util::syntax;
use regex_automata::Input;

/// How the path sent upstream is made from the request's.
#[derive(Clone, serde::Serialize)]
pub enum PathRewrite {
    /// ingress-nginx's `rewrite-target` on a regex path.
    Regex(RegexRewrite),
    /// The whole path becomes this (`ReplaceFullPath`).
    Full(Box<str>),
    /// The `matched` prefix (without a trailing `/`, `""` for the root) becomes `with`
    /// (`ReplacePrefixMatch`); the rest of the path is kept, with one `/` between the two.
    Prefix { matched: Box<str>, with: Box<str> },
}

impl PathRewrite {
    /// `rewrite-target` `template` for the route path (a regular expression) `pattern`. The
    /// template must start with `/`; `$1`…`$9` name captures, any other `$` (an nginx variable) is
    /// refused.
    pub fn regex(pattern: &str, template: &str) -> Result<Self, String> {
        RegexRewrite::new(pattern, template).map(PathRewrite::Regex)
    }

    /// Writes the rewritten path (without the query) into `scratch.path`; `false` when the path
    /// does not match and is sent as it is (only a regex can fail to match).
    #[inline]
    pub fn apply(&self, path: &[u8], scratch: &mut RewriteScratch) -> bool {
        match self {
            PathRewrite::Regex(r) => r.apply(path, scratch),
            PathRewrite::Full(p) => {
                scratch.path.clear();
                scratch.path.extend_from_slice(p.as_bytes());
                true
            }
            PathRewrite::Prefix { matched, with } => {
                let out = &mut scratch.path;
                out.clear();
                let rest = path.get(matched.len()..).unwrap_or(b"");
                let with = with.as_bytes();
                out.extend_from_slice(with.strip_suffix(b"/").unwrap_or(with));
                if !rest.is_empty() && rest[0] != b'/' {
                    out.push(b'/');
                }
                out.extend_from_slice(rest);
                if out.is_empty() {
                    out.push(b'/');
                }
                true
            }
        }
    }

    /// Appends the rewritten `path` (or `path` itself when a regex does not match) to `out`.
    pub fn append(&self, path: &[u8], scratch: &mut RewriteScratch, out: &mut Vec<u8>) {
        if self.apply(path, scratch) {
            out.extend_from_slice(&scratch.path);
        } else {
            out.extend_from_slice(path);
        }
    }
}

impl PartialEq for PathRewrite {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PathRewrite::Regex(a), PathRewrite::Regex(b)) => a.pattern == b.pattern && a.template == b.template,
            (PathRewrite::Full(a), PathRewrite::Full(b)) => a == b,
            (PathRewrite::Prefix { matched: m1, with: w1 }, PathRewrite::Prefix { matched: m2, with: w2 }) => {
                m1 == m2 && w1 == w2
            }
            _ => false,
        }
    }
}

impl Eq for PathRewrite {}

impl fmt::Debug for PathRewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for PathRewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathRewrite::Regex(r) => write!(f, "rewrite ~* {} to {}", r.pattern, r.template),
            PathRewrite::Full(p) => write!(f, "path {p}"),
            PathRewrite::Prefix { matched, with } => write!(f, "prefix {matched}/ -> {with}"),
        }
    }
}

/// One piece of a rewrite target.
#[derive(Clone, Debug)]
enum Part {
    Literal(Box<[u8]>),
    /// `$n`: capture group n (1–9); empty when the group did not take part.
    Group(usize),
}

/// A compiled `rewrite-target`: the pattern and the template say all it does; the rest is
/// compiled from them.
#[derive(Clone, serde::Serialize)]
pub struct RegexRewrite {
    pattern: Box<str>,
    template: Box<str>,
    /// Parsed from `template`.
    #[serde(skip)]
    parts: Box<[Part]>,
    /// Compiled from `pattern`.
    #[serde(skip)]
    vm: PikeVM,
    /// Names this regex for the worker's scratch (which must be reset for another regex): a
    /// number this process drew, different in every compile.
    #[serde(skip)]
    id: u64,
}

/// Rewrite targets ingress-nginx accepts (`RegexPathWithCapture`): path characters and `$`.
fn valid_template_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b':' | b'$')
}

impl RegexRewrite {
    /// The route path the rewrite matches, a regular expression matched case-insensitively.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    fn new(pattern: &str, template: &str) -> Result<Self, String> {
        if !template.starts_with('/') {
            return Err(format!("rewrite target `{template}` must be a path starting with `/`"));
        }
        if let Some(b) = template.bytes().find(|b| !valid_template_byte(*b)) {
            return Err(format!(
                "rewrite target `{template}` has `{}`: only letters, digits, `-._~/:` and `$1`…`$9` are allowed",
                b as char
            ));
        }
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut bytes = template.bytes().peekable();
        while let Some(b) = bytes.next() {
            if b != b'$' {
                literal.push(b);
                continue;
            }
            match bytes.next() {
                Some(d @ b'1'..=b'9') => {
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal).into_boxed_slice()));
                    }
                    parts.push(Part::Group((d - b'0') as usize));
                }
                _ => {
                    return Err(format!(
                        "rewrite target `{template}`: only `$1`…`$9` (captures) are supported after `$`, not nginx \
                         variables"
                    ))
                }
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal.into_boxed_slice()));
        }
        let vm = PikeVM::builder()
            .syntax(syntax::Config::new().unicode(false).utf8(false).case_insensitive(true))
            .thompson(thompson::Config::new().utf8(false))
            .build(pattern)
            .map_err(|e| format!("`{pattern}` is not a usable regular expression: {e}"))?;
        static IDS: AtomicU64 = AtomicU64::new(1);
        Ok(RegexRewrite {
            pattern: pattern.into(),
            template: template.into(),
            parts: parts.into_boxed_slice(),
            vm,
            id: IDS.fetch_add(1, Ordering::Relaxed),
        })
    }

    fn apply(&self, path: &[u8], scratch: &mut RewriteScratch) -> bool {
        let cache = match &mut scratch.cache {
            Some((id, cache)) if *id == self.id => cache,
            slot => {
                match slot {
                    Some((id, cache)) => {
                        cache.reset(&self.vm);
                        *id = self.id;
                    }
                    None => *slot = Some((self.id, self.vm.create_cache())),
                }
                &mut slot.as_mut().expect("set above").1
            }
        };
        let mut slots = [None::<NonMaxUsize>; 20];
        if self.vm.search_slots(cache, &Input::new(path), &mut slots).is_none() {
            return false;
        }
        let out = &mut scratch.path;
        out.clear();
        for part in self.parts.iter() {
            match part {
                Part::Literal(bytes) => out.extend_from_slice(bytes),
                Part::Group(n) => {
                    if let (Some(Some(start)), Some(Some(end))) = (slots.get(n * 2), slots.get(n * 2 + 1)) {
                        out.extend_from_slice(&path[start.get()..end.get()]);
                    }
                }
            }
        }
        true
    }
}

/// A worker's reusable memory for rewrites: the regex engine's cache (for the regex used last)
/// and the rewritten path.
#[derive(Default)]
pub struct RewriteScratch {
    cache: Option<(u64, thompson::pikevm::Cache)>,
    pub path: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(pattern: &str, template: &str, path: &str) -> Option<String> {
        let mut scratch = RewriteScratch::default();
        let r = PathRewrite::regex(pattern, template).unwrap();
        r.apply(path.as_bytes(), &mut scratch).then(|| String::from_utf8(scratch.path).unwrap())
    }

    #[test]
    fn captures_fill_the_target_as_in_ingress_nginx_rewrite_example() {
        // docs/examples/rewrite: `/something(/|$)(.*)` with `/$2`.
        assert_eq!(rewrite("/something(/|$)(.*)", "/$2", "/something").as_deref(), Some("/"));
        assert_eq!(rewrite("/something(/|$)(.*)", "/$2", "/something/").as_deref(), Some("/"));
        assert_eq!(rewrite("/something(/|$)(.*)", "/$2", "/something/new").as_deref(), Some("/new"));
        assert_eq!(rewrite("/foo/bar/(.+)", "/new/backend/$1", "/FOO/bar/bar").as_deref(), Some("/new/backend/bar"));
        // A group that does not exist or took no part is empty.
        assert_eq!(rewrite("/a(x)?", "/b$1$7", "/a").as_deref(), Some("/b"));
        assert_eq!(rewrite("/a", "/b", "/c"), None);
    }

    fn prefix(matched: &str, with: &str, path: &str) -> String {
        let mut out = Vec::new();
        PathRewrite::Prefix { matched: matched.into(), with: with.into() }.append(
            path.as_bytes(),
            &mut RewriteScratch::default(),
            &mut out,
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn prefix_rewrites_keep_the_rest_of_the_path() {
        assert_eq!(prefix("/prefix/one", "/one", "/prefix/one/two"), "/one/two");
        assert_eq!(prefix("/prefix/one", "/one", "/prefix/one"), "/one");
        assert_eq!(prefix("/strip-prefix", "/", "/strip-prefix/three"), "/three");
        assert_eq!(prefix("/strip-prefix", "/", "/strip-prefix"), "/");
        assert_eq!(prefix("/strip-prefix", "/", "/strip-prefix/"), "/");
        assert_eq!(prefix("", "/api", "/v1/x"), "/api/v1/x");
        assert_eq!(prefix("/a", "/b/", "/a/c"), "/b/c");
    }

    #[test]
    fn full_and_prefix_rewrites_share_the_scratch_with_regexes() {
        let mut scratch = RewriteScratch::default();
        let regex = PathRewrite::regex("/a/(.*)", "/$1").unwrap();
        let full = PathRewrite::Full("/moved".into());
        assert!(regex.apply(b"/a/x", &mut scratch));
        assert!(full.apply(b"/anything", &mut scratch));
        assert_eq!(scratch.path, b"/moved");
        assert!(regex.apply(b"/a/y", &mut scratch));
        assert_eq!(scratch.path, b"/y");
        assert_ne!(full, regex);
    }

    #[test]
    fn one_scratch_serves_several_regexes() {
        let mut scratch = RewriteScratch::default();
        let a = PathRewrite::regex("/a/(.*)", "/$1").unwrap();
        let b = PathRewrite::regex("/b/(.*)/(.*)", "/$2/$1").unwrap();
        for _ in 0..3 {
            assert!(a.apply(b"/a/x", &mut scratch));
            assert_eq!(scratch.path, b"/x");
            assert!(b.apply(b"/b/x/y", &mut scratch));
            assert_eq!(scratch.path, b"/y/x");
        }
    }

    #[test]
    fn targets_ramjet_cannot_reproduce_are_refused() {
        assert!(PathRewrite::regex("/a", "/$uri").is_err());
        assert!(PathRewrite::regex("/a", "a/b").is_err());
        assert!(PathRewrite::regex("/a", "/a?b=1").is_err());
        assert!(PathRewrite::regex("/a(", "/b").is_err());
        assert!(PathRewrite::regex("/(?=a)", "/b").is_err());
    }
}
