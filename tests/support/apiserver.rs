//! A Kubernetes API server for tests: real HTTP on 127.0.0.1, speaking the wire protocol the real
//! `kube::Client` speaks, over an in-memory object store.
//!
//! * `GET` a collection: a list with the store's `resourceVersion` (field selectors `a=b` on
//!   `type` and `metadata.name`). [`ApiServer::hold_lists`] makes lists of one resource wait.
//! * `GET …?watch=true&resourceVersion=N`: a stream of `ADDED` / `MODIFIED` / `DELETED` events after
//!   N, `BOOKMARK`s every [`BOOKMARK_EVERY`], ended after `timeoutSeconds` or by
//!   [`ApiServer::drop_watches`]. A version older than the log ([`ApiServer::compact`]) gets the
//!   `ERROR` event with a 410 `Expired` Status that makes a client relist, as a real server does.
//! * `GET` / `POST` / `PUT` one object (Leases, Events), with resourceVersion conflicts (409) and
//!   `AlreadyExists`; [`ApiServer::forbid`] answers 403 for a resource;
//!   [`ApiServer::namespace_missing`] answers creates in a namespace with 404 `namespaces "…" not
//!   found`, as a brand-new real server does for `default` until its bootstrap controller ran.
//! * `PATCH …/status` with `application/apply-patch+yaml`: server-side apply of `status`.
//!
//! Tests change objects with [`ApiServer::apply`] and [`ApiServer::delete`] and read what the
//! client wrote with [`ApiServer::events`], [`ApiServer::status_patches`] and friends.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::Notify;

pub const BOOKMARK_EVERY: Duration = Duration::from_millis(500);

/// One change, as a watch reports it.
#[derive(Clone)]
struct Change {
    rv: u64,
    resource: String,
    namespace: String,
    kind: &'static str,
    object: Value,
}

/// A status patch the client made.
#[derive(Clone, Debug)]
pub struct StatusPatch {
    pub namespace: String,
    pub name: String,
    pub content_type: String,
    pub query: String,
    pub body: Value,
}

#[derive(Default)]
struct Store {
    rv: u64,
    /// (resource, namespace, name) → object. Cluster-scoped objects have namespace "".
    objects: BTreeMap<(String, String, String), Value>,
    log: Vec<Change>,
    /// Watches from before this resourceVersion get 410 Gone.
    oldest: u64,
    /// Bumped to end every open watch.
    epoch: u64,
    held: HashSet<String>,
    forbidden: HashSet<String>,
    missing_namespaces: HashSet<String>,
    lists: HashMap<String, usize>,
    watches: HashMap<String, usize>,
    events: Vec<Value>,
    status_patches: Vec<StatusPatch>,
    lease_writes: Vec<(String, Value)>,
}

struct Shared {
    store: Mutex<Store>,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct ApiServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// `group/version/plural` from an object's apiVersion and kind.
fn resource_of(api_version: &str, kind: &str) -> String {
    let plural = match kind {
        "Ingress" => "ingresses".to_string(),
        "IngressClass" => "ingressclasses".to_string(),
        "EndpointSlice" => "endpointslices".to_string(),
        other => format!("{}s", other.to_ascii_lowercase()),
    };
    format!("{api_version}/{plural}")
}

fn kind_of(resource: &str) -> &'static str {
    match resource.rsplit('/').next().unwrap_or("") {
        "ingresses" => "Ingress",
        "ingressclasses" => "IngressClass",
        "services" => "Service",
        "endpointslices" => "EndpointSlice",
        "secrets" => "Secret",
        "events" => "Event",
        "leases" => "Lease",
        _ => "Unknown",
    }
}

fn cluster_scoped(resource: &str) -> bool {
    resource.ends_with("/ingressclasses")
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

fn json_response(code: StatusCode, value: Value) -> Response {
    (code, axum::Json(value)).into_response()
}

/// The parts of a request path: resource, namespace, name, subresource.
struct Target {
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group_version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => (version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (plural, None, None),
        [plural, name] => (plural, Some(name.to_string()), None),
        [plural, name, sub] => (plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return None,
    };
    Some(Target { resource: format!("{group_version}/{plural}"), namespace, name, subresource })
}

fn query_map(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => out.push(b),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 3]),
                }
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Field selectors of the form `a=b,c=d` on `type`, `metadata.name` and `metadata.namespace`.
fn matches_fields(object: &Value, selector: Option<&String>) -> bool {
    let Some(selector) = selector else { return true };
    selector.split(',').filter(|t| !t.is_empty()).all(|term| {
        let (key, want) = term.split_once("==").or_else(|| term.split_once('=')).unwrap_or((term, ""));
        let got = match key {
            "type" => object.get("type"),
            "metadata.name" => object.pointer("/metadata/name"),
            "metadata.namespace" => object.pointer("/metadata/namespace"),
            _ => None,
        };
        got.and_then(Value::as_str) == Some(want)
    })
}

impl ApiServer {
    pub fn start() -> ApiServer {
        let shared =
            Arc::new(Shared { store: Mutex::new(Store { rv: 100, ..Default::default() }), changed: Notify::new() });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let app_state = shared.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(handle).with_state(app_state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = shutdown_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        ApiServer { addr, shared, shutdown: Some(shutdown), thread: Some(thread) }
    }

    /// A kubeconfig file pointing at this server (namespace `ramjet`).
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://{}\n\
             users:\n- name: test\n  user: {{}}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: ramjet\n\
             current-context: test\n",
            self.addr
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Creates or replaces an object (given as YAML or JSON), as `kubectl apply` would; watches see
    /// ADDED or MODIFIED.
    pub fn apply(&self, yaml: &str) {
        for document in yaml.split("\n---\n").filter(|d| !d.trim().is_empty()) {
            let object: Value = serde_yaml_ng::from_str(document).unwrap_or_else(|e| panic!("{e}\n{document}"));
            self.apply_value(object);
        }
    }

    pub fn apply_value(&self, mut object: Value) {
        let api_version = object["apiVersion"].as_str().unwrap().to_string();
        let kind = object["kind"].as_str().unwrap().to_string();
        let resource = resource_of(&api_version, &kind);
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap().to_string();
        let namespace = if cluster_scoped(&resource) {
            String::new()
        } else {
            object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string()
        };
        let mut store = self.shared.lock();
        let key = (resource.clone(), namespace.clone(), name.clone());
        let existing = store.objects.get(&key).cloned();
        let meta = object["metadata"].as_object_mut().unwrap();
        if !namespace.is_empty() {
            meta.insert("namespace".into(), json!(namespace));
        }
        let uid = existing
            .as_ref()
            .and_then(|e| e.pointer("/metadata/uid").cloned())
            .unwrap_or_else(|| json!(format!("uid-{resource}-{namespace}-{name}").replace('/', "-")));
        meta.insert("uid".into(), uid);
        let created = existing
            .as_ref()
            .and_then(|e| e.pointer("/metadata/creationTimestamp").cloned())
            .or_else(|| meta.get("creationTimestamp").cloned())
            .unwrap_or_else(|| json!("2025-01-01T00:00:00Z"));
        meta.insert("creationTimestamp".into(), created);
        // Like the real thing, applying the spec keeps the status someone else wrote.
        if let (Some(old), None) = (existing.as_ref().and_then(|e| e.get("status")), object.get("status")) {
            object["status"] = old.clone();
        }
        let kind_event = if existing.is_some() { "MODIFIED" } else { "ADDED" };
        store.record(resource, namespace, name, kind_event, object);
        drop(store);
        self.shared.changed.notify_waiters();
    }

    pub fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let resource = resource_of(api_version, kind);
        let namespace = if cluster_scoped(&resource) { "" } else { namespace };
        let mut store = self.shared.lock();
        if let Some(object) = store.objects.remove(&(resource.clone(), namespace.into(), name.into())) {
            store.record_deletion(resource, namespace.into(), object);
        }
        drop(store);
        self.shared.changed.notify_waiters();
    }

    /// Makes lists of `resource` (`discovery.k8s.io/v1/endpointslices`) wait until released.
    pub fn hold_lists(&self, resource: &str, hold: bool) {
        let mut store = self.shared.lock();
        if hold {
            store.held.insert(resource.into());
        } else {
            store.held.remove(resource);
        }
    }

    /// Answers 403 to every request on `resource`.
    pub fn forbid(&self, resource: &str) {
        self.shared.lock().forbidden.insert(resource.into());
    }

    /// While `missing`, creates in `namespace` are refused with 404 `namespaces "…" not found`.
    pub fn namespace_missing(&self, namespace: &str, missing: bool) {
        let mut store = self.shared.lock();
        if missing {
            store.missing_namespaces.insert(namespace.into());
        } else {
            store.missing_namespaces.remove(namespace);
        }
    }

    /// Forgets the change log: a watch resuming from any resourceVersion handed out so far gets
    /// 410 Gone (a list made afterwards gives a version that can be watched from).
    pub fn compact(&self) {
        let mut store = self.shared.lock();
        store.rv += 1;
        store.oldest = store.rv;
        store.log.clear();
    }

    /// Ends every open watch stream (as an API server restart or a load balancer timeout would).
    pub fn drop_watches(&self) {
        self.shared.lock().epoch += 1;
        self.shared.changed.notify_waiters();
    }

    pub fn lists(&self, resource: &str) -> usize {
        self.shared.lock().lists.get(resource).copied().unwrap_or(0)
    }

    pub fn watches(&self, resource: &str) -> usize {
        self.shared.lock().watches.get(resource).copied().unwrap_or(0)
    }

    /// Events created, in order.
    pub fn events(&self) -> Vec<Value> {
        self.shared.lock().events.clone()
    }

    pub fn status_patches(&self) -> Vec<StatusPatch> {
        self.shared.lock().status_patches.clone()
    }

    /// Lease creates and updates: (verb, Lease).
    pub fn lease_writes(&self) -> Vec<(String, Value)> {
        self.shared.lock().lease_writes.clone()
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.shared.lock().objects.get(&(resource.into(), namespace.into(), name.into())).cloned()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.drop_watches();
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Store {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(
        &mut self,
        resource: String,
        namespace: String,
        name: String,
        kind: &'static str,
        mut object: Value,
    ) -> Value {
        let rv = self.next_rv();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.objects.insert((resource.clone(), namespace.clone(), name), object.clone());
        self.log.push(Change { rv, resource, namespace, kind, object: object.clone() });
        object
    }

    fn record_deletion(&mut self, resource: String, namespace: String, mut object: Value) {
        let rv = self.next_rv();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.log.push(Change { rv, resource, namespace, kind: "DELETED", object });
    }
}

async fn handle(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(target) = parse_path(uri.path()) else {
        return status(404, "NotFound", &format!("no such path {}", uri.path()));
    };
    let query = query_map(&uri);
    if shared.lock().forbidden.contains(&target.resource) {
        return status(403, "Forbidden", &format!("{} is forbidden for this test", target.resource));
    }
    match (&method, target.name.clone()) {
        (&Method::GET, None) if matches!(query.get("watch").map(String::as_str), Some("true" | "1")) => {
            watch(shared, target, query).await
        }
        (&Method::GET, None) => list(shared, target, query).await,
        (&Method::GET, Some(name)) => {
            let key = (target.resource.clone(), target.namespace.clone().unwrap_or_default(), name.clone());
            match shared.lock().objects.get(&key) {
                Some(o) => json_response(StatusCode::OK, o.clone()),
                None => status(404, "NotFound", &format!("{} \"{name}\" not found", kind_of(&target.resource))),
            }
        }
        (&Method::POST, None) => create(shared, target, &body),
        (&Method::PUT, Some(name)) => replace(shared, target, name, &body),
        (&Method::PATCH, Some(name)) if target.subresource.as_deref() == Some("status") => {
            let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            apply_status(shared, target, name, content_type, uri.query().unwrap_or("").to_string(), &body)
        }
        _ => status(405, "MethodNotAllowed", &format!("{method} {} is not supported by the test server", uri.path())),
    }
}

async fn list(shared: Arc<Shared>, target: Target, query: HashMap<String, String>) -> Response {
    while shared.lock().held.contains(&target.resource) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut store = shared.lock();
    *store.lists.entry(target.resource.clone()).or_default() += 1;
    let items: Vec<Value> = store
        .objects
        .iter()
        .filter(|((r, ns, _), o)| {
            *r == target.resource
                && target.namespace.as_ref().is_none_or(|want| want == ns)
                && matches_fields(o, query.get("fieldSelector"))
        })
        .map(|(_, o)| o.clone())
        .collect();
    let (group_version, _) = target.resource.rsplit_once('/').unwrap();
    json_response(
        StatusCode::OK,
        json!({
            "kind": format!("{}List", kind_of(&target.resource)),
            "apiVersion": group_version,
            "metadata": { "resourceVersion": store.rv.to_string() },
            "items": items,
        }),
    )
}

async fn watch(shared: Arc<Shared>, target: Target, query: HashMap<String, String>) -> Response {
    let from: u64 = query.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(290));
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let (epoch, gone) = {
        let mut store = shared.lock();
        *store.watches.entry(target.resource.clone()).or_default() += 1;
        (store.epoch, from != 0 && from < store.oldest)
    };
    let (group_version, _) = target.resource.rsplit_once('/').unwrap();
    let group_version = group_version.to_string();
    let kind = kind_of(&target.resource);
    let line = |v: Value| Ok::<_, Infallible>(Bytes::from(format!("{v}\n")));
    if gone {
        let event = json!({ "type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("too old resource version: {from}"), "reason": "Expired", "code": 410,
        }});
        return Response::new(Body::from_stream(futures::stream::iter([line(event)])));
    }
    struct Cursor {
        shared: Arc<Shared>,
        target: Target,
        fields: Option<String>,
        sent: u64,
        epoch: u64,
        deadline: Instant,
        next_bookmark: Instant,
        pending: std::collections::VecDeque<Value>,
    }
    let cursor = Cursor {
        shared,
        target,
        fields: query.get("fieldSelector").cloned(),
        sent: from,
        epoch,
        deadline: Instant::now() + timeout,
        next_bookmark: Instant::now() + BOOKMARK_EVERY,
        pending: Default::default(),
    };
    let stream = futures::stream::unfold(cursor, move |mut c| {
        let group_version = group_version.clone();
        async move {
            loop {
                if let Some(v) = c.pending.pop_front() {
                    return Some((line(v), c));
                }
                let notified = c.shared.changed.notified();
                {
                    let store = c.shared.lock();
                    if store.epoch != c.epoch || Instant::now() > c.deadline {
                        return None;
                    }
                    let after = c.sent;
                    for change in store.log.iter().filter(|ch| ch.rv > after) {
                        c.sent = change.rv;
                        let ns_ok = c.target.namespace.as_ref().is_none_or(|want| *want == change.namespace);
                        if change.resource == c.target.resource
                            && ns_ok
                            && matches_fields(&change.object, c.fields.as_ref())
                        {
                            c.pending.push_back(json!({ "type": change.kind, "object": change.object }));
                        }
                    }
                    c.sent = c.sent.max(store.rv);
                    if c.pending.is_empty() && bookmarks && Instant::now() >= c.next_bookmark {
                        c.next_bookmark = Instant::now() + BOOKMARK_EVERY;
                        c.pending.push_back(json!({ "type": "BOOKMARK", "object": {
                            "kind": kind, "apiVersion": group_version,
                            "metadata": { "resourceVersion": c.sent.to_string() },
                        }}));
                    }
                }
                if c.pending.is_empty() {
                    let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
                }
            }
        }
    });
    Response::new(Body::from_stream(stream))
}

fn create(shared: Arc<Shared>, target: Target, body: &[u8]) -> Response {
    let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not JSON");
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str).map(String::from) else {
        return status(422, "Invalid", "metadata.name: Required value");
    };
    if !namespace.is_empty() {
        if let Some(ns) = object.pointer("/metadata/namespace").and_then(Value::as_str) {
            if ns != namespace {
                return status(400, "BadRequest", "the namespace of the object does not match the request");
            }
        }
        object["metadata"]["namespace"] = json!(namespace);
    }
    let mut store = shared.lock();
    if store.missing_namespaces.contains(&namespace) {
        let message = format!("namespaces \"{namespace}\" not found");
        let details = json!({ "name": namespace, "kind": "namespaces" });
        let body = json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": "NotFound", "code": 404, "details": details });
        return json_response(StatusCode::NOT_FOUND, body);
    }
    let key = (target.resource.clone(), namespace.clone(), name.clone());
    if store.objects.contains_key(&key) {
        return status(409, "AlreadyExists", &format!("{} \"{name}\" already exists", kind_of(&target.resource)));
    }
    object["metadata"]["uid"] = json!(format!("uid-{name}"));
    match kind_of(&target.resource) {
        "Event" => store.events.push(object.clone()),
        "Lease" => store.lease_writes.push(("create".into(), object.clone())),
        _ => {}
    }
    let created = store.record(target.resource, namespace, name, "ADDED", object);
    drop(store);
    shared.changed.notify_waiters();
    json_response(StatusCode::CREATED, created)
}

fn replace(shared: Arc<Shared>, target: Target, name: String, body: &[u8]) -> Response {
    let Ok(object) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not JSON");
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = shared.lock();
    let key = (target.resource.clone(), namespace.clone(), name.clone());
    let Some(existing) = store.objects.get(&key) else {
        return status(404, "NotFound", &format!("{} \"{name}\" not found", kind_of(&target.resource)));
    };
    let have = existing.pointer("/metadata/resourceVersion").cloned();
    let sent = object.pointer("/metadata/resourceVersion").cloned();
    if sent.is_some() && sent != have {
        return status(409, "Conflict", "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again");
    }
    if kind_of(&target.resource) == "Lease" {
        store.lease_writes.push(("update".into(), object.clone()));
    }
    let replaced = store.record(target.resource, namespace, name, "MODIFIED", object);
    drop(store);
    shared.changed.notify_waiters();
    json_response(StatusCode::OK, replaced)
}

fn apply_status(
    shared: Arc<Shared>,
    target: Target,
    name: String,
    content_type: String,
    query: String,
    body: &[u8],
) -> Response {
    if content_type != "application/apply-patch+yaml" {
        return status(
            415,
            "UnsupportedMediaType",
            &format!("the test server only takes server-side apply, not {content_type}"),
        );
    }
    let Ok(patch) = serde_yaml_ng::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the body is not YAML");
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let mut store = shared.lock();
    store.status_patches.push(StatusPatch {
        namespace: namespace.clone(),
        name: name.clone(),
        content_type,
        query,
        body: patch.clone(),
    });
    let key = (target.resource.clone(), namespace.clone(), name.clone());
    let Some(mut object) = store.objects.get(&key).cloned() else {
        return status(404, "NotFound", &format!("{} \"{name}\" not found", kind_of(&target.resource)));
    };
    object["status"] = patch.get("status").cloned().unwrap_or(Value::Null);
    let updated = store.record(target.resource, namespace, name, "MODIFIED", object);
    drop(store);
    shared.changed.notify_waiters();
    json_response(StatusCode::OK, updated)
}
