//! BackendTLSPolicy (v1): the Services a policy targets are spoken to over TLS by every route of
//! ours that uses them (backendRefs and mirrors), verified as its `validation` says.
//!
//! Each policy is judged once per compile, oldest first:
//! * its CA certificates: `ca.crt` of each ConfigMap in `caCertificateRefs` (Core), of a Secret
//!   (ramjet's own extension), or the Mozilla roots for `wellKnownCACertificates: System`;
//! * `hostname` is the SNI sent, and the name verified unless `subjectAltNames` are given, which
//!   then say the names the certificate may carry (DNS names or URIs);
//! * a reference that cannot be used makes `ResolvedRefs` false (`InvalidKind`,
//!   `InvalidCACertificateRef`) and the policy's connections fail: its Services' requests get a
//!   502, never a connection with less verification than asked. Without any usable CA
//!   certificate `Accepted` is false (`NoValidCACertificate`);
//! * a target (a Service, or one of its ports by `sectionName`) already claimed by an older policy
//!   is `Conflicted`; a port's own policy comes before its Service's.
//!
//! Status is per ancestor: the Gateways whose attached routes use a targeted Service.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use ramjet_shared::{ObjectRef, SubjectAltName, UpstreamTls, UpstreamTlsSpec};

use super::super::resolve::{CaRefProblem, Resolver};
use super::super::snapshot::{namespace_of, ClusterSnapshot};
use super::super::status::{ParentReport, PolicyReport, StatusCondition};
use super::super::Draft;
use super::age;
use crate::gateway_api::{BackendTlsPolicy, HttpRoute, ParentReference, GROUP};

const WELL_KNOWN_SYSTEM: &str = "System";

/// The compile's policies, judged.
#[derive(Default)]
pub(super) struct BackendTlsPolicies<'s> {
    /// The policy (index into `judged`) that applies to a Service (namespace, name) as a whole
    /// (`None`) or to one of its ports by name.
    by_target: HashMap<(&'s str, &'s str, Option<&'s str>), usize>,
    judged: Vec<Judged<'s>>,
}

struct Judged<'s> {
    policy: &'s BackendTlsPolicy,
    accepted: StatusCondition,
    resolved_refs: StatusCondition,
    /// The TLS its Services are spoken to with (and what it was made from), or why their
    /// connections fail.
    tls: Result<PolicyTls, String>,
    /// The Gateways whose routes use its Services.
    ancestors: BTreeSet<ParentReference>,
    /// The older policy that holds its target, when it is `Conflicted`.
    conflicted_with: Option<usize>,
}

/// The TLS a policy asks for, and the settings it was made from.
type PolicyTls = (Arc<UpstreamTls>, UpstreamTlsSpec);

/// What a backend of a policy's Service is spoken to with.
pub(super) enum BackendTls {
    /// Over TLS, verified as the policy says; what it was made from (a Gateway that presents a
    /// client certificate to backends adds it).
    Verified(Arc<UpstreamTls>, UpstreamTlsSpec),
    /// The policy cannot be used (its status says why): requests get a 502.
    Refused,
}

impl<'s> BackendTlsPolicies<'s> {
    pub(super) fn judge(snapshot: &'s ClusterSnapshot, resolver: &mut Resolver<'s, '_>, draft: &mut Draft) -> Self {
        let mut policies: Vec<&BackendTlsPolicy> = snapshot.backend_tls_policies.iter().map(|p| &**p).collect();
        policies.sort_by(|a, b| age(&a.metadata).cmp(&age(&b.metadata)));
        let mut judged = BackendTlsPolicies::default();
        for policy in policies {
            let namespace = namespace_of(&policy.metadata.namespace);
            let name = policy.metadata.name.as_deref().unwrap_or("");
            let object = ObjectRef::new("BackendTLSPolicy", Some(namespace), name);
            let (mut accepted, resolved_refs, tls) = validate(policy, namespace, resolver);
            let index = judged.judged.len();
            let mut conflicted_with = None;
            for target in &policy.spec.target_refs {
                if !target.group.is_empty() || target.kind != "Service" {
                    draft.warn(
                        &object,
                        format!(
                            "targetRef {}/{} {}: only Services are targeted",
                            target.group, target.kind, target.name
                        ),
                    );
                    continue;
                }
                let section = target.section_name.as_deref().filter(|s| !s.is_empty());
                let key = (namespace, target.name.as_str(), section);
                // Even a policy that cannot be used holds its target: its Services' requests fail
                // rather than go out in clear.
                match judged.by_target.get(&key) {
                    Some(&older) if conflicted_with.is_none() => {
                        let holder = judged.judged[older].policy.metadata.name.as_deref().unwrap_or("");
                        let message = format!(
                            "Service {} is already targeted by the older BackendTLSPolicy {holder}",
                            target.name
                        );
                        accepted = StatusCondition::new("Accepted", false, "Conflicted", message);
                        conflicted_with = Some(older);
                    }
                    Some(_) => {}
                    None => {
                        judged.by_target.insert(key, index);
                    }
                }
            }
            if !accepted.status {
                draft.warn(&object, accepted.message.clone());
            } else if !resolved_refs.status {
                draft.warn(&object, format!("{}; requests to its Services get 502", resolved_refs.message));
            }
            let ancestors = BTreeSet::new();
            judged.judged.push(Judged { policy, accepted, resolved_refs, tls, ancestors, conflicted_with });
        }
        judged
    }

    /// How the Service `namespace/service` is spoken to on its port named `port` (`""`: unnamed),
    /// when a policy targets it.
    pub(super) fn for_backend(&self, namespace: &str, service: &str, port: &str) -> Option<BackendTls> {
        let index = self
            .by_target
            .get(&(namespace, service, Some(port)))
            .filter(|_| !port.is_empty())
            .or_else(|| self.by_target.get(&(namespace, service, None)))?;
        Some(match &self.judged[*index].tls {
            Ok((tls, spec)) => BackendTls::Verified(tls.clone(), spec.clone()),
            Err(_) => BackendTls::Refused,
        })
    }

    /// Notes the Gateways of `parents` (a route's attached parents) as ancestors of the policies
    /// of the Services `route` uses (its backendRefs and mirrors).
    pub(super) fn used_by(&mut self, route: &HttpRoute, parents: &[ParentReference], resolver: &Resolver<'s, '_>) {
        if self.by_target.is_empty() {
            return;
        }
        let own = namespace_of(&route.metadata.namespace);
        let mirrors = route.spec.rules.iter().flat_map(|r| {
            let filters = r.filters.iter().chain(r.backend_refs.iter().flat_map(|b| &b.filters));
            filters.filter_map(|f| f.request_mirror.as_ref()).map(|m| &m.backend_ref)
        });
        let refs = route.spec.rules.iter().flat_map(|r| r.backend_refs.iter().map(|b| &b.backend));
        let mut used = BTreeSet::new();
        for reference in refs.chain(mirrors) {
            let group = reference.group.as_deref().unwrap_or("");
            if !group.is_empty() || reference.kind.as_deref().unwrap_or("Service") != "Service" {
                continue;
            }
            let namespace = reference.namespace.as_deref().unwrap_or(own);
            let port = reference.port.and_then(|p| resolver.port_name(namespace, &reference.name, p)).unwrap_or("");
            let by_port =
                (!port.is_empty()).then(|| self.by_target.get(&(namespace, reference.name.as_str(), Some(port))));
            let found = by_port.flatten().or_else(|| self.by_target.get(&(namespace, reference.name.as_str(), None)));
            used.extend(found.copied());
        }
        for index in used {
            for parent in parents {
                let gateway = ParentReference {
                    group: Some(GROUP.into()),
                    kind: Some("Gateway".into()),
                    namespace: Some(parent.namespace.clone().unwrap_or_else(|| own.to_string())),
                    name: parent.name.clone(),
                    section_name: None,
                    port: None,
                };
                self.judged[index].ancestors.insert(gateway);
            }
        }
    }

    /// What status says about each policy that has an ancestor of ours. A conflicted policy is
    /// never used, so it has none of its own: it is told on the Gateways of the policy that holds
    /// its target.
    pub(super) fn reports(self) -> Vec<PolicyReport> {
        let judged = &self.judged;
        judged
            .iter()
            .filter_map(|j| {
                let mut ancestors = j.ancestors.clone();
                if let Some(holder) = j.conflicted_with {
                    ancestors.extend(judged[holder].ancestors.iter().cloned());
                }
                if ancestors.is_empty() {
                    return None;
                }
                let meta = &j.policy.metadata;
                let conditions = vec![j.accepted.clone(), j.resolved_refs.clone()];
                Some(PolicyReport {
                    namespace: namespace_of(&meta.namespace).to_string(),
                    name: meta.name.clone().unwrap_or_default(),
                    generation: meta.generation,
                    ancestors: ancestors
                        .into_iter()
                        .map(|parent_ref| ParentReport { parent_ref, conditions: conditions.clone() })
                        .collect(),
                })
            })
            .collect()
    }
}

/// A policy's `Accepted` and `ResolvedRefs`, and the TLS it asks for.
fn validate(
    policy: &BackendTlsPolicy,
    namespace: &str,
    resolver: &mut Resolver<'_, '_>,
) -> (StatusCondition, StatusCondition, Result<PolicyTls, String>) {
    let validation = &policy.spec.validation;
    let invalid = |message: String| {
        let accepted = StatusCondition::new("Accepted", false, "Invalid", message.clone());
        (accepted, StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", ""), Err(message))
    };
    let refs = &validation.ca_certificate_refs;
    let well_known = validation.well_known_ca_certificates.as_deref().filter(|w| !w.is_empty());
    let bundle = match (refs.is_empty(), well_known) {
        (false, Some(_)) => {
            return invalid("caCertificateRefs and wellKnownCACertificates cannot both be given".into())
        }
        (true, None) => return invalid("validation needs caCertificateRefs or wellKnownCACertificates".into()),
        (true, Some(WELL_KNOWN_SYSTEM)) => Ok(crate::certs::mozilla_roots()),
        (true, Some(other)) => {
            return invalid(format!("wellKnownCACertificates {other:?} is not supported (only {WELL_KNOWN_SYSTEM:?})"))
        }
        (false, None) => {
            let mut pem = Vec::new();
            let mut problems = Vec::new();
            for reference in refs {
                let (group, kind, name) = (&reference.group, &reference.kind, &reference.name);
                match resolver.ca_certificates(namespace, group, kind, name) {
                    Ok(found) => {
                        pem.extend_from_slice(found);
                        pem.push(b'\n');
                    }
                    Err(CaRefProblem::Unusable(why)) => problems.push(("InvalidCACertificateRef", why)),
                    Err(CaRefProblem::WrongKind(why)) => {
                        problems.push(("InvalidKind", format!("caCertificateRef {why}")))
                    }
                }
            }
            let sources: Vec<String> = refs.iter().map(|r| format!("{namespace}/{}", r.name)).collect();
            let bundle = (!pem.is_empty()).then(|| resolver.compiler.ca_bundle(&pem, &sources.join(", ")));
            match (problems.first(), bundle) {
                (None, Some(Ok(bundle))) => Ok(bundle),
                (Some((reason, message)), Some(Ok(_))) => Err((*reason, message.clone(), true)),
                (Some((reason, message)), None) => Err((*reason, message.clone(), false)),
                (_, Some(Err(e))) => Err(("InvalidCACertificateRef", format!("the CA certificates: {e}"), false)),
                (None, None) => unreachable!("refs is not empty"),
            }
        }
    };
    let bundle = match bundle {
        Ok(bundle) => bundle,
        Err((reason, message, some_usable)) => {
            let resolved = StatusCondition::new("ResolvedRefs", false, reason, message.clone());
            let accepted = match some_usable {
                true => StatusCondition::new("Accepted", true, "Accepted", ""),
                false => StatusCondition::new("Accepted", false, "NoValidCACertificate", message.clone()),
            };
            return (accepted, resolved, Err(message));
        }
    };
    let mut names = Vec::new();
    for san in &validation.subject_alt_names {
        match (san.type_.as_str(), &san.hostname, &san.uri) {
            ("Hostname", Some(host), _) if !host.is_empty() => {
                names.push(SubjectAltName::Dns(host.to_ascii_lowercase()))
            }
            ("URI", _, Some(uri)) if !uri.is_empty() => names.push(SubjectAltName::Uri(uri.clone())),
            (other, _, _) => return invalid(format!("subjectAltNames: a {other:?} entry without its value")),
        }
    }
    let spec = UpstreamTlsSpec {
        verify: Some(bundle),
        server_name: validation.hostname.to_ascii_lowercase(),
        sni: true,
        client_cert: None,
        subject_alt_names: names,
    };
    match resolver.compiler.upstream_tls(&spec) {
        Ok(tls) => (
            StatusCondition::new("Accepted", true, "Accepted", ""),
            StatusCondition::new("ResolvedRefs", true, "ResolvedRefs", ""),
            Ok((tls, spec)),
        ),
        Err(e) => invalid(format!("hostname: {e}")),
    }
}
