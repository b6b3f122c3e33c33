//! The other replicas' counters, for canary promotion: the Lease holder decides for the whole
//! fleet, so it judges a canary on every replica's traffic, not only on the share that reached it.
//!
//! `--peers HOST:PORT[,HOST:PORT…]` names the replicas' admin listeners — the chart passes its
//! headless `<release>-fleet` Service, whose name resolves to every ready pod. While this replica
//! leads and some canary auto-promotes, every [`POLL`] each name is resolved afresh (replicas come
//! and go), each address is asked `GET /admin/traffic` within [`TIMEOUT`], and the answers are
//! published for [`super::promote`]. This replica's own answer, which the name includes, is
//! recognised by its instance id and left out: its own counters are read directly. A replica that
//! does not answer is left out of that poll (logged at debug: a pod going away is ordinary).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use ramjet_shared::admin::Traffic;
use tokio::sync::watch;

use crate::canary::promotion::CanaryPlan;

/// How often the leader asks the other replicas.
pub const POLL: Duration = Duration::from_secs(1);
/// How long one replica has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(1);

/// What polling needs: the names to resolve, this process's instance id, and when to poll.
pub struct PeerPoll {
    pub names: Vec<String>,
    pub own_instance: String,
    pub leader: watch::Receiver<bool>,
    pub plans: watch::Receiver<Arc<[CanaryPlan]>>,
}

/// Polls until the process ends, publishing the latest answers of the other replicas on `out`
/// (empty while this replica does not lead or no canary auto-promotes).
pub async fn run(poll: PeerPoll, out: watch::Sender<Arc<[Traffic]>>) {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(TIMEOUT));
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !*poll.leader.borrow() || poll.plans.borrow().is_empty() {
            if !out.borrow().is_empty() {
                out.send_replace(Arc::from(Vec::new()));
            }
            continue;
        }
        let addresses = resolve(&poll.names).await;
        let answers = futures::future::join_all(addresses.iter().map(|addr| traffic(&client, *addr))).await;
        let peers: Vec<Traffic> = answers
            .into_iter()
            .flatten()
            .filter(|t| !t.instance.is_empty() && t.instance != poll.own_instance)
            .collect();
        out.send_replace(Arc::from(peers));
    }
}

/// Every address the names resolve to (each within [`TIMEOUT`]), once each.
async fn resolve(names: &[String]) -> BTreeSet<SocketAddr> {
    let lookups = names.iter().map(|name| async move {
        match tokio::time::timeout(TIMEOUT, tokio::net::lookup_host(name.as_str())).await {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(e)) => {
                tracing::debug!(peers = %name, error = %e, "cannot resolve the peers' name");
                Vec::new()
            }
            Err(_) => {
                tracing::debug!(peers = %name, "the peers' name did not resolve in time");
                Vec::new()
            }
        }
    });
    futures::future::join_all(lookups).await.into_iter().flatten().collect()
}

/// One replica's `GET /admin/traffic`, or `None` (logged at debug).
async fn traffic(client: &Client<HttpConnector, Empty<Bytes>>, addr: SocketAddr) -> Option<Traffic> {
    let asked = async {
        let uri: hyper::Uri = format!("http://{addr}/admin/traffic").parse().map_err(|e| format!("{e}"))?;
        let response = client.get(uri).await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("answered {}", response.status()));
        }
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        serde_json::from_slice::<Traffic>(&body).map_err(|e| format!("not the traffic JSON: {e}"))
    };
    match tokio::time::timeout(TIMEOUT, asked).await {
        Ok(Ok(traffic)) => Some(traffic),
        Ok(Err(why)) => {
            tracing::debug!(peer = %addr, why = %why, "a peer's traffic is left out of this poll");
            None
        }
        Err(_) => {
            tracing::debug!(peer = %addr, "a peer did not answer in time; left out of this poll");
            None
        }
    }
}
