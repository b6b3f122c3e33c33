//! UDP routes (Layer 4): datagrams to a route's port are relayed per flow. A flow is one client
//! address on one worker (SO_REUSEPORT keeps a client's datagrams on one socket): its first
//! datagram picks a backend by weight and one of its endpoints in turn, and opens a socket of its
//! own connected to it; the client's datagrams go out on that socket, and what comes back on it
//! goes to the client from the route's port. A flow quiet for
//! [`Settings::udp_idle_timeout`](crate::Settings) ends (its socket closes);
//! the next datagram starts a new one, which is how a client moves to a backend added since.
//!
//! A quiet flow holds no buffer: its socket is waited on for readiness, and a datagram is read
//! into one of the port's buffers only once it is there. The flows of a worker are its own: no
//! lock, nothing shared with other workers.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use monoio::net::udp::UdpSocket;
use ramjet_shared::{BackendKind, Transport, UpstreamErrorKind};

use crate::base::drain::DrainSignal;
use crate::worker::Worker;

/// Most flows a worker keeps per port: datagrams of new clients beyond it are dropped until flows end.
const MOST_FLOWS: usize = 65_536;
/// Room for the largest datagram (IPv4's largest payload).
const DATAGRAM: usize = 65_535;

/// One client's flow.
struct Flow {
    upstream: UdpSocket,
    /// The last datagram either way.
    last: Cell<Instant>,
}

/// What a port's tasks on this worker share: its socket, its flows by client, its free buffers.
struct Port {
    socket: UdpSocket,
    port: u16,
    flows: RefCell<HashMap<SocketAddr, Rc<Flow>>>,
    buffers: RefCell<Vec<Vec<u8>>>,
    stop: Rc<DrainSignal>,
}

impl Port {
    fn buffer(&self) -> Vec<u8> {
        self.buffers.borrow_mut().pop().unwrap_or_else(|| Vec::with_capacity(DATAGRAM))
    }

    fn give(&self, mut buffer: Vec<u8>) {
        buffer.clear();
        let mut free = self.buffers.borrow_mut();
        if free.len() < 4 {
            free.push(buffer);
        }
    }
}

/// Relays a UDP route's port until `stop` (the port closed) or the worker's drain; its flows end
/// with it.
pub(crate) async fn serve(worker: Rc<Worker>, socket: UdpSocket, port: u16, stop: Rc<DrainSignal>) {
    let port =
        Rc::new(Port { socket, port, flows: RefCell::new(HashMap::new()), buffers: RefCell::new(Vec::new()), stop });
    loop {
        let buffer = port.buffer();
        let (received, mut buffer) = monoio::select! {
            r = port.socket.recv_from(buffer) => r,
            _ = port.stop.wait() => break,
            _ = worker.drain.wait() => break,
        };
        let Ok((_, client)) = received else {
            port.give(buffer);
            continue;
        };
        let known = port.flows.borrow().get(&client).cloned();
        let flow = match known {
            Some(flow) => flow,
            None => match open(&worker, &port, client).await {
                Some(flow) => flow,
                None => {
                    port.give(buffer);
                    continue;
                }
            },
        };
        flow.last.set(Instant::now());
        let (_, sent) = flow.upstream.send(buffer).await;
        buffer = sent;
        port.give(buffer);
    }
}

/// A new flow for `client`: a socket connected to an endpoint of a backend of the route, and the
/// task that relays its answers. `None` when the route has no endpoint, or the worker has
/// [`MOST_FLOWS`] flows on the port.
async fn open(worker: &Rc<Worker>, port: &Rc<Port>, client: SocketAddr) -> Option<Rc<Flow>> {
    if port.flows.borrow().len() >= MOST_FLOWS {
        return None;
    }
    let endpoint = {
        let generation = worker.generation();
        let route = generation.table.port_route(Transport::Udp, port.port)?;
        let backend = super::relay_backend::pick(worker, route)?;
        let BackendKind::Endpoints(endpoints) = &backend.kind else { return None };
        if endpoints.is_empty() {
            return None;
        }
        endpoints[worker.next_endpoint(backend.slot, endpoints.len())]
    };
    let local: SocketAddr = if endpoint.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let upstream = match UdpSocket::bind(local) {
        Ok(socket) => socket,
        Err(_) => return None,
    };
    if upstream.connect(endpoint).await.is_err() {
        worker.counters().upstream_error(UpstreamErrorKind::Connect);
        return None;
    }
    let flow = Rc::new(Flow { upstream, last: Cell::new(Instant::now()) });
    port.flows.borrow_mut().insert(client, flow.clone());
    let (worker, port, relayed) = (worker.clone(), port.clone(), flow.clone());
    super::contain::spawn(&worker.clone(), "UDP flow", async move {
        answers(&worker, &port, client, &relayed).await;
        let mut flows = port.flows.borrow_mut();
        if flows.get(&client).is_some_and(|f| Rc::ptr_eq(f, &relayed)) {
            flows.remove(&client);
        }
    });
    Some(flow)
}

/// Relays what comes back on a flow's socket to its client, until the flow has been quiet for the
/// idle timeout, its socket fails (an ICMP refusal), or the port closes.
async fn answers(worker: &Worker, port: &Port, client: SocketAddr, flow: &Flow) {
    let idle = worker.settings.udp_idle_timeout;
    loop {
        let quiet_for = flow.last.get().elapsed();
        if quiet_for >= idle {
            return;
        }
        let ready = monoio::select! {
            r = worker.timeout(idle - quiet_for, flow.upstream.readable(false)) => r,
            _ = port.stop.wait() => return,
            _ = worker.drain.wait() => return,
        };
        match ready {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => continue,
        }
        let (received, buffer) = flow.upstream.recv(port.buffer()).await;
        if received.is_err() {
            port.give(buffer);
            return;
        }
        flow.last.set(Instant::now());
        let (_, buffer) = port.socket.send_to(buffer, client).await;
        port.give(buffer);
    }
}
