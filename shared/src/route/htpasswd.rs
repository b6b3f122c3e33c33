//! ingress-nginx's basic authentication (`auth-type: basic` with `auth-secret`): an htpasswd file
//! checked with nginx's `auth_basic_user_file` semantics, and the `Authorization: Basic` header
//! decoded as nginx does.
//!
//! nginx compares the crypt output string with the file's hash; here each hash is parsed once, when
//! the configuration is compiled, so a hash nginx could never match is a warning then rather than a
//! refusal on every request. The schemes are those of ingress-nginx's Alpine image: nginx's own
//! `$apr1$`, `{PLAIN}`, `{SHA}` and `{SSHA}`, then musl's crypt(3) — traditional and BSDi extended
//! DES, `$1$` MD5-crypt, `$5$`/`$6$` SHA-crypt and `$2a$`/`$2b$`/`$2y$` bcrypt, with musl's limits.
//! As in nginx (which hands crypt(3) a C string), a password stops at its first NUL byte.

use std::collections::BTreeMap;
use std::fmt;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, NO_PAD, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A set of users and their password hashes, from an htpasswd file or a map of user -> hash.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
pub struct Htpasswd {
    /// `None`: the user's first line was unusable. nginx stops at the first line naming the user
    /// and refuses it, so a later line for the same user must not let it in.
    users: BTreeMap<Box<[u8]>, Option<Entry>>,
}

#[derive(Clone, PartialEq, Eq, serde::Serialize)]
struct Entry {
    /// The hash as written.
    text: Box<str>,
    /// Parsed from `text`, which says all it does.
    #[serde(skip)]
    scheme: Scheme,
}

/// A parsed hash: its parameters, and the digest in the form the comparison uses.
#[derive(Clone, PartialEq, Eq)]
enum Scheme {
    /// `{PLAIN}password`, kept as the password's SHA-256 so that comparing takes the same time
    /// whatever the lengths.
    Plain(Box<[u8; 32]>),
    /// `{SHA}` base64(SHA-1(password)).
    Sha(Box<[u8; 20]>),
    /// `{SSHA}` base64(SHA-1(password + salt) + salt).
    Ssha { digest: Box<[u8; 20]>, salt: Box<[u8]> },
    /// `$1$salt$…` (musl) and `$apr1$salt$…` (nginx): the same algorithm, the magic string being
    /// part of its input. `checksum` is the 22 characters after the salt.
    Md5Crypt { apr1: bool, salt: Box<[u8]>, checksum: Box<[u8; 22]> },
    /// `$5$[rounds=N$]salt$…` and `$6$…`; `checksum` is the 43 or 86 characters after the salt.
    ShaCrypt { sha512: bool, rounds: u32, salt: Box<[u8]>, checksum: Box<[u8]> },
    /// `$2a$`, `$2b$`, `$2y$`: cost, salt and the 23 bytes of digest bcrypt's output string carries.
    Bcrypt { cost: u32, salt: Box<[u8; 16]>, digest: Box<[u8; 23]> },
    /// Two characters of salt then 11 of checksum; `salt` is the 12-bit value musl reads from them.
    Des { salt: u32, checksum: [u8; 11] },
    /// `_` + 4 characters of iteration count + 4 of salt + 11 of checksum.
    BsdiDes { count: u32, salt: u32, checksum: [u8; 11] },
}

impl Scheme {
    fn name(&self) -> &'static str {
        match self {
            Scheme::Plain(_) => "plain",
            Scheme::Sha(_) => "sha",
            Scheme::Ssha { .. } => "ssha",
            Scheme::Md5Crypt { apr1: true, .. } => "apr1",
            Scheme::Md5Crypt { apr1: false, .. } => "md5-crypt",
            Scheme::ShaCrypt { sha512: false, .. } => "sha256-crypt",
            Scheme::ShaCrypt { sha512: true, .. } => "sha512-crypt",
            Scheme::Bcrypt { .. } => "bcrypt",
            Scheme::Des { .. } => "des-crypt",
            Scheme::BsdiDes { .. } => "bsdi-crypt",
        }
    }

    /// Whether `password` (already cut at its first NUL) hashes to this.
    fn check(&self, password: &[u8]) -> bool {
        match self {
            Scheme::Plain(digest) => ct_eq(&Sha256::digest(password), &digest[..]),
            Scheme::Sha(digest) => ct_eq(&Sha1::digest(password), &digest[..]),
            Scheme::Ssha { digest, salt } => {
                ct_eq(&Sha1::new().chain_update(password).chain_update(salt).finalize(), &digest[..])
            }
            Scheme::Md5Crypt { apr1, salt, checksum } => {
                let magic: &[u8] = if *apr1 { b"$apr1$" } else { b"$1$" };
                // musl refuses longer keys (a DoS guard); nginx's own apr1 has no limit.
                (*apr1 || password.len() <= 30_000) && ct_eq(&md5_crypt(password, magic, salt), &checksum[..])
            }
            Scheme::ShaCrypt { sha512, rounds, salt, checksum } => {
                // musl's limit on the key, against the cost growing with its square.
                if password.len() > 256 {
                    return false;
                }
                let rounds = *rounds as usize;
                let computed = if *sha512 {
                    sha_crypt::Sha512Params::new(rounds)
                        .ok()
                        .and_then(|p| sha_crypt::sha512_crypt_b64(password, salt, &p).ok())
                } else {
                    sha_crypt::Sha256Params::new(rounds)
                        .ok()
                        .and_then(|p| sha_crypt::sha256_crypt_b64(password, salt, &p).ok())
                };
                computed.is_some_and(|c| ct_eq(c.as_bytes(), checksum))
            }
            Scheme::Bcrypt { cost, salt, digest } => {
                // crypt_blowfish's key: the C string with its NUL, cut at 72 bytes.
                let mut key = [0u8; 72];
                let n = password.len().min(72);
                key[..n].copy_from_slice(&password[..n]);
                ct_eq(&bcrypt::bcrypt(*cost, **salt, &key[..(n + 1).min(72)])[..23], &digest[..])
            }
            Scheme::Des { salt, checksum } => ct_eq(&des::crypt(password, *salt), checksum),
            Scheme::BsdiDes { count, salt, checksum } => ct_eq(&des::bsdi_crypt(password, *count, *salt), checksum),
        }
    }
}

impl Htpasswd {
    /// Parses an htpasswd file. Lines it cannot use (no `:`, an unknown or malformed hash scheme) are
    /// skipped and each gives a warning naming the line number and the user; a warning never
    /// includes the hash itself.
    ///
    /// As nginx reads the file: `#` lines and empty lines are ignored, lines end with LF or CRLF,
    /// and the hash ends at the next `:` (what follows is a comment). A user's first line decides
    /// for it: a later line for the same user is ignored (with a warning), even when the first
    /// was unusable, as nginx stops at the first line naming the user.
    pub fn parse(text: &str) -> (Htpasswd, Vec<String>) {
        let mut set = Htpasswd { users: BTreeMap::new() };
        let mut warnings = Vec::new();
        for (i, line) in text.split('\n').enumerate() {
            if line.starts_with(['#', '\r']) || line.trim().is_empty() {
                continue;
            }
            let Some((user, rest)) = line.split_once(':') else {
                // Not even the user is named: the line may be a hash pasted alone.
                warnings.push(format!("line {}: no `:` between user and password hash", i + 1));
                continue;
            };
            set.add(user, rest, Some(i + 1), &mut warnings);
        }
        (set, warnings)
    }

    /// From (user, hash) pairs (ingress-nginx's `auth-secret-type: auth-map`: each Secret key is a
    /// user, its value the hash), with `parse`'s warnings. ingress-nginx writes each pair as a file
    /// line, so a value's hash ends where a line's does (at `:`, CR or LF: a trailing newline is
    /// harmless).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (Htpasswd, Vec<String>) {
        let mut set = Htpasswd { users: BTreeMap::new() };
        let mut warnings = Vec::new();
        for (user, hash) in pairs {
            set.add(user, hash, None, &mut warnings);
        }
        (set, warnings)
    }

    /// Records `user`'s line (number `line` of a file) unless an earlier one did; `rest` is what
    /// follows the user's `:`.
    fn add(&mut self, user: &str, rest: &str, line: Option<usize>, warnings: &mut Vec<String>) {
        let context = || match line {
            Some(n) => format!("line {n} (user {})", user.escape_debug()),
            None => format!("user {}", user.escape_debug()),
        };
        if user.is_empty() {
            // nginx never matches an empty user (it refuses such credentials before the file).
            warnings.push(match line {
                Some(n) => format!("line {n}: empty user name"),
                None => "empty user name".into(),
            });
            return;
        }
        if self.users.contains_key(user.as_bytes()) {
            warnings.push(format!("{}: duplicate user, ignored (nginx uses the user's first line)", context()));
            return;
        }
        let hash = rest.split([':', '\r', '\n']).next().unwrap_or_default();
        let entry = match parse_hash(hash) {
            Ok(scheme) => Some(Entry { text: hash.into(), scheme }),
            Err(why) => {
                warnings.push(format!("{}: {why}", context()));
                None
            }
        };
        self.users.insert(user.as_bytes().into(), entry);
    }

    /// Whether `user` is listed and `password` matches its hash. Constant-time comparison of the
    /// final digest; the work before it is the scheme's (bcrypt's and SHA-crypt's are deliberately
    /// slow), done only for a listed user, as nginx does.
    pub fn verify(&self, user: &[u8], password: &[u8]) -> bool {
        let Some(Some(entry)) = self.users.get(user) else {
            return false;
        };
        let password = password.split(|&b| b == 0).next().unwrap_or_default();
        entry.scheme.check(password)
    }

    /// Whether no user can log in (every line, if any, was unusable).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of users with a usable hash.
    pub fn len(&self) -> usize {
        self.users.values().filter(|e| e.is_some()).count()
    }
}

/// User names and the scheme of each (`unusable` for a refused first line); never the hashes.
impl fmt::Debug for Htpasswd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Name(&'static str);
        impl fmt::Debug for Name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        struct Users<'a>(&'a Htpasswd);
        impl fmt::Debug for Users<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let scheme = |e: &Option<Entry>| Name(e.as_ref().map_or("unusable", |e| e.scheme.name()));
                f.debug_map()
                    .entries(self.0.users.iter().map(|(u, e)| (String::from_utf8_lossy(u), scheme(e))))
                    .finish()
            }
        }
        f.debug_tuple("Htpasswd").field(&Users(self)).finish()
    }
}

/// Decodes an `Authorization` header value `Basic <base64(user:password)>` (scheme
/// case-insensitive, surrounding spaces allowed) into (user, password); None when it is not Basic
/// or not valid base64 or has no ':'. Also None for an empty user, which nginx refuses too.
///
/// The base64 is read as nginx's `ngx_decode_base64` reads it: padding optional, decoding stops at
/// the first `=`, and unused low bits of the last character are ignored.
pub fn basic_credentials(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    const LAX: GeneralPurpose = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone),
    );
    let value = value.trim_ascii();
    let (scheme, token) = value.split_at_checked(5)?;
    if !scheme.eq_ignore_ascii_case(b"basic") || !token.starts_with(b" ") {
        return None;
    }
    let token = token.trim_ascii_start();
    let token = token.split(|&b| b == b'=').next().unwrap_or_default();
    if token.is_empty() {
        return None;
    }
    let decoded = LAX.decode(token).ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    if colon == 0 {
        return None;
    }
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// crypt(3)'s base64 alphabet (DES, MD5- and SHA-crypt; bcrypt orders it differently).
const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn is_itoa64(s: &[u8]) -> bool {
    s.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/')
}

/// Constant time for equal lengths; the lengths themselves are not secret (they are the scheme's).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Classifies a hash the way nginx's `ngx_crypt` then musl's `crypt` dispatch on its prefix, and
/// checks that it has the form their output has (anything else can never compare equal).
fn parse_hash(hash: &str) -> Result<Scheme, String> {
    let b = hash.as_bytes();
    let malformed = |scheme: &str, why: &str| format!("malformed {scheme} hash: {why}");
    if b.is_empty() {
        return Err("empty password hash".into());
    }
    if let Some(rest) = hash.strip_prefix("$apr1$") {
        return parse_md5_crypt(rest.as_bytes(), true).map_err(|why| malformed("$apr1$", why));
    }
    if let Some(plain) = hash.strip_prefix("{PLAIN}") {
        return Ok(Scheme::Plain(Box::new(Sha256::digest(plain).into())));
    }
    if let Some(rest) = hash.strip_prefix("{SSHA}") {
        // Padding and trailing bits must be canonical: nginx re-encodes and compares the strings.
        let raw = STANDARD.decode(rest).map_err(|_| malformed("{SSHA}", "not valid base64"))?;
        let (digest, salt) =
            raw.split_first_chunk::<20>().ok_or_else(|| malformed("{SSHA}", "shorter than a SHA-1 digest"))?;
        return Ok(Scheme::Ssha { digest: Box::new(*digest), salt: salt.into() });
    }
    if let Some(rest) = hash.strip_prefix("{SHA}") {
        let raw = STANDARD.decode(rest).map_err(|_| malformed("{SHA}", "not valid base64"))?;
        let digest: [u8; 20] = raw.try_into().map_err(|_| malformed("{SHA}", "not a SHA-1 digest"))?;
        return Ok(Scheme::Sha(Box::new(digest)));
    }
    if let Some(rest) = hash.strip_prefix("$1$") {
        return parse_md5_crypt(rest.as_bytes(), false).map_err(|why| malformed("$1$", why));
    }
    if let Some(rest) = hash.strip_prefix("$5$") {
        return parse_sha_crypt(rest.as_bytes(), false).map_err(|why| malformed("$5$", why));
    }
    if let Some(rest) = hash.strip_prefix("$6$") {
        return parse_sha_crypt(rest.as_bytes(), true).map_err(|why| malformed("$6$", why));
    }
    if let [b'$', b'2', minor, b'$', ..] = b {
        let prefix = &hash[..4];
        return match minor {
            b'a' | b'b' | b'y' => parse_bcrypt(b).map_err(|why| malformed(prefix, why)),
            // crypt_blowfish's emulation of its old sign-extension bug; the bcrypt crate has none.
            b'x' => Err("unsupported password scheme `$2x$` (bcrypt with the old 8-bit bug)".into()),
            _ => Err(format!("unknown password scheme `{}`", prefix.escape_debug())),
        };
    }
    if b[0] == b'_' {
        return parse_bsdi(b).map_err(|why| malformed("BSDi DES crypt", why));
    }
    // musl hands anything else to DES, which reads any two characters as the salt.
    if let [s0, s1, checksum @ ..] = b {
        if let Ok(checksum) = <[u8; 11]>::try_from(checksum) {
            if is_itoa64(&checksum) {
                return Ok(Scheme::Des { salt: des::ascii_to_bin(*s0) | des::ascii_to_bin(*s1) << 6, checksum });
            }
        }
    }
    Err(unknown_scheme(hash))
}

/// Names the scheme of an unrecognised hash by its `$id$` or `{NAME}` prefix, when it has one that
/// looks like a scheme name (so that no part of an actual hash lands in a log).
fn unknown_scheme(hash: &str) -> String {
    let label = |open: char, close: char| {
        let rest = hash.strip_prefix(open)?;
        let end = rest.find(close)?;
        let name = &rest[..end];
        (!name.is_empty() && name.len() <= 8 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .then(|| format!("{open}{name}{close}"))
    };
    match label('$', '$').or_else(|| label('{', '}')) {
        Some(prefix) => format!("unknown password scheme `{prefix}`"),
        None if hash.len() == 13 => "malformed DES crypt hash: not in crypt's base64 alphabet".into(),
        None => "unknown password scheme (not a hash nginx can check)".into(),
    }
}

/// `salt$checksum` after the magic: salt at most 8 characters (nginx and musl stop there), checksum
/// 22 characters.
fn parse_md5_crypt(rest: &[u8], apr1: bool) -> Result<Scheme, &'static str> {
    let dollar = rest.iter().position(|&b| b == b'$').ok_or("no `$` after the salt")?;
    let (salt, checksum) = (&rest[..dollar], &rest[dollar + 1..]);
    if salt.len() > 8 {
        return Err("salt longer than 8 characters");
    }
    let checksum: [u8; 22] = checksum.try_into().map_err(|_| "checksum is not 22 characters")?;
    if !is_itoa64(&checksum) {
        return Err("checksum not in crypt's base64 alphabet");
    }
    Ok(Scheme::Md5Crypt { apr1, salt: salt.into(), checksum: Box::new(checksum) })
}

/// The costliest hashes checked: the worker checks a password inline (as nginx does), so a hash
/// that takes seconds would stall every connection of the worker. Costlier ones are refused when
/// the file is read, with a warning; bcrypt 14 takes about a second, SHA-crypt's million rounds
/// half of one.
const MAX_BCRYPT_COST: u32 = 14;
const MAX_SHA_ROUNDS: u32 = 1_000_000;

/// `[rounds=N$]salt$checksum`, as musl writes it: N without leading zeros within musl's 1000 to
/// 9999999 (musl rewrites other values, so they never compare equal), salt at most 16 characters.
fn parse_sha_crypt(rest: &[u8], sha512: bool) -> Result<Scheme, &'static str> {
    let (rounds, rest) = match rest.strip_prefix(b"rounds=") {
        Some(r) => {
            let dollar = r.iter().position(|&b| b == b'$').ok_or("no `$` after rounds")?;
            let digits = &r[..dollar];
            let canonical = std::str::from_utf8(digits).ok().filter(|d| !d.starts_with(['0', '+']));
            match canonical.and_then(|d| d.parse::<u32>().ok()) {
                Some(n) if n > MAX_SHA_ROUNDS && n <= 9_999_999 => {
                    return Err(
                        "rounds above 1000000: each check would stall the worker, and every connection on it, for \
                                seconds",
                    )
                }
                Some(n) if (1000..=9_999_999).contains(&n) => (n, &r[dollar + 1..]),
                _ => return Err("rounds not a number from 1000 to 9999999"),
            }
        }
        None => (5000, rest),
    };
    let dollar = rest.iter().position(|&b| b == b'$').ok_or("no `$` after the salt")?;
    let (salt, checksum) = (&rest[..dollar], &rest[dollar + 1..]);
    if salt.len() > 16 {
        return Err("salt longer than 16 characters");
    }
    let len = if sha512 { 86 } else { 43 };
    if checksum.len() != len || !is_itoa64(checksum) {
        return Err(if sha512 {
            "checksum is not 86 base64 characters"
        } else {
            "checksum is not 43 base64 characters"
        });
    }
    Ok(Scheme::ShaCrypt { sha512, rounds, salt: salt.into(), checksum: checksum.into() })
}

/// `$2?$NN$` + 22 characters of salt + 31 of digest, cost 04 to 31 (crypt_blowfish's range).
fn parse_bcrypt(b: &[u8]) -> Result<Scheme, &'static str> {
    const BCRYPT64: GeneralPurpose = GeneralPurpose::new(&alphabet::BCRYPT, NO_PAD);
    let [_, _, _, _, c1, c2, b'$', rest @ ..] = b else {
        return Err("no two-digit cost");
    };
    if !c1.is_ascii_digit() || !c2.is_ascii_digit() {
        return Err("no two-digit cost");
    }
    let cost = u32::from(c1 - b'0') * 10 + u32::from(c2 - b'0');
    if !(4..=31).contains(&cost) {
        return Err("cost not from 04 to 31");
    }
    if cost > MAX_BCRYPT_COST {
        return Err("cost above 14: each check would stall the worker, and every connection on it, for seconds");
    }
    if rest.len() != 53 {
        return Err("salt and digest are not 53 characters");
    }
    // Strict decoding: crypt_blowfish writes both canonically, so any other form never matches.
    let (salt, digest) = rest.split_at(22);
    let salt: [u8; 16] = BCRYPT64.decode(salt).ok().and_then(|s| s.try_into().ok()).ok_or("salt is not valid")?;
    let digest: [u8; 23] = BCRYPT64.decode(digest).ok().and_then(|d| d.try_into().ok()).ok_or("digest is not valid")?;
    Ok(Scheme::Bcrypt { cost, salt: Box::new(salt), digest: Box::new(digest) })
}

/// `_CCCCSSSS` + 11 characters of checksum; a count of 0 is refused by musl.
fn parse_bsdi(b: &[u8]) -> Result<Scheme, &'static str> {
    if b.len() != 20 {
        return Err("not 20 characters");
    }
    let read = |s: &[u8]| s.iter().enumerate().fold(0, |v, (i, &c)| v | des::ascii_to_bin(c) << (6 * i));
    let count = read(&b[1..5]);
    if count == 0 {
        return Err("iteration count is zero");
    }
    let checksum: [u8; 11] = b[9..].try_into().map_err(|_| "not 20 characters")?;
    if !is_itoa64(&checksum) {
        return Err("checksum not in crypt's base64 alphabet");
    }
    Ok(Scheme::BsdiDes { count, salt: read(&b[5..9]), checksum })
}

/// MD5-crypt (Poul-Henning Kamp's, as musl and nginx's apr1 implement it): the 22 characters that
/// follow `magic salt $`.
fn md5_crypt(password: &[u8], magic: &[u8], salt: &[u8]) -> [u8; 22] {
    let alternate = Md5::new().chain_update(password).chain_update(salt).chain_update(password).finalize();
    let mut ctx = Md5::new().chain_update(password).chain_update(magic).chain_update(salt);
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(&alternate[..n]);
        left -= n;
    }
    // The bits of the length pick a NUL byte (1) or the password's first byte (0).
    let mut n = password.len();
    while n > 0 {
        ctx.update(if n & 1 == 1 { &[0u8][..] } else { &password[..1] });
        n >>= 1;
    }
    let mut fin = ctx.finalize();
    for i in 0..1000 {
        let mut c = Md5::new();
        if i & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if i % 3 != 0 {
            c.update(salt);
        }
        if i % 7 != 0 {
            c.update(password);
        }
        if i & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize();
    }
    let mut out = [0u8; 22];
    let groups = [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)];
    for (g, &(a, b, c)) in groups.iter().enumerate() {
        let v = u32::from(fin[a]) << 16 | u32::from(fin[b]) << 8 | u32::from(fin[c]);
        for k in 0..4 {
            out[4 * g + k] = ITOA64[(v >> (6 * k)) as usize & 0x3f];
        }
    }
    out[20] = ITOA64[usize::from(fin[11] & 0x3f)];
    out[21] = ITOA64[usize::from(fin[11] >> 6)];
    out
}

/// DES-based crypt(3): the traditional 25 iterations with a 12-bit salt, and BSDi's extended form,
/// as musl's `crypt_des.c` (FreeSec) computes them. DES here is the plain FIPS 46 algorithm over
/// bit-position tables, except that the salt swaps bits of the expansion's two halves.
mod des {
    use super::ITOA64;

    /// Initial permutation, 1-based bit positions from the most significant.
    const IP: [u8; 64] = [
        58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4, 62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40,
        32, 24, 16, 8, 57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3, 61, 53, 45, 37, 29, 21, 13, 5, 63,
        55, 47, 39, 31, 23, 15, 7,
    ];
    const FP: [u8; 64] = invert(&IP);
    const PC1: [u8; 56] = [
        57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36, 63,
        55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
    ];
    const PC2: [u8; 48] = [
        14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2, 41, 52, 31, 37, 47, 55,
        30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
    ];
    const SHIFTS: [u32; 16] = [1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1];
    const P: [u8; 32] = [
        16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10, 2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11,
        4, 25,
    ];
    /// S-boxes, each 4 rows of 16.
    const S: [[u8; 64]; 8] = [
        [
            14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7, 0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
            4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0, 15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13,
        ],
        [
            15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10, 3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
            0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15, 13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9,
        ],
        [
            10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8, 13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
            13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7, 1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12,
        ],
        [
            7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15, 13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
            10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4, 3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14,
        ],
        [
            2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9, 14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
            4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14, 11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3,
        ],
        [
            12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11, 10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
            9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6, 4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13,
        ],
        [
            4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1, 13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
            1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2, 6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12,
        ],
        [
            13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7, 1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
            7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8, 2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11,
        ],
    ];
    /// Each S-box with P applied to its output: the round function is then eight lookups.
    const SP: [[u32; 64]; 8] = sp_tables();

    const fn invert(table: &[u8; 64]) -> [u8; 64] {
        let mut out = [0; 64];
        let mut i = 0;
        while i < 64 {
            out[table[i] as usize - 1] = i as u8 + 1;
            i += 1;
        }
        out
    }

    const fn sp_tables() -> [[u32; 64]; 8] {
        let mut sp = [[0; 64]; 8];
        let mut s = 0;
        while s < 8 {
            let mut x = 0;
            while x < 64 {
                // The outer bits pick the row, the inner four the column.
                let row = (x >> 4 & 2) | (x & 1);
                let col = x >> 1 & 0xf;
                let out = (S[s][row * 16 + col] as u32) << (28 - 4 * s);
                let mut permuted = 0;
                let mut i = 0;
                while i < 32 {
                    permuted = permuted << 1 | (out >> (32 - P[i] as u32) & 1);
                    i += 1;
                }
                sp[s][x] = permuted;
                x += 1;
            }
            s += 1;
        }
        sp
    }

    /// Bit `i` of the output is bit `table[i]` of the `width`-bit input, both from the top.
    fn permute(input: u64, width: u32, table: &[u8]) -> u64 {
        table.iter().fold(0, |out, &pos| out << 1 | (input >> (width - u32::from(pos)) & 1))
    }

    /// The 16 round keys, each as two 24-bit halves.
    type Keys = [(u32, u32); 16];

    fn key_schedule(key: [u8; 8]) -> Keys {
        let cd = permute(u64::from_be_bytes(key), 64, &PC1);
        let (mut c, mut d) = ((cd >> 28) as u32, cd as u32 & 0x0fff_ffff);
        let mut keys = [(0, 0); 16];
        for (k, &shift) in keys.iter_mut().zip(&SHIFTS) {
            c = (c << shift | c >> (28 - shift)) & 0x0fff_ffff;
            d = (d << shift | d >> (28 - shift)) & 0x0fff_ffff;
            let sub = permute(u64::from(c) << 28 | u64::from(d), 56, &PC2);
            *k = ((sub >> 24) as u32, sub as u32 & 0xff_ffff);
        }
        keys
    }

    /// `count` DES encryptions of `block` in a row; `saltbits` marks the expansion bits to swap.
    fn encrypt(block: u64, keys: &Keys, saltbits: u32, count: u32) -> u64 {
        let ip = permute(block, 64, &IP);
        let (mut l, mut r) = ((ip >> 32) as u32, ip as u32);
        for _ in 0..count {
            for &(kl, kr) in keys {
                // E: eight 6-bit groups, group i being bits 4i-1 .. 4i+4 of R (wrapping around).
                let x = r.rotate_right(1);
                let (mut el, mut er) = (0, 0);
                for i in 0..4 {
                    el = el << 6 | (x.rotate_left(4 * i + 6) & 0x3f);
                    er = er << 6 | (x.rotate_left(4 * i + 22) & 0x3f);
                }
                let swap = (el ^ er) & saltbits;
                el ^= swap ^ kl;
                er ^= swap ^ kr;
                let f = SP[0][(el >> 18) as usize]
                    | SP[1][(el >> 12 & 0x3f) as usize]
                    | SP[2][(el >> 6 & 0x3f) as usize]
                    | SP[3][(el & 0x3f) as usize]
                    | SP[4][(er >> 18) as usize]
                    | SP[5][(er >> 12 & 0x3f) as usize]
                    | SP[6][(er >> 6 & 0x3f) as usize]
                    | SP[7][(er & 0x3f) as usize];
                (l, r) = (r, l ^ f);
            }
            (l, r) = (r, l);
        }
        permute(u64::from(l) << 32 | u64::from(r), 64, &FP)
    }

    /// Salt bit j swaps bit j of the expansion's left half with bit j of its right half, from the top.
    fn salt_bits(salt: u32) -> u32 {
        (0..24).filter(|j| salt >> j & 1 == 1).fold(0, |bits, j| bits | 0x80_0000 >> j)
    }

    /// musl's reading of a salt or count character: any byte maps to 6 bits (`.` is 0, `z` 63).
    pub(super) fn ascii_to_bin(ch: u8) -> u32 {
        let sch = i32::from(ch as i8);
        let v = if sch >= i32::from(b'a') {
            sch - (i32::from(b'a') - 38)
        } else if sch >= i32::from(b'A') {
            sch - (i32::from(b'A') - 12)
        } else {
            sch - i32::from(b'.')
        };
        (v & 0x3f) as u32
    }

    /// The key from up to 8 password bytes: 7 bits each, in the top of the byte (the low bit is
    /// DES's parity, ignored).
    fn key_bytes(password: &[u8]) -> [u8; 8] {
        let mut key = [0; 8];
        for (k, &p) in key.iter_mut().zip(password) {
            *k = p << 1;
        }
        key
    }

    /// The 64 bits in 11 characters, 6 at a time from the top (two zero bits pad the last).
    fn encode(out: u64) -> [u8; 11] {
        let v = u128::from(out) << 2;
        std::array::from_fn(|i| ITOA64[(v >> (60 - 6 * i) & 0x3f) as usize])
    }

    /// Traditional crypt: the password's first 8 bytes are the key, a zero block is encrypted 25
    /// times.
    pub(super) fn crypt(password: &[u8], salt: u32) -> [u8; 11] {
        encode(encrypt(0, &key_schedule(key_bytes(password)), salt_bits(salt), 25))
    }

    /// BSDi extended crypt: the whole password is folded into the key 8 bytes at a time (the key
    /// encrypted with itself, then XORed with the next bytes), then `count` encryptions.
    pub(super) fn bsdi_crypt(password: &[u8], count: u32, salt: u32) -> [u8; 11] {
        let mut key = key_bytes(password);
        let mut keys = key_schedule(key);
        for chunk in password.get(8..).unwrap_or_default().chunks(8) {
            key = encrypt(u64::from_be_bytes(key), &keys, 0, 1).to_be_bytes();
            for (k, &p) in key.iter_mut().zip(chunk) {
                *k ^= p << 1;
            }
            keys = key_schedule(key);
        }
        encode(encrypt(0, &keys, salt_bits(salt), count))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The worked example of DES in every textbook (key 133457799BBCDFF1).
        #[test]
        fn plain_des_matches_the_standard_example() {
            let keys = key_schedule(0x1334_5779_9BBC_DFF1u64.to_be_bytes());
            assert_eq!(encrypt(0x0123_4567_89AB_CDEF, &keys, 0, 1), 0x85E8_1354_0F0A_B405);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Produced by the real tools (Debian 12: apache2-utils 2.4, OpenSSL 3, whois's mkpasswd over
    // libxcrypt; {SSHA} by Python's hashlib), never by this module. Each with its command.

    // htpasswd -nbm alice 'apr1 secret'
    const APR1: &str = "alice:$apr1$FrNsQPgo$0dgQbdJqutzoZEWWY7RvF/";
    // openssl passwd -apr1 -salt q1w2e3r4 apr1-pass
    const APR1_SALTED: &str = "$apr1$q1w2e3r4$FUK80yJrrKOcaCL0z3UbK1";
    // htpasswd -nbm empty ''
    const APR1_EMPTY: &str = "$apr1$RXjmFrQj$m4MuRRuNmtI4jTiaj2HiX0";
    // htpasswd -nbm uni 'pässwörd'
    const APR1_UTF8: &str = "$apr1$7HlryZ/T$HVoB4dz96BxC0IeUDR6Zu.";
    // htpasswd -nbB -C 5 bob bcrypt-pass
    const BCRYPT_2Y: &str = "$2y$05$lueGBO.8b/mNj6XOF9Ghf.QB51xEE7choYYjUuE6f5gFSP8qE6Hmy";
    // htpasswd -nbB -C 4 eve 'pässwörd'
    const BCRYPT_2Y_UTF8: &str = "$2y$04$kQPARroRQbi0agucHx1En.2BQocXIh1UqD6K6okchqVKTfd80m8.6";
    // mkpasswd -m bcrypt-a -R 5 bcrypt-a-pass
    const BCRYPT_2A: &str = "$2a$05$px0aJoGvSt1VGfL0DRU38u223kKL1oSINWCjUJ6JVNRTFKIjQimEC";
    // mkpasswd -m bcrypt -R 4 bcrypt-b-pass (mkpasswd raises the cost to 5)
    const BCRYPT_2B: &str = "$2b$05$0ElBdTDkcegrXgarzFwtMeQ/p5MOue80E6JHLcdPvJP2WVw.zroji";
    // mkpasswd -m bcrypt -R 4 "$(printf 'x%.0s' $(seq 1 80))"
    const BCRYPT_80X: &str = "$2b$05$lRjrQAGNTUg4iC5VCWwvi.rywFbnJUuMg/8FdpI1KR3AmFYmRxkuy";
    // htpasswd -nbs carol sha-pass
    const SHA: &str = "{SHA}xO2etOilyqtV8o1RvvnmkeBx7QI=";
    // pw, salt = b"ssha-pass", b"\x01\x02saltXYZ\xff"; b64encode(sha1(pw + salt).digest() + salt)
    const SSHA: &str = "{SSHA}2aNSlPyvmqD1njp1GewKfykcY8IBAnNhbHRYWVr/";
    // The same for b"nosalt" with no salt.
    const SSHA_UNSALTED: &str = "{SSHA}sDhj8Sx2c/UfYmZl+PeAdCoFIRQ=";
    // htpasswd -nbd dave despass
    const DES: &str = "dP0/sHHMahB2o";
    // mkpasswd -m descrypt password ab
    const DES_AB: &str = "abJnggxhB/yWI";
    // mkpasswd -m descrypt 'pässwörd'
    const DES_UTF8: &str = "7OoYETzNzvaZQ";
    // mkpasswd -m bsdicrypt bsdi-password-long
    const BSDI: &str = "_J9..Gh48ft177T9919k";
    // mkpasswd -m bsdicrypt short
    const BSDI_SHORT: &str = "_J9..pQjHPWcIe/3qHaU";
    // mkpasswd -m bsdicrypt -R 1 abcdefghij
    const BSDI_ONE_ROUND: &str = "_/...FUNlCzShvg/gV46";
    // openssl passwd -1 -salt Zx9.Ab md5-pass
    const MD5: &str = "$1$Zx9.Ab$jxvbiioRcY0KNQC/R0DYA/";
    // mkpasswd -m md5crypt 'pässwörd'
    const MD5_UTF8: &str = "$1$/B1SSdef$6SSZtrAGfRLwMs15J/DOi.";
    // openssl passwd -5 -salt saltsalt sha256-pass
    const SHA256: &str = "$5$saltsalt$YiBXXqN1WW5jZx76W2tt5Aar2TjALeybASXr6LtWJt7";
    // mkpasswd -m sha256crypt -R 2000 rounds-pass
    const SHA256_ROUNDS: &str = "$5$rounds=2000$yvxQzalqNR9udSUS$Rblg1V/3CXNQKxGwZxrKEVemVgLC59CRMBYCnuIhLV2";
    // openssl passwd -6 -salt saltysalt sha512-pass
    const SHA512: &str =
        "$6$saltysalt$Fg6l3vhpYsCQIVWdjuarlzx5cz5IX60UqaO4juczThRJT.Q3v59/LUR0YoFX2HoZAKxiJuKVlq4jNX.WqEn0S.";
    // mkpasswd -m sha512crypt -R 10000 rounds-pass roundsalt
    const SHA512_ROUNDS: &str = concat!(
        "$6$rounds=10000$roundsalt$",
        "/pE.tS4otV.t3m4rcR/PhRQJ3ptNN42hOscocY8lnku9c7cutWXB9XuJcnNeG6AKKsHogZz38.ZH40em3nk3O/"
    );
    // mkpasswd -m sha512crypt '' emptysalt
    const SHA512_EMPTY: &str =
        "$6$emptysalt$TrI.h19YNad.S.Xw2WEgON9ojBrkXYcCfZrEcOEa9k/Bp5Sw4dxhsyY0KdBJ5Vt2UbEFOMolXqrfnZHc1QRM..";
    // openssl passwd -6 'pässwörd'
    const SHA512_UTF8: &str =
        "$6$ASNpRgpLjM6WEa1r$VbaGp79AXfTO70PudsslGAoa.Au48k9keSEhMbwwiYpnK1KzU4SEH15GDRM1.f163Zdt/NEHR86jd0XGmsKxe0";

    fn one(hash: &str) -> Htpasswd {
        let (set, warnings) = Htpasswd::from_pairs([("u", hash)]);
        assert!(warnings.is_empty(), "{hash}: {warnings:?}");
        assert_eq!(set.len(), 1);
        set
    }

    /// Accepts `password` for `u` and refuses a wrong password, a wrong user, and `password` with
    /// one byte changed or added.
    fn accepts_only(hash: &str, password: &[u8]) {
        let set = one(hash);
        assert!(set.verify(b"u", password), "{hash} refuses its password");
        assert!(!set.verify(b"u", b"wrong"), "{hash} accepts a wrong password");
        assert!(!set.verify(b"v", password), "{hash} accepts another user");
        assert!(!set.verify(b"U", password), "{hash}: user names are case-sensitive");
        let mut longer = password.to_vec();
        longer.push(b'!');
        // DES reads only 8 bytes; bcrypt 72.
        if password.len() < 8 {
            assert!(!set.verify(b"u", &longer), "{hash} accepts a longer password");
        }
        if let Some((first, rest)) = password.split_first() {
            let changed = [&[first ^ 0x20][..], rest].concat();
            assert!(!set.verify(b"u", &changed), "{hash} accepts a changed password");
        }
    }

    #[test]
    fn each_scheme_accepts_its_password_only() {
        let utf8 = "pässwörd".as_bytes();
        accepts_only(&APR1[6..], b"apr1 secret");
        accepts_only(APR1_SALTED, b"apr1-pass");
        accepts_only(APR1_EMPTY, b"");
        accepts_only(APR1_UTF8, utf8);
        accepts_only(BCRYPT_2Y, b"bcrypt-pass");
        accepts_only(BCRYPT_2Y_UTF8, utf8);
        accepts_only(BCRYPT_2A, b"bcrypt-a-pass");
        accepts_only(BCRYPT_2B, b"bcrypt-b-pass");
        accepts_only(SHA, b"sha-pass");
        accepts_only(SSHA, b"ssha-pass");
        accepts_only(SSHA_UNSALTED, b"nosalt");
        accepts_only("{PLAIN}plain pass", b"plain pass");
        accepts_only("{PLAIN}", b"");
        accepts_only(DES, b"despass");
        accepts_only(DES_AB, b"password");
        accepts_only(DES_UTF8, utf8);
        accepts_only(BSDI, b"bsdi-password-long");
        accepts_only(BSDI_SHORT, b"short");
        accepts_only(BSDI_ONE_ROUND, b"abcdefghij");
        accepts_only(MD5, b"md5-pass");
        accepts_only(MD5_UTF8, utf8);
        accepts_only(SHA256, b"sha256-pass");
        accepts_only(SHA256_ROUNDS, b"rounds-pass");
        accepts_only(SHA512, b"sha512-pass");
        accepts_only(SHA512_ROUNDS, b"rounds-pass");
        accepts_only(SHA512_EMPTY, b"");
        accepts_only(SHA512_UTF8, utf8);
    }

    #[test]
    fn length_limits_are_musls() {
        // DES reads 8 bytes, bcrypt 72: what follows does not matter, as in crypt(3).
        assert!(one(DES_AB).verify(b"u", b"password-and-more"));
        assert!(!one(DES_AB).verify(b"u", b"passwor"));
        let x80 = [b'x'; 80];
        assert!(one(BCRYPT_80X).verify(b"u", &x80));
        assert!(one(BCRYPT_80X).verify(b"u", &x80[..72]));
        assert!(!one(BCRYPT_80X).verify(b"u", &x80[..71]));
        // BSDi folds in the whole password.
        assert!(!one(BSDI).verify(b"u", b"bsdi-password-lon"));
        assert!(!one(BSDI).verify(b"u", b"bsdi-password-longer"));
        // musl's SHA-crypt refuses keys over 256 bytes, whatever the hash.
        let long = "y".repeat(257);
        let (set, _) = Htpasswd::from_pairs([("u", SHA512)]);
        assert!(!set.verify(b"u", long.as_bytes()));
    }

    #[test]
    fn a_password_ends_at_its_first_nul_as_in_nginx() {
        assert!(one("{PLAIN}secret").verify(b"u", b"secret\0anything"));
        assert!(one(SHA).verify(b"u", b"sha-pass\0x"));
        assert!(!one("{PLAIN}secret").verify(b"u", b"secre\0t"));
    }

    #[test]
    fn file_format_follows_nginx() {
        let lines = [
            "# a comment",
            "",
            "   ",
            &format!("{APR1}\r"),
            "#bob:{PLAIN}commented\r",
            "\r",
            &format!("carol:{SHA}:Carol Smith:room 3"),
            &format!("dave:{DES}\r"),
            "erin:{PLAIN}ab:cd",
            &format!("frank:{MD5}"),
        ];
        let text = lines.join("\n");
        let (set, warnings) = Htpasswd::parse(&text);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(set.len(), 5);
        assert!(set.verify(b"alice", b"apr1 secret"));
        assert!(!set.verify(b"bob", b"commented"));
        assert!(set.verify(b"carol", b"sha-pass"));
        assert!(set.verify(b"dave", b"despass"));
        // The hash stops at the next `:`, even for {PLAIN}.
        assert!(set.verify(b"erin", b"ab"));
        assert!(!set.verify(b"erin", b"ab:cd"));
        // The last line needs no newline.
        assert!(set.verify(b"frank", b"md5-pass"));
        assert!(!set.is_empty());
    }

    #[test]
    fn unusable_lines_warn_without_the_hash() {
        let text = "good:{PLAIN}ok\n\
                    a-hash-alone-9f8e7d6c\n\
                    bob:$9$secrethashA$secrethashB\n\
                    carol:{MD4}secrethash\n\
                    dave:$1$saltsalt$tooshort\n\
                    erin:{SHA}not*base64\n\
                    frank:$2y$03$lueGBO.8b/mNj6XOF9Ghf.QB51xEE7choYYjUuE6f5gFSP8qE6Hmy\n\
                    gina:$6$rounds=999$salt$x\n\
                    hank:\n\
                    :{PLAIN}nouser\n\
                    ivan:$2x$05$lueGBO.8b/mNj6XOF9Ghf.QB51xEE7choYYjUuE6f5gFSP8qE6Hmy\n\
                    judy:secrethash-of-no-kind\n";
        let (set, warnings) = Htpasswd::parse(text);
        assert_eq!(set.len(), 1);
        assert_eq!(
            warnings,
            [
                "line 2: no `:` between user and password hash",
                "line 3 (user bob): unknown password scheme `$9$`",
                "line 4 (user carol): unknown password scheme `{MD4}`",
                "line 5 (user dave): malformed $1$ hash: checksum is not 22 characters",
                "line 6 (user erin): malformed {SHA} hash: not valid base64",
                "line 7 (user frank): malformed $2y$ hash: cost not from 04 to 31",
                "line 8 (user gina): malformed $6$ hash: rounds not a number from 1000 to 9999999",
                "line 9 (user hank): empty password hash",
                "line 10: empty user name",
                "line 11 (user ivan): unsupported password scheme `$2x$` (bcrypt with the old 8-bit bug)",
                "line 12 (user judy): unknown password scheme (not a hash nginx can check)",
            ]
        );
        for w in &warnings {
            assert!(!w.contains("secrethash") && !w.contains("9f8e7d6c") && !w.contains("lueGBO"), "{w}");
        }
        assert!(set.verify(b"good", b"ok"));
        assert!(!set.verify(b"bob", b"anything"));
        let debug = format!("{set:?}");
        assert_eq!(debug.matches("unusable").count(), 9, "{debug}");
    }

    #[test]
    fn malformed_hashes_are_caught_at_parse_time() {
        let bad = [
            "$apr1$123456789$FUK80yJrrKOcaCL0z3UbK1", // salt over 8
            "$apr1$q1w2e3r4FUK80yJrrKOcaCL0z3UbK1",   // no `$`
            "$1$Zx9.Ab$jxvbiioRcY0KNQC/R0DYA*",       // alphabet
            "$5$rounds=02000$yvxQzalqNR9udSUS$Rblg1V/3CXNQKxGwZxrKEVemVgLC59CRMBYCnuIhLV2", // leading zero
            "$5$rounds=x$s$Rblg1V/3CXNQKxGwZxrKEVemVgLC59CRMBYCnuIhLV2",
            "$5$0123456789abcdefg$Rblg1V/3CXNQKxGwZxrKEVemVgLC59CRMBYCnuIhLV2", // salt over 16
            "$6$saltysalt$Fg6l3vh",
            "$2y$05$lueGBO.8b/mNj6XOF9Ghf.QB51xEE7choYYjUuE6f5gFSP8qE6Hm", // short
            "$2y$5$lueGBO.8b/mNj6XOF9Ghf.QB51xEE7choYYjUuE6f5gFSP8qE6Hmy",
            "$2y$05$lueGBO.8b/mNj6XOF9Ghf/QB51xEE7choYYjUuE6f5gFSP8qE6Hmy", // salt not canonical
            "{SHA}xO2etOilyqtV8o1RvvnmkeBx7QI",                             // padding
            "{SHA}AAAA",
            "{SSHA}AAAA",
            "_J9..Gh48ft177T9919",
            "_....",
            "dP0/sHHMahB2*",
            // Too costly to check on the worker: bcrypt above 14, SHA-crypt above a million rounds.
            "$2y$15$lueGBO.8b/mNj6XOF9Ghf.QB51xEE7choYYjUuE6f5gFSP8qE6Hmy",
            "$6$rounds=1000001$s$Fg6l3vhJ3q0Ve4KdxC2Cb0c6d7Ww7rGd7mVwbpFoG0cd9v9Us5FvqZ0l3g2A6bZzjZo5C6lY0E2n4Ug0lS9ba1",
        ];
        for hash in bad {
            let (set, warnings) = Htpasswd::from_pairs([("u", hash)]);
            assert!(set.is_empty(), "{hash}");
            assert_eq!(warnings.len(), 1, "{hash}");
            assert!(warnings[0].starts_with("user u: "), "{hash}: {}", warnings[0]);
        }
    }

    #[test]
    fn the_first_line_for_a_user_wins() {
        let (set, warnings) = Htpasswd::parse("amy:{PLAIN}first\namy:{PLAIN}second\nbob:$9$x\nbob:{PLAIN}later\n");
        assert!(set.verify(b"amy", b"first"));
        assert!(!set.verify(b"amy", b"second"));
        // nginx stops at bob's first line and refuses him: the later line must not let him in.
        assert!(!set.verify(b"bob", b"later"));
        assert_eq!(set.len(), 1);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].starts_with("line 2 (user amy): duplicate user"), "{warnings:?}");
    }

    #[test]
    fn auth_map_pairs() {
        let (set, warnings) =
            Htpasswd::from_pairs([("alice", &APR1[6..]), ("bob", &format!("{BCRYPT_2Y}\n")[..]), ("carol", "$9$x")]);
        assert_eq!(warnings, ["user carol: unknown password scheme `$9$`"]);
        assert!(set.verify(b"alice", b"apr1 secret"));
        assert!(set.verify(b"bob", b"bcrypt-pass"));
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn debug_names_users_and_schemes_only() {
        let (set, _) = Htpasswd::from_pairs([("alice", &APR1[6..]), ("bob", BCRYPT_2Y), ("carol", SSHA)]);
        assert_eq!(format!("{set:?}"), r#"Htpasswd({"alice": apr1, "bob": bcrypt, "carol": ssha})"#);
    }

    #[test]
    fn digests_tell_contents_apart() {
        let digest = |text: &str| crate::digest::digest_of(&Htpasswd::parse(text).0);
        assert_eq!(digest("a:{PLAIN}x\nb:{PLAIN}y\n"), digest("b:{PLAIN}y\r\n# c\na:{PLAIN}x:comment\n"));
        assert_ne!(digest("a:{PLAIN}x\n"), digest("a:{PLAIN}y\n"));
        assert_ne!(digest("a:{PLAIN}x\n"), digest("b:{PLAIN}x\n"));
        assert_ne!(digest("ab:{PLAIN}x\n"), digest("a:b{PLAIN}x\n"));
        assert_ne!(digest("a:$9$x\n"), digest(""));
    }

    #[test]
    fn verify_never_panics() {
        let lines = [
            APR1.to_string(),
            format!("b:{BCRYPT_2Y}"),
            format!("c:{SHA}"),
            format!("d:{SSHA}"),
            format!("e:{DES}"),
            format!("f:{BSDI_ONE_ROUND}"),
            format!("g:{MD5}"),
            format!("h:{SHA256_ROUNDS}"),
            format!("i:{SHA512}"),
            "j:{PLAIN}never-random".to_string(),
            "k:$1$$abcdefghijklmnopqrstuv".to_string(),
            "l:$5$$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ".to_string(),
            // DES salts of any bytes, as musl reads them.
            "m:\u{1}\u{7f}abcdefghijk".to_string(),
            "n:\u{e9}abcdefghijk".to_string(),
        ];
        let (set, warnings) = Htpasswd::parse(&lines.join("\n"));
        assert!(warnings.is_empty(), "{warnings:?}");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let users: Vec<&[u8]> =
            vec![b"alice", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"j", b"k", b"l", b"m", b"n", b""];
        for round in 0..300 {
            let len = (next() % 90) as usize;
            let password: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let user = users[round % users.len()];
            assert!(!set.verify(user, &password));
        }
        for user in &users {
            assert!(!set.verify(user, &[0xff; 300]));
            assert!(!set.verify(user, b""));
            assert!(!set.verify(user, b"\0"));
        }
        // Odd hashes parse to warnings, never to a panic.
        for hash in [
            "$",
            "$$",
            "$2",
            "$2a$",
            "$2a$99$",
            "{",
            "{}",
            "{SSHA}",
            "_",
            "\u{80}\u{80}",
            "$5$rounds=$",
            "$6$rounds=1$",
        ] {
            let (set, warnings) = Htpasswd::from_pairs([("u", hash)]);
            assert!(set.is_empty() && warnings.len() == 1, "{hash}");
            assert!(!set.verify(b"u", b"x"));
        }
    }

    #[test]
    fn basic_credentials_decodes_as_nginx() {
        let ok = |v: &[u8]| basic_credentials(v).map(|(u, p)| (String::from_utf8(u).ok(), String::from_utf8(p).ok()));
        let pair = |u: &str, p: &str| Some((Some(u.to_string()), Some(p.to_string())));
        // "alice:open sesame"
        assert_eq!(ok(b"Basic YWxpY2U6b3BlbiBzZXNhbWU="), pair("alice", "open sesame"));
        assert_eq!(ok(b"basic YWxpY2U6b3BlbiBzZXNhbWU="), pair("alice", "open sesame"));
        assert_eq!(ok(b"  BASIC    YWxpY2U6b3BlbiBzZXNhbWU=  "), pair("alice", "open sesame"));
        // Unpadded, as ngx_decode_base64 allows; the password may hold `:` and be empty.
        assert_eq!(ok(b"Basic YWxpY2U6b3BlbiBzZXNhbWU"), pair("alice", "open sesame"));
        assert_eq!(ok(b"Basic YTpiOmM="), pair("a", "b:c"));
        assert_eq!(ok(b"Basic YTo="), pair("a", ""));
        assert_eq!(basic_credentials(b"Basic YWxpY2U="), None); // no colon
        assert_eq!(basic_credentials(b"Basic OnBhc3M="), None); // ":pass": no user
        assert_eq!(basic_credentials(b"Basic YWxp*2U6cGFzcw=="), None);
        assert_eq!(basic_credentials(b"Basic Y"), None);
        assert_eq!(basic_credentials(b"Basic "), None);
        assert_eq!(basic_credentials(b"Basic"), None);
        assert_eq!(basic_credentials(b"BasicYTpi"), None);
        assert_eq!(basic_credentials(b"Bearer x"), None);
        assert_eq!(basic_credentials(b"Bearer YTpi"), None);
        assert_eq!(basic_credentials(b""), None);
        assert_eq!(basic_credentials(b"Basic \xff\xfe"), None);
        // Bytes that are not UTF-8 come through as they are.
        assert_eq!(basic_credentials(b"Basic /zr/"), Some((vec![0xff], vec![0xff])));
    }
}
