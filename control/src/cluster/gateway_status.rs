//! Gateway API status, written by the elected replica as a fixed point: what the compile of the
//! generation being served says ([`Applier::served`](crate::apply::Applier::served)) about our
//! GatewayClasses, Gateways, the HTTPRoutes, GRPCRoutes, TCPRoutes, UDPRoutes and TLSRoutes
//! attached to them and the BackendTLSPolicies of their Services, compared with what
//! is there (ignoring `lastTransitionTime`, which is kept while a condition's status holds), and
//! written only when different.
//!
//! The report comes with the generation, never from a compile of the writer's own: status always
//! describes the table on the wire. A change that is compiled but not served (held back by a pin,
//! or not yet applied) does not show in status until its generation is published; while a
//! rollback pins an older generation, status describes that one (`observedGeneration` included).
//!
//! How each list merges decides how it is written (from the standard-channel CRDs):
//! * GatewayClass and Gateway status belong to the class's controller alone (conditions and
//!   listeners are maps keyed by type and name): server-side apply, field manager `ramjet`.
//! * An HTTPRoute's (and a GRPCRoute's) `status.parents`, and a BackendTLSPolicy's
//!   `status.ancestors`, are `x-kubernetes-list-type: atomic`: an apply would replace the whole
//!   list, entries of other controllers included. So it is read, modified and replaced: the entries whose `controllerName` is not ours stay as they are, ours
//!   are replaced, and the write carries the resourceVersion it was computed from (a conflict waits
//!   for the watch's newer copy).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::status::{desired, Address};
use super::watch::Stores;
use super::{ClusterOptions, FIELD_MANAGER};
use crate::apply::Compiled;
use crate::compile::status::{GatewayReport, ParentReport, PortFaults, Report, RouteReport, StatusCondition};
use crate::gateway_api::{
    BackendTlsPolicy, Gateway, GatewayClass, GrpcRoute, HttpRoute, TcpRoute, TlsRoute, UdpRoute, GROUP,
};

/// Keeps Gateway API status right while this replica leads: on every newly served generation (or
/// new report for it), and on changes to the objects (whose current status the writes compare
/// with). Until the Gateway API stores exist (`--gateway-api` on, the CRDs installed after ramjet
/// started) each wake-up finds nothing to do; the stores' arrival wakes it. Nothing is written
/// before the first generation is served. A listener whose port the data plane could not open
/// (`faults`) is refused in status until the port opens.
pub async fn run(
    client: Client,
    stores: Stores,
    options: Arc<ClusterOptions>,
    mut leader: watch::Receiver<bool>,
    mut served: watch::Receiver<Option<Compiled>>,
    mut faults: watch::Receiver<PortFaults>,
) {
    if !options.gateway_api {
        return;
    }
    stores.ready().await;
    loop {
        let report =
            served.borrow_and_update().as_ref().map(|c| c.gateway_status.with_port_faults(&faults.borrow_and_update()));
        let leading = *leader.borrow_and_update();
        if let (true, Some(report)) = (leading, report) {
            sync(&client, &stores, &options, &report).await;
        }
        tokio::select! {
            _ = stores.gateway_changed.notified() => tokio::time::sleep(options.debounce).await,
            changed = leader.changed() => if changed.is_err() { return },
            changed = served.changed() => if changed.is_err() { return },
            // Its sender gone (the data plane stopped): no fault changes any more.
            changed = faults.changed(), if faults.has_changed().is_ok() => if changed.is_err() { continue },
        }
    }
}

/// Writes what `report` (the served generation's) says, where it differs from what is there.
async fn sync(client: &Client, stores: &Stores, options: &ClusterOptions, report: &Report) {
    let Some(g) = stores.gateway.get() else { return };
    let controller = options.ingress.gateway_controller_name.as_str();
    let service = stores.status_service.as_ref().and_then(|s| s.state().into_iter().next());
    let addresses = desired(&options.status_addresses, service.as_deref()).unwrap_or_default();

    for class in &report.classes {
        let Some(current) = g.classes.state().into_iter().find(|c| c.metadata.name.as_deref() == Some(&class.name))
        else {
            continue;
        };
        let have = current.status.as_ref().and_then(|s| s.get("conditions"));
        let want = conditions(&class.conditions, class.generation, have);
        if have.is_some_and(|h| same_conditions(h, &want)) {
            continue;
        }
        let patch = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "GatewayClass",
            "metadata": { "name": class.name },
            "status": { "conditions": want },
        });
        let api: Api<GatewayClass> = Api::all(client.clone());
        apply(
            api.patch_status(&class.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await,
            "GatewayClass",
            &class.name,
        );
    }

    for report in &report.gateways {
        let found = g.gateways.state().into_iter().find(|o| {
            o.metadata.namespace.as_deref() == Some(&report.namespace)
                && o.metadata.name.as_deref() == Some(&report.name)
        });
        let Some(current) = found else { continue };
        let want = gateway_status(report, &addresses, current.status.as_ref());
        if current.status.as_ref().is_some_and(|have| same_gateway_status(have, &want)) {
            continue;
        }
        let patch = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": { "name": report.name, "namespace": report.namespace },
            "status": want,
        });
        let api: Api<Gateway> = Api::namespaced(client.clone(), &report.namespace);
        let name = format!("{}/{}", report.namespace, report.name);
        apply(
            api.patch_status(&report.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await,
            "Gateway",
            &name,
        );
    }

    for route in g.http_routes.state() {
        let ours = about(&report.routes, &route.metadata).map(|r| (&r.parents[..], r.generation));
        write_parents::<HttpRoute>(client, controller, &route.metadata, route.status.as_ref(), ours, PARENTS).await;
    }
    for route in g.grpc_routes.iter().flat_map(|s| s.state()) {
        let ours = about(&report.grpc_routes, &route.metadata).map(|r| (&r.parents[..], r.generation));
        write_parents::<GrpcRoute>(client, controller, &route.metadata, route.status.as_ref(), ours, PARENTS).await;
    }
    for route in g.tcp_routes.iter().flat_map(|s| s.state()) {
        let ours = about(&report.tcp_routes, &route.metadata).map(|r| (&r.parents[..], r.generation));
        write_parents::<TcpRoute>(client, controller, &route.metadata, route.status.as_ref(), ours, PARENTS).await;
    }
    for route in g.udp_routes.iter().flat_map(|s| s.state()) {
        let ours = about(&report.udp_routes, &route.metadata).map(|r| (&r.parents[..], r.generation));
        write_parents::<UdpRoute>(client, controller, &route.metadata, route.status.as_ref(), ours, PARENTS).await;
    }
    for route in g.tls_routes.iter().flat_map(|s| s.state()) {
        let ours = about(&report.tls_routes, &route.metadata).map(|r| (&r.parents[..], r.generation));
        write_parents::<TlsRoute>(client, controller, &route.metadata, route.status.as_ref(), ours, PARENTS).await;
    }
    for policy in g.backend_tls.iter().flat_map(|policies| policies.state()) {
        let (namespace, name) = (policy.metadata.namespace.as_deref(), policy.metadata.name.as_deref());
        let ours = report
            .backend_tls_policies
            .iter()
            .find(|r| namespace == Some(r.namespace.as_str()) && name == Some(r.name.as_str()))
            .map(|r| (&r.ancestors[..], r.generation));
        let status = policy.status.as_ref();
        write_parents::<BackendTlsPolicy>(client, controller, &policy.metadata, status, ours, ANCESTORS).await;
    }
}

/// What the report says about the route with this metadata.
fn about<'r>(reports: &'r [RouteReport], meta: &ObjectMeta) -> Option<&'r RouteReport> {
    let (namespace, name) = (meta.namespace.as_deref(), meta.name.as_deref());
    reports.iter().find(|r| namespace == Some(r.namespace.as_str()) && name == Some(r.name.as_str()))
}

/// A status list of entries per parent, and the field naming the parent: a route's
/// `parents[].parentRef`, a policy's `ancestors[].ancestorRef`.
type ParentList = (&'static str, &'static str);
const PARENTS: ParentList = ("parents", "parentRef");
const ANCESTORS: ParentList = ("ancestors", "ancestorRef");

/// Writes a route's `status.parents` (a policy's `status.ancestors`) when ramjet's entries in it
/// are not what `ours` says (none when ramjet has nothing to say about the object): its entries
/// and the `metadata.generation` they describe. Every other controller's entry is kept as it is.
async fn write_parents<K>(
    client: &Client,
    controller: &str,
    metadata: &ObjectMeta,
    status: Option<&Value>,
    ours: Option<(&[ParentReport], Option<i64>)>,
    (list, parent_field): ParentList,
) where
    K: kube::Resource<DynamicType = ()>,
{
    let kind = K::kind(&());
    let (Some(namespace), Some(name)) = (metadata.namespace.as_deref(), metadata.name.as_deref()) else {
        return;
    };
    // The generation of the object the served table was compiled from, not the one in the store now.
    let (parents, generation) = ours.unwrap_or((&[], None));
    let current: Vec<Value> = status.and_then(|s| s.get(list)).and_then(|p| p.as_array()).cloned().unwrap_or_default();
    let (mine, others): (Vec<Value>, Vec<Value>) =
        current.into_iter().partition(|p| p.get("controllerName").and_then(|c| c.as_str()) == Some(controller));
    let want: Vec<Value> = parents
        .iter()
        .map(|p| {
            let before = mine.iter().find(|m| m.get(parent_field) == Some(&json!(p.parent_ref)));
            json!({
                parent_field: p.parent_ref,
                "controllerName": controller,
                "conditions": conditions(&p.conditions, generation, before.and_then(|b| b.get("conditions"))),
            })
        })
        .collect();
    if mine.len() == want.len() && mine.iter().zip(&want).all(|(a, b)| same_parent(a, b, parent_field)) {
        return;
    }
    let mut all = others;
    all.extend(want);
    // The status, with the metadata (and so the resourceVersion) it was computed from: the
    // status subresource takes nothing else from the body, and a newer object makes the write a
    // conflict. The metadata is the object's own, managedFields aside (left out, the server
    // keeps them): the API server tracks field ownership against the body, so metadata missing
    // from it would be taken from every manager (the user's annotations and labels, ramjet's
    // canary state) though the object keeps it, and a later apply could no longer remove it.
    let mut updated = DynamicObject::new(name, &ApiResource::erase::<K>(&())).within(namespace);
    updated.metadata = metadata.clone();
    updated.metadata.managed_fields = None;
    updated.data = json!({ "status": { list: all } });
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<K>(&()));
    match api.replace_status(name, &PostParams::default(), &updated).await {
        Ok(_) => tracing::info!(object = %format!("{namespace}/{name}"), "{kind} status written"),
        // Our view was older than the object: the watch brings the newer one and we try again.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            tracing::debug!(object = %format!("{namespace}/{name}"), "{kind} changed while writing its status")
        }
        Err(e) => {
            tracing::warn!(object = %format!("{namespace}/{name}"), error = %e, "cannot write {kind} status")
        }
    }
}

fn apply<K>(result: Result<K, kube::Error>, kind: &str, name: &str) {
    match result {
        Ok(_) => tracing::info!(kind, name, "Gateway API status written"),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            tracing::debug!(kind, name, "not allowed to write status: {}", s.message)
        }
        Err(e) => tracing::warn!(kind, name, error = %e, "cannot write Gateway API status"),
    }
}

/// Conditions as status carries them; a condition whose status did not change keeps its
/// `lastTransitionTime` from `before`.
fn conditions(list: &[StatusCondition], generation: Option<i64>, before: Option<&Value>) -> Vec<Value> {
    let now = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap_or_default();
    list.iter()
        .map(|c| {
            let status = if c.status { "True" } else { "False" };
            let kept = before
                .and_then(|b| b.as_array())
                .into_iter()
                .flatten()
                .find(|b| b.get("type").and_then(|t| t.as_str()) == Some(c.type_))
                .filter(|b| b.get("status").and_then(|s| s.as_str()) == Some(status))
                .and_then(|b| b.get("lastTransitionTime").cloned());
            let mut message = c.message.clone();
            if message.is_empty() {
                message = c.reason.to_string();
            }
            json!({
                "type": c.type_,
                "status": status,
                "reason": c.reason,
                "message": message,
                "observedGeneration": generation.unwrap_or(0),
                "lastTransitionTime": kept.unwrap_or_else(|| now.clone()),
            })
        })
        .collect()
}

/// A condition list without its times, sorted by type: what "the same status" compares.
fn comparable(list: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut c = c.clone();
            if let Some(o) = c.as_object_mut() {
                o.remove("lastTransitionTime");
            }
            c
        })
        .collect();
    out.sort_by_key(|c| c.get("type").and_then(|t| t.as_str()).unwrap_or("").to_string());
    out
}

fn same_conditions(have: &Value, want: &[Value]) -> bool {
    comparable(have) == comparable(&Value::Array(want.to_vec()))
}

fn same_parent(have: &Value, want: &Value, parent_field: &str) -> bool {
    have.get(parent_field) == want.get(parent_field)
        && comparable(have.get("conditions").unwrap_or(&Value::Null))
            == comparable(want.get("conditions").unwrap_or(&Value::Null))
}

fn gateway_status(report: &GatewayReport, addresses: &[Address], before: Option<&Value>) -> Value {
    let listeners: Vec<Value> = report
        .listeners
        .iter()
        .map(|l| {
            let was = before
                .and_then(|b| b.get("listeners"))
                .and_then(|l| l.as_array())
                .into_iter()
                .flatten()
                .find(|b| b.get("name").and_then(|n| n.as_str()) == Some(&l.name));
            json!({
                "name": l.name,
                "attachedRoutes": l.attached_routes,
                "supportedKinds": l.supported_kinds.iter().map(|k| json!({ "group": GROUP, "kind": k })).collect::<Vec<_>>(),
                "conditions": conditions(&l.conditions, report.generation, was.and_then(|w| w.get("conditions"))),
            })
        })
        .collect();
    let mut status = json!({
        "conditions": conditions(&report.conditions, report.generation, before.and_then(|b| b.get("conditions"))),
        "listeners": listeners,
    });
    if !addresses.is_empty() {
        status["addresses"] = addresses
            .iter()
            .map(|a| match a {
                Address::Ip(ip) => json!({ "type": "IPAddress", "value": ip }),
                Address::Hostname(h) => json!({ "type": "Hostname", "value": h }),
            })
            .collect();
    }
    status
}

fn same_gateway_status(have: &Value, want: &Value) -> bool {
    let listeners = |v: &Value| -> Vec<(Value, Value, Value, Vec<Value>)> {
        let mut out: Vec<_> = v
            .get("listeners")
            .and_then(|l| l.as_array())
            .into_iter()
            .flatten()
            .map(|l| {
                (
                    l.get("name").cloned().unwrap_or_default(),
                    l.get("attachedRoutes").cloned().unwrap_or_default(),
                    l.get("supportedKinds").cloned().unwrap_or_default(),
                    comparable(l.get("conditions").unwrap_or(&Value::Null)),
                )
            })
            .collect();
        out.sort_by_key(|l| l.0.to_string());
        out
    };
    have.get("addresses").cloned().unwrap_or(json!([])) == want.get("addresses").cloned().unwrap_or(json!([]))
        && comparable(have.get("conditions").unwrap_or(&Value::Null))
            == comparable(want.get("conditions").unwrap_or(&Value::Null))
        && listeners(have) == listeners(want)
}
