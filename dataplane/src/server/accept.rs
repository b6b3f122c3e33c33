//! A worker's serving life: it registers its listeners, accepts connections and hands each to its
//! server, runs the worker's housekeeping (pool sweeps, the clock, buffer trims), and on drain stops
//! accepting and waits for its connections within the drain timeout.

use std::net::TcpListener as StdListener;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::os::fd::OwnedFd;

use monoio::net::TcpListener;

use super::contain;
use super::http1;
use super::proxy_header;
use super::route_ports::{self, RoutePorts};
use super::runtime::Started;
use super::tls::TlsTerminator;
use crate::base::wakeup::Wakeup;
use crate::conn::ConnFacts;
use crate::worker::Worker;

/// Runs a worker until the drain signal arrives and its connections have finished (or the drain
/// timeout passed).
pub(crate) async fn run(
    worker: Rc<Worker>,
    http: StdListener,
    https: Option<(StdListener, Rc<TlsTerminator>)>,
    (ports, ports_changed): (Arc<RoutePorts>, OwnedFd),
    drain: OwnedFd,
    started: Started,
) {
    let (drain, clock, ports_changed) = match (Wakeup::event(drain), Wakeup::timer(), Wakeup::event(ports_changed)) {
        (Ok(drain), Ok(clock), Ok(ports_changed)) => (drain, clock, ports_changed),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return started.failed(format!("cannot set up the worker's timer or wake-ups: {e}"))
        }
    };
    let http = match TcpListener::from_std(http) {
        Ok(l) => l,
        Err(e) => return started.failed(format!("cannot register the HTTP listener: {e}")),
    };
    let https = match https.map(|(l, tls)| TcpListener::from_std(l).map(|l| (l, tls))).transpose() {
        Ok(https) => https,
        Err(e) => return started.failed(format!("cannot register the HTTPS listener: {e}")),
    };
    monoio::spawn(accept_loop(worker.clone(), http, None));
    if let Some((listener, tls)) = https {
        monoio::spawn(accept_loop(worker.clone(), listener, Some(tls)));
    }
    monoio::spawn(route_ports::serve(worker.clone(), ports, ports_changed));
    started.serving();
    monoio::spawn(sweep_pool(worker.clone()));
    monoio::spawn(tick_clock(worker.clone()));
    monoio::spawn(run_coarse_timer(worker.clone(), clock));

    // The control thread writes the drain eventfd once when shutdown begins
    // (`DataPlane::begin_closing`) and once to drain (`DataPlane::drain`); both writes may come
    // as one. An error reading it drains too: a worker that cannot hear the signal must not
    // outlive the daemon.
    let mut signalled = drain.wait().await.unwrap_or(2);
    worker.closing.fire();
    if signalled < 2 {
        signalled += drain.wait().await.unwrap_or(1);
    }
    debug_assert!(signalled >= 2);
    worker.drain.fire();
    // The tasks that wait on the drain (the accept loops, the route ports) run to their end before
    // this one returns: one still pending when the runtime stops is never dropped, and its
    // listener would stay open, taking connections nobody accepts.
    worker.sleep(Duration::from_millis(1)).await;
    let deadline = Instant::now() + worker.settings.drain_timeout;
    while worker.open_connections.get() > 0 && Instant::now() < deadline {
        worker.sleep(Duration::from_millis(10)).await;
    }
    if worker.open_connections.get() > 0 {
        tracing::warn!(
            worker = worker.id,
            open = worker.open_connections.get(),
            "drain timeout reached with connections still open; closing them"
        );
    }
}

async fn accept_loop(worker: Rc<Worker>, listener: TcpListener, tls: Option<Rc<TlsTerminator>>) {
    let local_port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let client_address = &worker.settings.client_address;
    let proxy_protocol =
        if tls.is_some() { client_address.proxy_protocol_https } else { client_address.proxy_protocol_http };
    // This worker's copy of the address rules, shared by the connections they concern.
    let rules = client_address.rules.is_active().then(|| Rc::new(client_address.rules.clone()));
    loop {
        let accepted = monoio::select! {
            r = listener.accept() => r,
            _ = worker.drain.wait() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(worker = worker.id, error = %e, "accept failed");
                worker.sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let worker = worker.clone();
        let tls = tls.clone();
        let rules = rules.clone();
        // The connection's state (0.8 KB plain, 7.8 KB with TLS) lives in a box of its own,
        // allocated once: the task itself stays a few words. monoio copies a task's whole future
        // when it spawns it (twice) and when it finishes; with the state inline that was four
        // copies of it per connection, 3 µs of every `Connection: close` request. Two tasks of
        // their own sizes: a plain connection does not carry the TLS one's state.
        // A listener that expects a PROXY protocol header reads it first (in a box of its own: a
        // listener that does not costs its connections nothing for it).
        match tls {
            None => monoio::spawn(async move {
                worker.connection_opened();
                let mut stream = stream;
                let facts = match proxy_protocol {
                    false => Some(ConnFacts::new(peer, false, local_port)),
                    true => Box::pin(proxy_header::origin(&worker, &mut stream, peer, local_port))
                        .await
                        .map(|(peer, port)| ConnFacts::relayed(peer, port)),
                };
                if let Some(facts) = facts {
                    let facts = Rc::new(facts.with_rules(rules.as_ref()));
                    Box::pin(contain::contained(&worker, "connection", http1::serve(&worker, stream, &facts))).await;
                }
                worker.connection_closed();
            }),
            Some(tls) => monoio::spawn(async move {
                worker.connection_opened();
                let mut stream = stream;
                let origin = match proxy_protocol {
                    false => Some((peer, local_port)),
                    true => Box::pin(proxy_header::origin(&worker, &mut stream, peer, local_port)).await,
                };
                if let Some((peer, local_port)) = origin {
                    let serve = tls.serve(&worker, stream, peer, local_port, rules);
                    Box::pin(contain::contained(&worker, "TLS connection", serve)).await;
                }
                worker.connection_closed();
            }),
        };
    }
    // Dropping the listener closes it: the kernel stops queueing connections for this worker.
}

async fn sweep_pool(worker: Rc<Worker>) {
    let period = (worker.settings.upstream_idle_timeout / 2).max(Duration::from_millis(100));
    loop {
        monoio::select! {
            _ = worker.sleep(period) => {
                worker.pool.sweep();
                worker.h2_pool.sweep(worker.settings.upstream_idle_timeout);
                worker.limiter.sweep();
            }
            _ = worker.drain.wait() => return,
        }
    }
}

/// How often each worker frees the pooled buffers that went unused for the whole period.
const BUFFER_TRIM_SECONDS: u64 = 5;
async fn run_coarse_timer(worker: Rc<Worker>, clock: Wakeup) {
    worker.coarse_timer.run(clock).await;
}

async fn tick_clock(worker: Rc<Worker>) {
    // Vanished routes' series are looked for a few times per grace period (at most every 10 s).
    let prune_every = (worker.settings.metrics_grace.as_secs() / 4).clamp(1, 10);
    let mut ticks = 0u64;
    loop {
        monoio::select! {
            _ = worker.sleep(Duration::from_secs(1)) => worker.clock.tick(),
            _ = worker.drain.wait() => return,
        }
        ticks += 1;
        if ticks.is_multiple_of(prune_every) {
            worker.prune_series();
        }
        if ticks.is_multiple_of(BUFFER_TRIM_SECONDS) {
            worker.trim_buffers();
        }
    }
}
