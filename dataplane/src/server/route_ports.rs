//! The sockets a serving table asks for beside HTTP and HTTPS: one per port of its TCP, UDP and TLS routes,
//! opened when a generation that has the port is published and closed when none does — so a pin
//! or a rollback brings its listeners back with its routes.
//!
//! The control thread opens them ([`PortOpener::sync`], after each publish): a port's sockets are
//! bound there, one SO_REUSEPORT socket per worker, so a port that cannot be opened is known and
//! told at once, and a worker never makes a system call for a port it will not serve. It then
//! wakes every worker (an eventfd each); a worker takes a duplicate of its own socket of each new
//! port and accepts on it ([`super::tcp`], [`super::udp`], [`super::tls_port`]), and stops accepting on a port that is gone. Its relays
//! already running go on until either side closes: a port that goes away refuses new connections
//! only. Nothing here is on a request's path: the map is read when a worker is woken, never per
//! connection.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener as StdListener};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::base::drain::DrainSignal;
use crate::base::listener::{bind_shared, bind_shared_udp, ListenError};
use crate::base::wakeup::{EventSender, Wakeup};
use crate::worker::Worker;
use ramjet_shared::{Published, Transport};

/// One port's sockets: the `i`-th is worker `i`'s.
enum PortSockets {
    Tcp(Vec<StdListener>),
    Udp(Vec<std::net::UdpSocket>),
}

/// The open ports, read by the workers (when woken) and written only by the [`PortOpener`].
pub struct RoutePorts {
    open: ArcSwap<BTreeMap<(Transport, u16), Arc<PortSockets>>>,
    /// The data plane has stopped: nothing is opened again.
    closed: AtomicBool,
    /// Where TLS ports find the certificates of the names they terminate.
    pub(crate) published: Arc<Published>,
}

impl RoutePorts {
    /// No port open yet; the opener (for the control thread) and each worker's end of its wake-up.
    pub(crate) fn new(
        ip: IpAddr,
        workers: usize,
        published: Arc<Published>,
    ) -> std::io::Result<(Arc<RoutePorts>, PortOpener, Vec<OwnedFd>)> {
        let mut wake = Vec::with_capacity(workers);
        let mut receivers = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (sender, receiver) = crate::base::wakeup::event_pair()?;
            wake.push(sender);
            receivers.push(receiver);
        }
        let ports = Arc::new(RoutePorts {
            open: ArcSwap::from_pointee(BTreeMap::new()),
            closed: AtomicBool::new(false),
            published,
        });
        Ok((ports.clone(), PortOpener { ports, ip, workers, wake }, receivers))
    }

    /// Closes every port for good: the data plane has stopped (its workers' copies are closed).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.open.store(Arc::new(BTreeMap::new()));
    }
}

/// Opens and closes the ports: owned by the control thread, the only writer.
pub struct PortOpener {
    ports: Arc<RoutePorts>,
    /// The address the ports are opened on (the HTTP listener's).
    ip: IpAddr,
    workers: usize,
    /// Each worker's wake-up, written when the open ports change.
    wake: Vec<EventSender>,
}

impl PortOpener {
    /// Makes the open ports exactly `wanted`: opens those not open yet, closes the others, and
    /// wakes the workers when anything changed. Returns each port that could not be opened, with
    /// why (it is tried again at the next call).
    pub fn sync(&mut self, wanted: impl IntoIterator<Item = (Transport, u16)>) -> Vec<((Transport, u16), ListenError)> {
        if self.ports.closed.load(Ordering::SeqCst) {
            return Vec::new();
        }
        let before = self.ports.open.load_full();
        let mut now = BTreeMap::new();
        let mut refused = Vec::new();
        for port in wanted {
            if let Some(open) = before.get(&port) {
                now.insert(port, open.clone());
                continue;
            }
            let addr = SocketAddr::new(self.ip, port.1);
            let bound = match port.0 {
                Transport::Tcp | Transport::Tls => bind_shared(addr, self.workers).map(PortSockets::Tcp),
                Transport::Udp => bind_shared_udp(addr, self.workers).map(PortSockets::Udp),
            };
            match bound {
                Ok(sockets) => {
                    now.insert(port, Arc::new(sockets));
                }
                Err(e) => refused.push((port, e)),
            }
        }
        let changed = now.len() != before.len() || now.keys().any(|p| !before.contains_key(p));
        if changed {
            let list =
                |ports: Vec<&(Transport, u16)>| ports.iter().map(|(t, p)| format!("{t}/{p}")).collect::<Vec<_>>();
            let opened = list(now.keys().filter(|p| !before.contains_key(p)).collect());
            let closed = list(before.keys().filter(|p| !now.contains_key(p)).collect());
            tracing::info!(?opened, ?closed, "TCP, UDP and TLS route ports changed");
            self.ports.open.store(Arc::new(now));
            for sender in &self.wake {
                sender.signal();
            }
        }
        refused
    }
}

/// A worker's side: accepts on each open port until it closes, and on the worker's drain stops.
pub(crate) async fn serve(worker: Rc<Worker>, ports: Arc<RoutePorts>, wake: Wakeup) {
    // The ports this worker accepts on, each with what stops its accept loop.
    let mut serving: BTreeMap<(Transport, u16), (Arc<PortSockets>, Rc<DrainSignal>)> = BTreeMap::new();
    loop {
        let open = ports.open.load_full();
        serving.retain(|port, (sockets, stop)| {
            // Gone, or closed and opened again since (other sockets): stop accepting on the old one.
            let same = open.get(port).is_some_and(|now| Arc::ptr_eq(now, sockets));
            if !same {
                stop.fire();
            }
            same
        });
        for (&(transport, port), sockets) in open.iter() {
            if serving.contains_key(&(transport, port)) {
                continue;
            }
            let stop = Rc::new(DrainSignal::default());
            // This worker's own socket of the port, duplicated: the port closes when every copy has.
            let started = match &**sockets {
                PortSockets::Tcp(all) => all.get(worker.id).map(|s| {
                    let listener = s.try_clone().and_then(monoio::net::TcpListener::from_std)?;
                    let relay = match transport {
                        Transport::Tls => {
                            super::tcp::Relay::Tls(super::tls_port::TlsPort::new(port, ports.published.clone()))
                        }
                        Transport::Tcp | Transport::Udp => super::tcp::Relay::Tcp(port),
                    };
                    monoio::spawn(super::tcp::accept(worker.clone(), listener, relay, stop.clone()));
                    Ok::<_, std::io::Error>(())
                }),
                PortSockets::Udp(all) => all.get(worker.id).map(|s| {
                    let socket = s.try_clone().and_then(monoio::net::udp::UdpSocket::from_std)?;
                    let serve = super::udp::serve(worker.clone(), socket, port, stop.clone());
                    // Its datagrams are handled in this one task: a panic ends the port on this worker only.
                    super::contain::spawn(&worker, "UDP route port", serve);
                    Ok(())
                }),
            };
            match started {
                Some(Ok(())) => {
                    serving.insert((transport, port), (sockets.clone(), stop));
                }
                Some(Err(e)) => {
                    tracing::warn!(worker = worker.id, %transport, port, error = %e, "cannot serve a route's port")
                }
                None => {}
            }
        }
        drop(open);
        monoio::select! {
            woken = wake.wait() => if woken.is_err() { return },
            _ = worker.drain.wait() => return,
        }
    }
}
