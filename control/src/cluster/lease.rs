//! Leader election on a coordination.k8s.io/v1 Lease, with only get, create and update (replace) —
//! the verbs the Helm chart's Role grants on the one Lease name (`--election-id`).
//!
//! Every `retry` the replica reads the Lease: it renews it when it holds it; it takes it over when
//! nobody holds it or the holder has not renewed it for `duration`, measured on this replica's own
//! clock from when it last saw the record change (so clock skew between nodes does not matter).
//! Updates carry the resourceVersion read, so two replicas racing for the Lease cannot both win:
//! the loser gets 409 Conflict. A leader that cannot renew for two thirds of `duration` steps down
//! before anyone else may take over. On shutdown the Lease is released, so another replica takes
//! over at its next round instead of after the lease duration.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};

use super::LeaseOptions;

/// The holder and renew time last seen, and when this replica saw them change.
struct Observed {
    record: (Option<String>, Option<MicroTime>),
    at: Instant,
}

/// Runs the election, reporting whether this replica leads, until `stop` says to give up: then
/// the Lease is released (when held) and the sender `stop` carried is told.
pub async fn elect(
    client: Client,
    options: LeaseOptions,
    namespace: String,
    leader: watch::Sender<bool>,
    mut stop: oneshot::Receiver<std::sync::mpsc::Sender<()>>,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let mut observed: Option<Observed> = None;
    let mut renewed: Option<Instant> = None;
    let mut forbidden_logged = false;
    loop {
        match try_lead(&api, &options, &mut observed).await {
            Ok(true) => {
                renewed = Some(Instant::now());
                if leader.send_if_modified(|l| !std::mem::replace(l, true)) {
                    tracing::info!(lease = %options.name, namespace, identity = %options.identity, "leading: this replica writes Ingress status");
                }
            }
            Ok(false) => {
                renewed = None;
                if leader.send_if_modified(|l| std::mem::replace(l, false)) {
                    tracing::info!(lease = %options.name, "lost the lease; another replica writes Ingress status");
                }
            }
            Err(e) => {
                let forbidden = matches!(&e, kube::Error::Api(s) if s.code == 403);
                if forbidden && !forbidden_logged {
                    tracing::warn!(lease = %options.name, namespace, "not allowed to use the Lease, so this replica never writes Ingress status: {e}");
                    forbidden_logged = true;
                } else if !forbidden {
                    tracing::warn!(lease = %options.name, error = %e, "cannot read or renew the Lease");
                }
                let stale = renewed.is_none_or(|t| t.elapsed() > options.duration * 2 / 3);
                if stale && leader.send_if_modified(|l| std::mem::replace(l, false)) {
                    tracing::warn!(lease = %options.name, "could not renew the Lease in time; stepping down");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(options.retry) => {}
            done = &mut stop => {
                let was_leading = leader.send_replace(false);
                if was_leading {
                    match release(&api, &options).await {
                        Ok(()) => tracing::info!(lease = %options.name, "released the lease"),
                        Err(e) => tracing::warn!(lease = %options.name, error = %e, "cannot release the lease; it expires by itself"),
                    }
                }
                if let Ok(done) = done {
                    let _ = done.send(());
                }
                return;
            }
        }
    }
}

/// Gives the Lease up if this replica holds it: no holder, and a renew time of now, so any replica
/// takes it at its next round.
async fn release(api: &Api<Lease>, options: &LeaseOptions) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&options.name).await? else { return Ok(()) };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(options.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    conflict_is_false(api.replace(&options.name, &PostParams::default(), &lease).await).map(|_| ())
}

/// One round: `Ok(true)` when this replica holds the Lease afterwards.
async fn try_lead(
    api: &Api<Lease>,
    options: &LeaseOptions,
    observed: &mut Option<Observed>,
) -> Result<bool, kube::Error> {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let seconds = options.duration.as_secs().max(1) as i32;
    let Some(mut lease) = api.get_opt(&options.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(options.name.clone()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(options.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return conflict_is_false(api.create(&PostParams::default(), &lease).await);
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    if holder.as_deref() == Some(options.identity.as_str()) {
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(seconds);
        return conflict_is_false(api.replace(&options.name, &PostParams::default(), &lease).await);
    }
    let record = (holder.clone(), spec.renew_time.clone());
    if observed.as_ref().is_none_or(|o| o.record != record) {
        *observed = Some(Observed { record, at: Instant::now() });
    }
    let their_duration =
        spec.lease_duration_seconds.map(|s| Duration::from_secs(s.max(1) as u64)).unwrap_or(options.duration);
    let expired = holder.is_none() || observed.as_ref().is_some_and(|o| o.at.elapsed() > their_duration);
    if !expired {
        return Ok(false);
    }
    spec.holder_identity = Some(options.identity.clone());
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(seconds);
    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    conflict_is_false(api.replace(&options.name, &PostParams::default(), &lease).await)
}

/// A 409 means another replica won this round.
fn conflict_is_false(result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
