//! What Gateway API status says about each object of a compile: conditions with the spec's
//! reasons, per GatewayClass, Gateway (and listener) and route parent. The Gateway API compiler
//! writes it into the draft beside the table ([`super::Draft::gateway_status`]), so the status
//! written to the cluster describes the same compile as the table — and the cluster's status
//! writer takes it from the generation being served, never from a compile of its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use ramjet_shared::Transport;

use crate::gateway_api::ParentReference;

/// The route ports the data plane could not open (another process holds one, or it is
/// privileged), with why: what listener status says about them until they open.
pub type PortFaults = Arc<BTreeMap<(Transport, u16), String>>;

/// One status condition as ramjet computes it (the writer adds times and generations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCondition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl StatusCondition {
    pub fn new(type_: &'static str, status: bool, reason: &'static str, message: impl Into<String>) -> Self {
        StatusCondition { type_, status, reason, message: message.into() }
    }
}

/// What status says about one of our GatewayClasses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassReport {
    pub name: String,
    pub generation: Option<i64>,
    pub conditions: Vec<StatusCondition>,
}

/// What status says about one listener of one of our Gateways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerReport {
    pub name: String,
    pub attached_routes: i32,
    /// The route kinds the listener admits and ramjet serves.
    pub supported_kinds: Vec<&'static str>,
    pub conditions: Vec<StatusCondition>,
    /// The port of its own the listener is served on (TCP, UDP, and TLS beside ramjet's HTTPS
    /// port), when it is served: where a fault opening the port shows.
    pub port: Option<(Transport, u16)>,
}

/// What status says about one of our Gateways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayReport {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub conditions: Vec<StatusCondition>,
    pub listeners: Vec<ListenerReport>,
}

/// What one HTTPRoute's `status.parents` entry for one of our Gateways says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentReport {
    pub parent_ref: ParentReference,
    pub conditions: Vec<StatusCondition>,
}

/// What status says about one HTTPRoute or GRPCRoute: its parents, and the `metadata.generation`
/// compiled (the `observedGeneration` written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteReport {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub parents: Vec<ParentReport>,
}

/// What status says about one BackendTLSPolicy: an entry per Gateway of ours whose routes use
/// the Services it targets (`status.ancestors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyReport {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub ancestors: Vec<ParentReport>,
}

/// Everything the status writer needs, from one compile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub classes: Vec<ClassReport>,
    pub gateways: Vec<GatewayReport>,
    /// HTTPRoutes.
    pub routes: Vec<RouteReport>,
    pub grpc_routes: Vec<RouteReport>,
    pub tcp_routes: Vec<RouteReport>,
    pub udp_routes: Vec<RouteReport>,
    pub tls_routes: Vec<RouteReport>,
    pub backend_tls_policies: Vec<PolicyReport>,
}

impl Report {
    /// This report with the listeners whose port could not be opened refused
    /// (`PortUnavailable`, saying why), and their Gateways' `Accepted` saying so.
    pub fn with_port_faults(&self, faults: &PortFaults) -> Report {
        let mut report = self.clone();
        if faults.is_empty() {
            return report;
        }
        for gateway in &mut report.gateways {
            let mut faulty = false;
            for listener in &mut gateway.listeners {
                let Some(why) = listener.port.and_then(|port| faults.get(&port)) else { continue };
                faulty = true;
                listener.conditions.retain(|c| !matches!(c.type_, "Accepted" | "Programmed"));
                listener.conditions.push(StatusCondition::new("Accepted", false, "PortUnavailable", why.clone()));
                listener.conditions.push(StatusCondition::new("Programmed", false, "Invalid", why.clone()));
            }
            if faulty {
                for condition in gateway.conditions.iter_mut().filter(|c| c.type_ == "Accepted") {
                    *condition =
                        StatusCondition::new("Accepted", true, "ListenersNotValid", "some listeners are not served");
                }
            }
        }
        report
    }
}
