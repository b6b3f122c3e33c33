//! Arbitrary text as a static routes file (`--static-routes`). The parser answers an error (with a
//! file, and a line when it has one) or a value, never a panic; a value compiles, compiling it again
//! changes nothing (a fixed point), and the table answers lookups for its own hosts and paths.
//!
//! Certificate paths resolve in a directory with two real certificate/key pairs (`a.crt`/`a.key`,
//! `b.crt`/`b.key`). Endpoints that are host names do not reach a resolver: `getaddrinfo` is
//! replaced in this binary (only `localhost` resolves), so no fuzz input leaves the machine and
//! every run is repeatable.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ramjet_control::compile::{static_routes, Compiler};
use ramjet_control::routes_file::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // A certificate path may name any file: keep the fuzzer away from endless ones (/dev/zero).
    if ["/dev", "/proc", "/sys", "fd/"].iter().any(|s| text.contains(s)) {
        return;
    }
    let routes = match parse(text, cert_dir(), "fuzz.yaml") {
        Ok(routes) => routes,
        Err(e) => {
            assert_eq!(e.file, "fuzz.yaml");
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let mut compiler = Compiler::new();
    let draft = static_routes::compile(&routes, &mut compiler);
    let generation = compiler.finish(draft).expect("a first compile gives a generation");
    let again = static_routes::compile(&routes, &mut compiler);
    assert!(compiler.finish(again).is_none(), "compiling the same file twice gives no new generation");
    let table = &generation.table;
    for route in &routes.routes {
        let host = route.host.strip_prefix("*.").map_or(route.host.clone(), |h| format!("x.{h}"));
        for path in [route.path.clone(), format!("{}/x", route.path), format!("{}?q", route.path)] {
            let _ = table.route(&host, &path);
            let _ = table.route(&host.to_ascii_uppercase(), &path);
        }
        let _ = table.certificate_for(&host);
    }
});

/// A directory with two certificate/key pairs, made once per process.
fn cert_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ramjet-fuzz-static-routes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let [(ca, ka), (cb, kb)] = &ramjet_fuzz::test_certs().pems;
        for (name, pem) in [("a.crt", ca), ("a.key", ka), ("b.crt", cb), ("b.key", kb)] {
            std::fs::write(dir.join(name), pem).expect("write a test certificate");
        }
        dir
    })
}

/// The resolver, as this binary sees it: `localhost` resolves as usual (from /etc/hosts), every
/// other name is unknown. Overrides libc's symbol for the whole binary, std's lookups included.
#[no_mangle]
pub unsafe extern "C" fn getaddrinfo(
    node: *const libc::c_char,
    service: *const libc::c_char,
    hints: *const libc::addrinfo,
    res: *mut *mut libc::addrinfo,
) -> libc::c_int {
    type GetAddrInfo = unsafe extern "C" fn(
        *const libc::c_char,
        *const libc::c_char,
        *const libc::addrinfo,
        *mut *mut libc::addrinfo,
    ) -> libc::c_int;
    // SAFETY: `node` is null or a NUL-terminated string, as getaddrinfo's contract says.
    let is_localhost = !node.is_null() && unsafe { std::ffi::CStr::from_ptr(node) }.to_bytes() == b"localhost";
    if !is_localhost {
        return libc::EAI_NONAME;
    }
    // SAFETY: dlsym with RTLD_NEXT finds libc's getaddrinfo, which has exactly this signature; the
    // arguments are the caller's, passed through unchanged.
    unsafe {
        let real = libc::dlsym(libc::RTLD_NEXT, c"getaddrinfo".as_ptr());
        if real.is_null() {
            return libc::EAI_FAIL;
        }
        let real: GetAddrInfo = std::mem::transmute(real);
        real(node, service, hints, res)
    }
}
