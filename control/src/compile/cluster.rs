//! The one entry point that compiles Kubernetes objects: the Ingresses of a [`ClusterSnapshot`],
//! then its Gateway API objects, into one draft — table, diagnostics, auto-promoting canaries and
//! the Gateway API status report, all from the same objects in the same pass (as Envoy Gateway's
//! translator yields its IR and its status together).

use super::resolve::Resolver;
use super::snapshot::ClusterSnapshot;
use super::{gateway, ingress, Compiler, Draft};

/// Compiles `snapshot` into a draft: Ingresses first, then the Gateway API's routes into the same
/// table (on a conflict the Ingress, added first, keeps the path), both resolving through one
/// [`Resolver`]. The draft's [`Draft::gateway_status`] says what status the Gateway API objects
/// have in the table compiled here.
pub fn compile(snapshot: &ClusterSnapshot, compiler: &mut Compiler) -> Draft {
    let mut draft = Draft::default();
    draft.diagnostics.extend(snapshot.diagnostics.iter().cloned());
    let mut resolver = Resolver::new(snapshot, compiler);
    ingress::compile(snapshot, &mut resolver, &mut draft);
    draft.gateway_status = gateway::compile(snapshot, &mut resolver, &mut draft);
    draft
}
