//! The one entry point that compiles Kubernetes objects: the Ingresses of a [`ClusterSnapshot`],
//! then its Gateway API objects, into one draft — table, diagnostics, auto-promoting canaries and
//! the Gateway API status report, all from the same objects in the same pass (as Envoy Gateway's
//! translator yields its IR and its status together).

use ramjet_shared::ObjectRef;

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
    default_certificate(snapshot, &mut resolver, &mut draft);
    draft.dns_names = std::mem::take(&mut resolver.dns_names);
    draft
}

/// `--default-ssl-certificate`: the Secret's certificate for every name that has none, as the
/// table's catch-all (the certificate for any name, which a Gateway HTTPS listener without a hostname
/// claims first). A Secret
/// that is missing or unusable is reported and the previous handshakes' fallback serves.
fn default_certificate<'s>(snapshot: &'s ClusterSnapshot, resolver: &mut Resolver<'s, '_>, draft: &mut Draft) {
    let Some((namespace, name)) = &snapshot.options.default_ssl_certificate else { return };
    let object = ObjectRef::new("Secret", Some(namespace), name.clone());
    match resolver.certificate(namespace, name) {
        Ok(cert) => {
            if draft.builder.add_tls_host("", cert.id) {
                draft.certificates.push(cert);
            } else {
                draft.warn(
                    &object,
                    "--default-ssl-certificate is not used: a Gateway HTTPS listener without a hostname serves every name",
                );
            }
        }
        Err(why) => draft.warn(&object, format!("--default-ssl-certificate cannot be served: {why}")),
    }
}
