//! The request path allocates nothing in steady state: keep-alive requests through the proxy to a
//! pooled upstream, and direct responses, counted with a counting global allocator — with the
//! access log off and with it on (JSON to a file: records are formatted into reused buffers and
//! copied into the worker's ring; the writer thread allocates nothing per record either). The client and
//! the backend here reuse fixed buffers, so every allocation counted would be the daemon's.

use ramjet_test_support as support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use ramjet_dataplane::access_log::{Destination, Format};
use ramjet_dataplane::AccessLogSettings;
use support::{daemon_with, routes, DRIVERS};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY (of the impl): every call forwards to the system allocator unchanged; only a counter is
// added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// A keep-alive backend that answers every request with `ok`, reusing one buffer.
fn fixed_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_forever(stream));
        }
    });
    addr
}

fn answer_forever(mut stream: TcpStream) {
    let mut buf = [0u8; 8192];
    let mut filled = 0;
    loop {
        match stream.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        while let Some(end) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n") {
            if stream.write_all(RESPONSE).is_err() {
                return;
            }
            buf.copy_within(end + 4..filled, 0);
            filled -= end + 4;
        }
    }
}

/// Sends `count` requests on one connection, reading each whole response into a fixed buffer.
fn drive(conn: &mut TcpStream, request: &[u8], count: usize) {
    let mut buf = [0u8; 4096];
    for _ in 0..count {
        conn.write_all(request).unwrap();
        let mut filled = 0;
        loop {
            filled += conn.read(&mut buf[filled..]).unwrap();
            if let Some(end) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n") {
                let head = std::str::from_utf8(&buf[..end]).unwrap();
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().unwrap())
                    })
                    .unwrap();
                if filled >= end + 4 + len {
                    break;
                }
            }
        }
    }
}

#[test]
fn steady_state_requests_allocate_nothing() {
    requests_allocate_nothing(None, None, "");
}

/// With the client's address read from a trusted proxy's `X-Forwarded-For` (walked, and the
/// forwarded lines written per request, the peer appended), over a connection that began with a
/// PROXY protocol header.
#[test]
fn steady_state_requests_allocate_nothing_from_a_trusted_proxy() {
    use ramjet_dataplane::{AddressRules, ClientAddress};
    let address = ClientAddress {
        proxy_protocol_http: true,
        rules: AddressRules {
            trusted: ramjet_shared::parse_ranges("10.0.0.0/8").unwrap().into(),
            full_forwarded_for: true,
            ..AddressRules::default()
        },
        ..ClientAddress::default()
    };
    let xff = "X-Forwarded-For: 198.51.100.1, 203.0.113.7, 10.0.0.3\r\n";
    requests_allocate_nothing(None, Some(address), xff);
}

#[test]
fn steady_state_requests_allocate_nothing_with_the_access_log_on() {
    let file = support::temp_dir("alloc-log").join("access.log");
    let log = AccessLogSettings::new(Destination::File(file.clone()), Format::Json);
    requests_allocate_nothing(Some(log), None, "");
    let written = std::fs::read_to_string(&file).unwrap().lines().count();
    assert_eq!(written, 2 * 2 * 2200, "every request was logged");
}

fn requests_allocate_nothing(
    log: Option<AccessLogSettings>,
    address: Option<ramjet_dataplane::ClientAddress>,
    extra: &str,
) {
    // One process-wide counter: the tests of this file take turns, or they would count each other.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let backend = fixed_backend();
    for driver in DRIVERS {
        let yaml = format!(
            "backends:\n  be: {{ endpoints: [\"{backend}\"] }}\n  hi: {{ respond: {{ status: 200, body: \"hi\" }} }}\nroutes:\n  - {{ path: /proxy, backend: be }}\n  - {{ path: /direct, backend: hi }}\n"
        );
        let d = daemon_with(routes(&yaml), driver, |c| {
            c.access_log = log.clone();
            if let Some(address) = &address {
                c.settings.client_address = address.clone();
            }
        });
        for path in ["/proxy", "/direct"] {
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: example.com\r\nUser-Agent: test\r\n{extra}Accept: */*\r\n\r\n");
            let mut conn = TcpStream::connect(d.http_addr()).unwrap();
            conn.set_nodelay(true).unwrap();
            if address.as_ref().is_some_and(|a| a.proxy_protocol_http) {
                // The balancer in front is a trusted proxy.
                conn.write_all(b"PROXY TCP4 10.0.0.2 10.0.0.1 4000 80\r\n").unwrap();
            }
            // Warm up: buffers, pools and caches fill once.
            drive(&mut conn, request.as_bytes(), 200);
            let before = ALLOCATIONS.load(Relaxed);
            drive(&mut conn, request.as_bytes(), 2000);
            let allocations = ALLOCATIONS.load(Relaxed) - before;
            // The admin listener and timers may allocate now and then; per request it must be zero.
            let logging = if log.is_some() { "access log on" } else { "access log off" };
            eprintln!("{driver:?} {path} ({logging}): {allocations} allocations in 2000 requests");
            assert!(allocations < 20, "{driver:?} {path}: {allocations} allocations for 2000 requests");
        }
        d.shutdown();
    }
}
