//! An authoritative DNS server on loopback (UDP, std threads) whose answers a test sets and
//! changes: A and AAAA records with a TTL of the test's choosing, NXDOMAIN for any other name.
//! Stopping it makes every later lookup time out, as a server that went away does.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Records = HashMap<String, (Vec<IpAddr>, u32)>;

pub struct DnsServer {
    pub addr: SocketAddr,
    records: Arc<Mutex<Records>>,
    queries: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DnsServer {
    pub fn start() -> DnsServer {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let addr = socket.local_addr().unwrap();
        let records: Arc<Mutex<Records>> = Arc::default();
        let (queries, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let thread = {
            let (records, queries, stop) = (records.clone(), queries.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                    queries.fetch_add(1, Ordering::Relaxed);
                    if let Some(answer) = answer(&buf[..n], &records.lock().unwrap()) {
                        let _ = socket.send_to(&answer, from);
                    }
                }
            })
        };
        DnsServer { addr, records, queries, stop, thread: Some(thread) }
    }

    /// `name` (lower case, no trailing dot) resolves to `addrs`, with this TTL in seconds.
    pub fn set(&self, name: &str, addrs: &[IpAddr], ttl: u32) {
        self.records.lock().unwrap().insert(name.to_string(), (addrs.to_vec(), ttl));
    }

    /// Queries answered (or not) so far.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::Relaxed)
    }

    /// Stops answering: later lookups time out.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The answer to one query (RFC 1035 §4.1): the question echoed, the records of its type, the
/// authoritative bit; NXDOMAIN for a name without records.
fn answer(query: &[u8], records: &Records) -> Option<Vec<u8>> {
    if query.len() < 12 || query[2] & 0x80 != 0 {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *query.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question = &query[12..at + 4];
    let name = labels.join(".");
    let found = records.get(&name);
    let matching: Vec<&IpAddr> = found
        .map(|(addrs, _)| {
            addrs.iter().filter(|a| matches!((a, qtype), (IpAddr::V4(_), 1) | (IpAddr::V6(_), 28))).collect()
        })
        .unwrap_or_default();
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&query[..2]);
    let rcode = if found.is_some() { 0 } else { 3 };
    out.extend_from_slice(&[0x84 | (query[2] & 0x01), rcode]);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(matching.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(question);
    let ttl = found.map_or(0, |(_, ttl)| *ttl);
    for addr in matching {
        out.extend_from_slice(&[0xc0, 0x0c]);
        let (kind, data): (u16, Vec<u8>) = match addr {
            IpAddr::V4(v4) => (1, v4.octets().to_vec()),
            IpAddr::V6(v6) => (28, v6.octets().to_vec()),
        };
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&data);
    }
    Some(out)
}
