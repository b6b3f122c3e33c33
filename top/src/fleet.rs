//! The fleet: every replica behind one DNS name, asked the same question at once.
//!
//! The chart's headless `<release>-fleet` Service resolves to every replica's admin address from
//! cluster DNS, which keeps answering from its cache while the API server is down. [`resolve`]
//! turns `HOST:PORT` into those addresses (or takes them from `--resolve`), and [`ask`] sends one
//! request to each replica on its own thread, so one hung replica costs the request timeout, not the
//! sum of them. Generation numbers are per replica; the digest names the same compiled table on
//! all of them, so the fleet is pinned by digest.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context};

use super::client::{AdminClient, ClientError, Token};
use super::model::{Generations, PinAnswer};

/// `--resolve HOST:ADDR[,ADDR...]`: the addresses to use for `HOST` instead of asking DNS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    pub host: String,
    pub addrs: Vec<IpAddr>,
}

impl std::str::FromStr for Override {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (host, addrs) = s.split_once(':').ok_or_else(|| format!("`{s}` is not HOST:ADDR[,ADDR...]"))?;
        let addrs = addrs
            .split(',')
            .map(|a| a.trim().trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("`{s}`: {e}"))?;
        if host.is_empty() || addrs.is_empty() {
            return Err(format!("`{s}` is not HOST:ADDR[,ADDR...]"));
        }
        Ok(Override { host: host.to_string(), addrs })
    }
}

/// Every address behind `fleet` (`HOST:PORT`), sorted, without duplicates.
pub fn resolve(fleet: &str, overrides: &[Override]) -> anyhow::Result<Vec<SocketAddr>> {
    let (host, port) = fleet.rsplit_once(':').with_context(|| format!("--fleet {fleet}: use HOST:PORT"))?;
    let port: u16 = port.parse().with_context(|| format!("--fleet {fleet}: the port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut addrs: Vec<SocketAddr> = match overrides.iter().find(|o| o.host.eq_ignore_ascii_case(host)) {
        Some(o) => o.addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect(),
        None => {
            (host, port).to_socket_addrs().with_context(|| format!("--fleet {fleet}: cannot resolve {host}"))?.collect()
        }
    };
    addrs.sort();
    addrs.dedup();
    if addrs.is_empty() {
        bail!("--fleet {fleet}: {host} resolves to no address");
    }
    Ok(addrs)
}

/// The fleet's addresses for the interactive view, looked up again at every poll and command so
/// replicas that come and go are followed. When a lookup fails, the addresses of the last one that
/// worked are used and the failure is reported with them.
pub struct Fleet {
    name: String,
    overrides: Vec<Override>,
    last: Mutex<Vec<SocketAddr>>,
}

impl Fleet {
    /// Looks the name up once; a name that does not resolve now is refused before anything starts.
    pub fn new(name: &str, overrides: &[Override]) -> anyhow::Result<Fleet> {
        let addrs = resolve(name, overrides)?;
        Ok(Fleet { name: name.to_string(), overrides: overrides.to_vec(), last: Mutex::new(addrs) })
    }

    /// Every address behind the name now, and why the lookup failed if it did.
    pub fn addresses(&self) -> (Vec<SocketAddr>, Option<String>) {
        // Not under the lock: a slow lookup by the poller must not hold up a command's.
        let looked_up = resolve(&self.name, &self.overrides);
        let mut last = self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match looked_up {
            Ok(addrs) => {
                *last = addrs.clone();
                (addrs, None)
            }
            Err(e) => (last.clone(), Some(format!("{e:#}"))),
        }
    }
}

/// What the operator asks every replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    Status,
    Pin(String),
    Release,
}

/// One replica's answer.
#[derive(Debug, Clone)]
pub enum Answer {
    Status(Generations),
    Pin(PinAnswer),
}

/// Asks every replica at once; answers in the order of `replicas`.
pub fn ask(
    replicas: &[SocketAddr],
    ask: &Ask,
    token: Option<&Token>,
    timeout: Duration,
) -> Vec<(SocketAddr, Result<Answer, ClientError>)> {
    each(replicas, token, timeout, |client| match ask {
        Ask::Status => client.generations().map(Answer::Status),
        Ask::Pin(digest) => client.pin_digest(digest).map(Answer::Pin),
        Ask::Release => client.release().map(Answer::Pin),
    })
}

/// Runs `call` against every replica at once, each on its own thread with its own client; answers
/// in the order of `replicas`.
pub fn each<T: Send>(
    replicas: &[SocketAddr],
    token: Option<&Token>,
    timeout: Duration,
    call: impl Fn(&AdminClient) -> Result<T, ClientError> + Sync,
) -> Vec<(SocketAddr, Result<T, ClientError>)> {
    let call = &call;
    thread::scope(|scope| {
        let handles: Vec<_> = replicas
            .iter()
            .map(|addr| {
                let client = AdminClient::new(&format!("http://{addr}"), timeout, token.cloned());
                scope.spawn(move || call(&client))
            })
            .collect();
        replicas
            .iter()
            .zip(handles)
            .map(|(addr, h)| {
                let answer = h.join().unwrap_or_else(|_| {
                    Err(ClientError::Malformed { url: addr.to_string(), detail: "the request thread panicked".into() })
                });
                (*addr, answer)
            })
            .collect()
    })
}

/// The serving generation's digest, from a status answer.
pub fn serving_digest(g: &Generations) -> Option<&str> {
    g.generations.iter().find(|e| e.generation == g.serving).map(|e| e.digest.as_str())
}

/// The digest most replicas serve (`None` stands for a replica that did not say); rows whose
/// serving digest differs from it are marked.
pub fn majority<'a>(digests: &[Option<&'a str>]) -> Option<&'a str> {
    digests.iter().flatten().max_by_key(|d| digests.iter().filter(|x| x.as_ref() == Some(*d)).count()).copied()
}

/// One line per replica for scripts and runbooks, then a summary line; marks replicas whose serving
/// digest differs from the most common one.
pub fn report(answers: &[(SocketAddr, Result<Answer, ClientError>)]) -> String {
    let digests: Vec<Option<&str>> = answers
        .iter()
        .map(|(_, a)| match a {
            Ok(Answer::Status(g)) => serving_digest(g),
            _ => None,
        })
        .collect();
    let common = majority(&digests);
    let mut out = String::new();
    for ((addr, answer), digest) in answers.iter().zip(&digests) {
        let _ = match answer {
            Ok(Answer::Status(g)) => writeln!(
                out,
                "{addr}  serving {} digest {}  {}  newest {}{}",
                g.serving,
                digest.unwrap_or("?"),
                g.pinned.map_or("not pinned".to_string(), |p| format!("PINNED {p}")),
                g.newest,
                if digest.is_some() && *digest != common { "  DIFFERS" } else { "" }
            ),
            Ok(Answer::Pin(p)) => writeln!(out, "{addr}  ok: {}", p.message),
            Err(e) => writeln!(out, "{addr}  FAILED: {e}"),
        };
    }
    let failed = answers.iter().filter(|(_, a)| a.is_err()).count();
    let _ = writeln!(
        out,
        "{} of {} replicas answered{}",
        answers.len() - failed,
        answers.len(),
        if failed > 0 { " (partial)" } else { "" }
    );
    out
}
