//! The chart's ValidatingAdmissionPolicy, run by the real API server: an Ingress of ramjet's class
//! that ramjet would refuse to serve is refused at `kubectl apply`, with the reason; one it serves,
//! and any Ingress of another class, are written as they are.

use super::*;

fn ingress(ns: &str, name: &str, class: &str, annotations: &str) -> Value {
    let yaml = Ingress::new(ns, name)
        .class(class)
        .host(&format!("{name}.test"))
        .to("web")
        .annotations_yaml(annotations)
        .yaml();
    serde_yaml_ng::from_str(&yaml).unwrap()
}

#[test]
fn the_admission_policy_refuses_what_ramjet_would_not_serve() {
    let plane = ControlPlane::shared();
    let admin = Kube::new(&plane.admin_kubeconfig);
    let values = json!({
        "ingressClass": { "name": "admitted", "controllerValue": "ramjet.dev/admitted" },
        "admissionPolicy": { "enabled": true },
        "gatewayAPI": { "enabled": false },
    });
    let docs = render("admitted", "t-admitted", &values);
    for kind in ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] {
        let doc = docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("the chart renders a {kind}"));
        admin.apply_value(doc, "test").unwrap_or_else(|e| panic!("the API server takes the {kind}: {e}"));
    }
    let ns = "t-admitted-apps";
    admin.apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{ name: {ns} }}\n"));
    let write =
        |name: &str, class: &str, annotations: &str| admin.apply_value(&ingress(ns, name, class, annotations), "test");
    // The policy takes a moment to be loaded by the API server: until a snippet is refused.
    let refused = |result: Result<Value, kube::Error>| match result {
        Err(kube::Error::Api(e)) if e.code == 422 => Some(e.message),
        _ => None,
    };
    let snippet = "nginx.ingress.kubernetes.io/configuration-snippet: \"more_set_headers 'X: y';\"";
    assert!(
        eventually(PATIENCE, || refused(write("snippet", "admitted", snippet)).is_some()),
        "the policy never refused a snippet"
    );
    let why = refused(write("snippet", "admitted", snippet)).unwrap();
    assert!(why.contains("snippet annotations are never interpreted"), "{why}");
    let why =
        refused(write("typo", "admitted", "ramjet.dev/canary-wieght: \"10\"")).expect("a ramjet.dev typo is refused");
    assert!(why.contains("ramjet.dev/canary-wieght"), "{why}");
    let why = refused(write("size", "admitted", "nginx.ingress.kubernetes.io/proxy-body-size: 8 megabytes"))
        .expect("a size that does not parse is refused");
    assert!(why.contains("proxy-body-size"), "{why}");
    assert!(refused(write("digest", "admitted", "ramjet.dev/auth-type: digest")).is_some());
    // What ramjet serves is written, blank values included; other classes are not ramjet's to judge.
    let fine = "nginx.ingress.kubernetes.io/proxy-body-size: 8m, ramjet.dev/canary-auto-promote: \"true\", \
                nginx.ingress.kubernetes.io/limit-rps: \" \", nginx.ingress.kubernetes.io/proxy-read-timeout: \"120\"";
    write("fine", "admitted", fine).expect("an Ingress ramjet serves is written");
    write("other", "nginx", snippet).expect("another class's Ingress is not judged");
    for kind in ["ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"] {
        admin.delete(kind, None, "admitted-ramjet-ingress");
    }
    admin.delete("Namespace", None, ns);
}
