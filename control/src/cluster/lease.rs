//! Leader election on a coordination.k8s.io/v1 Lease, with the verbs the Helm chart's Role grants
//! on the one Lease name (`--election-id`): get, create and update (replace) to take part, list and
//! watch to hear of every renewal as it happens.
//!
//! Every `retry` the replica reads the Lease: it renews it when it holds it; it takes it over when
//! nobody holds it or the holder has not renewed it for `duration`, measured on this replica's own
//! clock from when it saw the record change (so clock skew between nodes does not matter) — as
//! client-go's leaderelection does. Unlike client-go, a follower does not find out at its next poll:
//! it watches the Lease, so it sees each renewal within the watch's latency, and it tries to take
//! the Lease over the moment the record it saw expires rather than at its next `retry` tick. A
//! leader that dies is replaced `duration` (plus a request's round trip) after its last renewal;
//! polling alone made that up to `duration + 2 × retry` (a renewal seen up to one `retry` late, the
//! expiry noticed up to one `retry` late). Without the watch (RBAC, a failing watch) the follower
//! still reads the Lease every `retry`, and takes over at most one `retry` later than that.
//!
//! Updates carry the resourceVersion read, so two replicas racing for the Lease cannot both win:
//! the loser gets 409 Conflict. A round that the API server has not answered within a third of
//! `duration` is given up, and the next one starts at once with new requests. A leader that cannot
//! renew for two thirds of `duration` steps down before anyone else may take over. On shutdown the
//! Lease is released, and a follower watching it takes it at once.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::LeaseOptions;

/// The holder and renew time last seen, when this replica saw them change, and for how long the
/// holder keeps the Lease from then.
struct Observed {
    record: (Option<String>, Option<MicroTime>),
    at: Instant,
    duration: Duration,
}

impl Observed {
    /// When the Lease may be taken over: now when nobody holds it.
    fn expires(&self) -> Instant {
        if self.record.0.is_none() {
            self.at
        } else {
            self.at + self.duration
        }
    }

    /// Notes what the Lease says now; the clock restarts only when the record changed.
    fn update(observed: &mut Option<Observed>, spec: &LeaseSpec, default: Duration) {
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (holder, spec.renew_time.clone());
        let duration = spec.lease_duration_seconds.map(|s| Duration::from_secs(s.max(1) as u64)).unwrap_or(default);
        match observed {
            Some(o) if o.record == record => o.duration = duration,
            _ => *observed = Some(Observed { record, at: Instant::now(), duration }),
        }
    }
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
    // The one Lease, watched (list and watch with a `metadata.name` field selector, which RBAC
    // authorizes against the Role's resourceNames).
    let config = watcher::Config::default().fields(&format!("metadata.name={}", options.name));
    let mut seen = std::pin::pin!(watcher::watcher(api.clone(), config).default_backoff().touched_objects().fuse());
    let mut watch_failing = false;
    let mut observed: Option<Observed> = None;
    let mut renewed: Option<Instant> = None;
    let mut forbidden_logged = false;
    let mut next_round = Instant::now();
    let mut tried = next_round;
    loop {
        if Instant::now() >= next_round {
            tried = Instant::now();
            next_round = tried + options.retry;
            // A shutdown does not wait for a round stuck on a slow API server: the release re-reads
            // the Lease, whatever became of this round's write (a takeover's too). Nor does the
            // next round: a request that hangs (a connection that never completes) is given up
            // after a third of the lease, so a leader still has a second try before it must step
            // down, and a follower is not held past a release it would otherwise see at once.
            let round = tokio::select! {
                round = tokio::time::timeout(options.duration / 3, try_lead(&api, &options, &mut observed)) => round,
                done = &mut stop => return give_up(&api, &options, &leader, true, done).await,
            };
            let holder_and_left =
                observed.as_ref().map(|o| (&o.record.0, o.expires().saturating_duration_since(Instant::now())));
            tracing::debug!(lease = %options.name, ?round, observed = ?holder_and_left, "election round");
            let failed = match round {
                Ok(Ok(true)) => {
                    renewed = Some(Instant::now());
                    if leader.send_if_modified(|l| !std::mem::replace(l, true)) {
                        tracing::info!(lease = %options.name, namespace, identity = %options.identity, "leading: this replica writes Ingress status");
                    }
                    false
                }
                Ok(Ok(false)) => {
                    renewed = None;
                    if leader.send_if_modified(|l| std::mem::replace(l, false)) {
                        tracing::info!(lease = %options.name, "lost the lease; another replica writes Ingress status");
                    }
                    false
                }
                Ok(Err(e)) => {
                    let forbidden = matches!(&e, kube::Error::Api(s) if s.code == 403);
                    if forbidden && !forbidden_logged {
                        tracing::warn!(lease = %options.name, namespace, "not allowed to use the Lease, so this replica never writes Ingress status: {e}");
                        forbidden_logged = true;
                    } else if !forbidden {
                        tracing::warn!(lease = %options.name, error = %e, "cannot read or renew the Lease");
                    }
                    true
                }
                Err(_) => {
                    tracing::warn!(lease = %options.name, timeout = ?(options.duration / 3), "the API server did not answer a Lease request in time; trying again");
                    true
                }
            };
            let stale = renewed.is_none_or(|t| t.elapsed() > options.duration * 2 / 3);
            if failed && stale && leader.send_if_modified(|l| std::mem::replace(l, false)) {
                tracing::warn!(lease = %options.name, "could not renew the Lease in time; stepping down");
            }
        }
        // A follower tries again the moment the Lease it saw expires, not at its next round (an
        // expiry the last attempt already saw waits for the round: no tight loop on errors).
        let wake = match &observed {
            Some(o) if !*leader.borrow() && o.expires() > tried => next_round.min(o.expires()),
            _ => next_round,
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => next_round = next_round.min(wake),
            Some(event) = seen.next() => match event {
                Ok(lease) => {
                    if watch_failing {
                        tracing::info!(lease = %options.name, "watching the Lease again");
                        watch_failing = false;
                    }
                    let spec = lease.spec.unwrap_or_default();
                    tracing::debug!(lease = %options.name, holder = ?spec.holder_identity, renewed = ?spec.renew_time, version = ?lease.metadata.resource_version, "Lease seen");
                    if spec.holder_identity.as_deref() != Some(options.identity.as_str()) {
                        Observed::update(&mut observed, &spec, options.duration);
                    }
                }
                Err(e) => {
                    if !watch_failing {
                        tracing::warn!(lease = %options.name, error = %e, "cannot watch the Lease; a takeover waits for the next read of it");
                        watch_failing = true;
                    }
                }
            },
            done = &mut stop => return give_up(&api, &options, &leader, false, done).await,
        }
    }
}

/// Stops leading and releases the Lease when this replica held it (or may have: `mid_round`, a
/// write cut short), then tells the sender `stop` carried.
async fn give_up(
    api: &Api<Lease>,
    options: &LeaseOptions,
    leader: &watch::Sender<bool>,
    mid_round: bool,
    done: Result<std::sync::mpsc::Sender<()>, oneshot::error::RecvError>,
) {
    if leader.send_replace(false) || mid_round {
        match release(api, options).await {
            Ok(true) => tracing::info!(lease = %options.name, "released the lease"),
            Ok(false) => tracing::debug!(lease = %options.name, "the lease is not ours to release"),
            Err(e) => {
                tracing::warn!(lease = %options.name, error = %e, "cannot release the lease; it expires by itself")
            }
        }
    }
    if let Ok(done) = done {
        let _ = done.send(());
    }
}

/// Gives the Lease up if this replica holds it: no holder, and a renew time of now, so a replica
/// watching the Lease takes it at once (one that only polls, at its next round). `Ok(false)` when
/// another replica holds it. A conflict (the Lease changed between the read and the write, as when
/// a renewal cut short by the shutdown landed late) reads it again.
async fn release(api: &Api<Lease>, options: &LeaseOptions) -> Result<bool, kube::Error> {
    let mut attempts = 3;
    loop {
        let Some(mut lease) = api.get_opt(&options.name).await? else { return Ok(false) };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(options.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match api.replace(&options.name, &PostParams::default(), &lease).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 && attempts > 1 => attempts -= 1,
            Err(e) => return Err(e),
        }
    }
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
    Observed::update(observed, spec, options.duration);
    let expired = observed.as_ref().is_some_and(|o| o.expires() <= Instant::now());
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
