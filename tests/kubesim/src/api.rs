//! The HTTP side of one cluster: routing, authentication, injected faults, and the verbs.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};

use crate::apply::{Part, apply, record_update, restrict};
use crate::cluster::Cluster;
use crate::patch::{json_patch, merge_patch, strategic_merge};
use crate::resources::{BUILTIN_TYPES, Lists, ResourceType, ScalePaths};
use crate::schema::{self, Schema};
use crate::selector::{FieldSelector, LabelSelector};
use crate::sim;
use crate::status::ApiError;
use crate::store::{Event, EventType, Key, Store, type_key};
use crate::table;
use crate::util::{new_uid, now_rfc3339, parse_query, random_suffix};
use crate::{discovery, invalid, protobuf, rbac};
use emco_core::x509::CertSubject;

mod controllers;
mod legacy;
mod scale;

/// Response body: whole documents or a watch stream.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

type ApiResult = Result<Response<Body>, ApiError>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

fn json_response(code: StatusCode, v: &Value) -> Response<Body> {
    let mut r = Response::new(full(v.to_string()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

fn ok(v: &Value) -> ApiResult {
    Ok(json_response(StatusCode::OK, v))
}

pub(crate) fn error_response(e: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(code, &e.to_status());
    if let Some(secs) = e.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    r
}

/// The namespaces every cluster starts with.
pub(crate) fn seed(store: &mut Store) {
    let Some(rt) = BUILTIN_TYPES.iter().find(|t| t.plural == "namespaces") else {
        return;
    };
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let mut obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": ns, "uid": new_uid(), "creationTimestamp": now_rfc3339()}});
        sim::defaults_on_create(rt, &mut obj, store);
        store.put((type_key(rt), String::new(), ns.to_owned()), obj);
    }
}

/// A parsed request.
struct Req {
    /// Who the connection's client certificate authenticates, if it presented one.
    cert_user: Option<CertSubject>,
    method: Method,
    headers: HeaderMap,
    query: Vec<(String, String)>,
    body: Bytes,
}

impl Req {
    fn q(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn header(&self, name: header::HeaderName) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The media type of the body, without parameters (`application/apply-patch+yaml`).
    fn media_type(&self) -> String {
        self.header(header::CONTENT_TYPE)
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    fn dry_run(&self) -> bool {
        self.q("dryRun").is_some_and(|v| v == "All")
    }

    /// The field manager of a write: the `fieldManager` parameter, else the user agent's
    /// program name, as the real server does.
    fn manager(&self) -> String {
        match self.q("fieldManager") {
            Some(m) if !m.is_empty() => m.to_owned(),
            _ => {
                let ua = self.header(header::USER_AGENT);
                let prog = ua.split('/').next().unwrap_or_default();
                if prog.is_empty() {
                    "unknown".to_owned()
                } else {
                    prog.to_owned()
                }
            }
        }
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        // JSON is what kubectl's apply path and kube-rs send; protobuf of kinds protobuf.rs does
        // not describe, and CBOR, would need the compiled schemas of every type.
        let ct = self.header(header::CONTENT_TYPE);
        if ct.starts_with("application/vnd.kubernetes.protobuf") {
            // kubectl's typed client always sends protobuf for built-in kinds; see protobuf.rs.
            return protobuf::decode(&self.body).map_err(|e| match e {
                protobuf::DecodeError::UnknownKind(gvk) => {
                    let mut e = ApiError::unsupported_media_type(ct);
                    e.message = format!(
                        "{}; kubesim has no protobuf schema for {gvk}: send it as application/json",
                        e.message
                    );
                    e
                }
                protobuf::DecodeError::Malformed(m) => ApiError::bad_request(format!(
                    "the body of the request could not be decoded as protobuf: {m}"
                )),
            });
        }
        if ct.contains("protobuf") || ct.contains("cbor") {
            return Err(ApiError::unsupported_media_type(ct));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as JSON: {e}"
            ))
        })
    }
}

/// Serves one request of `cluster` from a client authenticated by `cert_user`'s certificate, if
/// any, after the injected latency and errors.
pub(crate) async fn serve(
    cluster: Arc<Cluster>,
    cert_user: Option<&CertSubject>,
    req: Request<Incoming>,
) -> Response<Body> {
    let fault = cluster.fault_state().fault;
    if fault.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await;
    }
    if fault.error_rate > 0.0 && rand::random::<f64>() < fault.error_rate {
        let e = match fault.error_code {
            429 => ApiError::too_many_requests(),
            503 => ApiError::unavailable(),
            _ => ApiError::internal("injected fault: internal error"),
        };
        return error_response(&e);
    }
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return error_response(&ApiError::bad_request(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    let r = Req {
        cert_user: cert_user.cloned(),
        method: parts.method,
        headers: parts.headers,
        query: parse_query(parts.uri.query()),
        body,
    };
    let path = parts.uri.path().to_owned();
    match route(&cluster, &path, &r) {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

/// The user and groups of an authenticated request: a client certificate first (as the real
/// server's x509 authenticator comes before tokens), else the cluster's bearer token, which is
/// the administrator. `None` means 401. What the user may do is [`rbac`]'s to decide.
fn authenticate(cluster: &Cluster, r: &Req) -> Option<(String, Vec<String>)> {
    let authenticated = "system:authenticated".to_owned();
    if let Some(u) = &r.cert_user {
        let mut groups = u.groups.clone();
        groups.push(authenticated);
        return Some((u.user.clone(), groups));
    }
    let token = r
        .header(header::AUTHORIZATION)
        .strip_prefix("Bearer ")?
        .trim();
    if token == cluster.token {
        return Some((
            "admin".to_owned(),
            vec!["system:masters".to_owned(), authenticated],
        ));
    }
    let store = cluster.store();
    let sa = store.tokens.get(token)?;
    let account = store.get(&(
        "/serviceaccounts".to_owned(),
        sa.namespace.clone(),
        sa.name.clone(),
    ))?;
    let valid =
        sa.expires > SystemTime::now() && meta_str(&account, "uid") == Some(sa.uid.as_str());
    valid.then(|| {
        (
            format!("system:serviceaccount:{}:{}", sa.namespace, sa.name),
            vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{}", sa.namespace),
                authenticated,
            ],
        )
    })
}

/// `POST serviceaccounts/NAME/token` (`kubectl create token`): a token that authenticates as
/// the service account until it expires (one hour unless the request says otherwise).
fn token_request(cluster: &Arc<Cluster>, t: &Target<'_>, name: &str, r: &Req) -> ApiResult {
    let req = r.json_body()?;
    let mut store = cluster.store();
    let sa = store
        .get(&key(t, name))
        .ok_or_else(|| ApiError::not_found(&t.rt, name))?;
    let uid = meta_str(&sa, "uid").unwrap_or_default().to_owned();
    let ns = t.ns.unwrap_or_default().to_owned();
    let seconds = req
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    let Ok(secs) = u64::try_from(seconds) else {
        return Err(token_too_short(&t.rt, name));
    };
    if secs < 600 {
        return Err(token_too_short(&t.rt, name));
    }
    let now = SystemTime::now();
    let expires = now + Duration::from_secs(secs);
    let audiences = match req.pointer("/spec/audiences") {
        Some(Value::Array(a)) if !a.is_empty() => json!(a),
        _ => json!(["https://kubernetes.default.svc.cluster.local"]),
    };
    let epoch = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // JWT-shaped like the real server's tokens, so clients that peek at the claims work; only
    // this cluster's table makes it valid.
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let claims = json!({"aud": audiences, "exp": epoch(expires), "iat": epoch(now),
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": format!("system:serviceaccount:{ns}:{name}"),
        "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}}});
    let token = format!(
        "{}.{}.{}",
        b64(&json!({"alg": "RS256", "kid": cluster.name})),
        b64(&claims),
        random_suffix(43)
    );
    store.tokens.retain(|_, v| v.expires > now);
    store.tokens.insert(
        token.clone(),
        crate::store::ServiceAccountToken {
            namespace: ns.clone(),
            name: name.to_owned(),
            uid,
            expires,
        },
    );
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": now_rfc3339()},
            "spec": {"audiences": audiences, "expirationSeconds": secs,
                     "boundObjectRef": req.pointer("/spec/boundObjectRef")},
            "status": {"token": token, "expirationTimestamp": emco_core::time::rfc3339(expires)}}),
    ))
}

fn token_too_short(rt: &ResourceType, name: &str) -> ApiError {
    ApiError::invalid(
        rt,
        name,
        "spec.expirationSeconds",
        "FieldValueInvalid",
        "may not specify a duration less than 10 minutes",
    )
}

/// `POST authentication.k8s.io/v1 selfsubjectreviews` (`kubectl auth whoami`): who the
/// request is authenticated as.
fn self_subject_review(r: &Req, user: String, groups: Vec<String>) -> ApiResult {
    if r.method != Method::POST {
        return Err(ApiError::method_not_allowed(r.method.as_str()));
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                "metadata": {"creationTimestamp": now_rfc3339()},
                "status": {"userInfo": {"username": user, "groups": groups}}}),
    ))
}

fn all_types(store: &Store) -> Vec<Arc<ResourceType>> {
    BUILTIN_TYPES
        .iter()
        .chain(legacy::TYPES.iter())
        .chain(store.custom_types.iter())
        .cloned()
        .collect()
}

fn route(cluster: &Arc<Cluster>, path: &str, r: &Req) -> ApiResult {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => return ok(&discovery::version()),
        ["healthz" | "livez" | "readyz"] => return Ok(Response::new(full("ok"))),
        _ => {}
    }
    let Some((user, groups)) = authenticate(cluster, r) else {
        return Err(ApiError::unauthorized());
    };
    if segs.as_slice() == ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"] {
        return self_subject_review(r, user, groups);
    }
    let accept = r.header(header::ACCEPT).to_owned();
    let types = all_types(&cluster.store());
    match segs.as_slice() {
        ["api"] if discovery::wants_aggregated(&accept) => {
            Ok(aggregated(&discovery::aggregated(&types, true)))
        }
        ["apis"] if discovery::wants_aggregated(&accept) => {
            Ok(aggregated(&discovery::aggregated(&types, false)))
        }
        ["api"] => ok(&discovery::core_versions(&cluster.addr.to_string())),
        ["apis"] => ok(&discovery::group_list(&types)),
        ["api", "v1"] => discovery::resource_list(&types, "", "v1")
            .map_or_else(|| Err(ApiError::path_not_found()), |v| ok(&v)),
        ["apis", g] => {
            discovery::group(&types, g).map_or_else(|| Err(ApiError::path_not_found()), |v| ok(&v))
        }
        ["apis", g, v] => discovery::resource_list(&types, g, v)
            .map_or_else(|| Err(ApiError::path_not_found()), |d| ok(&d)),
        ["openapi", "v3"] => ok(&discovery::openapi_v3_root(&types)),
        ["openapi", "v3", "api", v] => discovery::openapi_v3_gv(&types, "", v)
            .map_or_else(|| Err(ApiError::path_not_found()), |d| ok(&d)),
        ["openapi", "v3", "apis", g, v] => discovery::openapi_v3_gv(&types, g, v)
            .map_or_else(|| Err(ApiError::path_not_found()), |d| ok(&d)),
        ["api", "v1", rest @ ..] => {
            resource(cluster, &types, ("", "v1"), rest, Some((&user, &groups)), r)
        }
        ["apis", g, v, rest @ ..] => {
            resource(cluster, &types, (g, v), rest, Some((&user, &groups)), r)
        }
        _ => Err(ApiError::path_not_found()),
    }
}

fn aggregated(doc: &Value) -> Response<Body> {
    let mut resp = json_response(StatusCode::OK, doc);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(discovery::AGGREGATED_CONTENT_TYPE),
    );
    resp
}

/// What a resource path designates.
struct Target<'a> {
    rt: Arc<ResourceType>,
    ns: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

fn resource(
    cluster: &Arc<Cluster>,
    types: &[Arc<ResourceType>],
    (group, version): (&str, &str),
    rest: &[&str],
    who: Option<(&str, &[String])>,
    r: &Req,
) -> ApiResult {
    let (ns, tail) = match rest {
        ["namespaces", ns, res, tail @ ..] if !matches!(*res, "status" | "finalize") => {
            (Some(*ns), {
                let mut t = vec![*res];
                t.extend_from_slice(tail);
                t
            })
        }
        _ => (None, rest.to_vec()),
    };
    let (plural, name, sub) = match tail.as_slice() {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, s] => (*p, Some(*n), Some(*s)),
        _ => return Err(ApiError::path_not_found()),
    };
    let rt = types
        .iter()
        .find(|t| t.group == group && t.version == version && t.plural == plural)
        .cloned()
        .ok_or_else(ApiError::path_not_found)?;
    let verb = match (&r.method, name) {
        (&Method::GET, Some(_)) => "get",
        (&Method::GET, None) if r.q("watch").is_some_and(|w| w == "true" || w == "1") => "watch",
        (&Method::GET, None) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, Some(_)) => "delete",
        (&Method::DELETE, None) => "deletecollection",
        _ => "",
    };
    let attributes = rbac::Attributes {
        verb,
        rt: &rt,
        sub,
        // A namespace is its own namespace to RBAC, as in the real server's request info.
        namespace: ns.or(name.filter(|_| rt.plural == "namespaces" && rt.group.is_empty())),
        name,
    };
    // `None`: a request already authorized as another version of the same resource.
    if let Some((user, groups)) = who {
        rbac::authorize(
            &cluster.store(),
            &rbac::Subject { user, groups },
            &attributes,
        )?;
    }
    if let Some(res) = legacy::serve(cluster, types, &rt, rest, r) {
        return res;
    }
    if ns.is_some() && !rt.namespaced || rt.namespaced && ns.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    let sub_ok = match sub {
        None => true,
        Some("status") => rt.status,
        Some("approval") => rt.plural == "certificatesigningrequests",
        Some("finalize") => rt.plural == "namespaces",
        Some("token") => rt.plural == "serviceaccounts",
        Some("scale") => rt.scale.is_some(),
        Some(_) => false,
    };
    if !sub_ok {
        return Err(ApiError::path_not_found());
    }
    let t = Target { rt, ns, name, sub };
    let watch = r.q("watch").is_some_and(|w| w == "true" || w == "1");
    match (&r.method, t.name) {
        (&Method::POST, Some(n)) if t.sub == Some("token") => token_request(cluster, &t, n, r),
        (_, Some(_)) if t.sub == Some("token") => {
            Err(ApiError::method_not_allowed(r.method.as_str()))
        }
        (_, Some(n)) if t.sub == Some("scale") => scale::serve(cluster, &t, n, r),
        (&Method::GET, None) if watch => watch_stream(cluster, &t, r),
        (&Method::GET, None) => list(cluster, &t, r),
        (&Method::GET, Some(n)) => get(cluster, &t, n, r),
        (&Method::POST, None) => create(cluster, &t, r),
        (&Method::PUT, Some(n)) => update(cluster, &t, n, r),
        (&Method::PATCH, Some(n)) => patch(cluster, &t, n, r),
        (&Method::DELETE, Some(n)) if t.sub.is_none() => delete(cluster, &t, n, r),
        (&Method::DELETE, None) => delete_collection(cluster, &t, r),
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

fn key(t: &Target<'_>, name: &str) -> Key {
    (
        type_key(&t.rt),
        t.ns.unwrap_or_default().to_owned(),
        name.to_owned(),
    )
}

fn part(t: &Target<'_>) -> Part {
    // CSR approval writes status conditions, as the status subresource does.
    if matches!(t.sub, Some("status" | "approval")) {
        Part::Status
    } else {
        Part::Main
    }
}

/// Checks that the namespace of a namespaced request exists and accepts new objects.
fn check_namespace(store: &Store, t: &Target<'_>, creating: bool) -> Result<(), ApiError> {
    let Some(ns) = t.ns else { return Ok(()) };
    let nk = ("/namespaces".to_owned(), String::new(), ns.to_owned());
    let Some(obj) = store.get(&nk) else {
        return Err(ApiError::namespace_not_found(ns));
    };
    if creating && obj.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "{} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                t.rt.qualified()
            ),
            details: Some(Box::new(json!({"name": ns, "kind": t.rt.plural}))),
            retry_after: None,
        });
    }
    Ok(())
}

fn get(cluster: &Arc<Cluster>, t: &Target<'_>, name: &str, r: &Req) -> ApiResult {
    let store = cluster.store();
    let obj = store
        .get(&key(t, name))
        .ok_or_else(|| ApiError::not_found(&t.rt, name))?;
    if t.sub.is_none() && table::wants_table(r.header(header::ACCEPT)) {
        return ok(&table::table(
            &t.rt,
            &[(*obj).clone()],
            &json!({"resourceVersion": store.rv().to_string()}),
        ));
    }
    ok(&obj)
}

fn selectors(r: &Req) -> Result<(LabelSelector, FieldSelector), ApiError> {
    Ok((
        LabelSelector::parse(r.q("labelSelector").unwrap_or_default())?,
        FieldSelector::parse(r.q("fieldSelector").unwrap_or_default())?,
    ))
}

fn list_kind(rt: &ResourceType) -> String {
    format!("{}List", rt.kind)
}

fn list(cluster: &Arc<Cluster>, t: &Target<'_>, r: &Req) -> ApiResult {
    let (ls, fs) = selectors(r)?;
    let limit = match r.q("limit") {
        Some(l) if !l.is_empty() => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request("limit must be a number"))?,
        _ => 0,
    };
    // The continue token is the (namespace, name) to resume after and the resourceVersion of
    // the first page, whose snapshot the following pages continue (base64-encoded JSON).
    let token: Option<(String, String, u64)> = match r.q("continue") {
        Some(c) if !c.is_empty() => Some(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| ApiError::bad_request("invalid continue token"))?,
        ),
        _ => None,
    };
    let store = cluster.store();
    let tk = type_key(&t.rt);
    let list_rv = token.as_ref().map_or(store.rv(), |t| t.2);
    let past = if list_rv == store.rv() {
        None
    } else {
        Some(store.list_at(&tk, t.ns, list_rv).ok_or_else(|| {
            ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter.",
            )
        })?)
    };
    let rows: Box<dyn Iterator<Item = (&Key, &Arc<Value>)>> = match &past {
        Some(objects) => Box::new(objects.iter().map(|(k, o)| (k, o))),
        None => Box::new(store.list(&tk, t.ns)),
    };
    let after = token.map(|(ns, name, _)| (ns, name));
    let mut items = Vec::new();
    let mut more = 0usize;
    let mut last: Option<(String, String)> = None;
    for (k, obj) in rows {
        if after
            .as_ref()
            .is_some_and(|(ans, an)| (&k.1, &k.2) <= (ans, an))
        {
            continue;
        }
        if !ls.matches(obj) || !fs.matches(obj) {
            continue;
        }
        if limit > 0 && items.len() == limit {
            more += 1;
            continue;
        }
        last = Some((k.1.clone(), k.2.clone()));
        // Shared, not copied: a list of a thousand objects costs pointers until serialized.
        items.push(Arc::clone(obj));
    }
    drop(store);
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if more > 0
        && let Some(last) = last
    {
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(json!([last.0, last.1, list_rv]).to_string());
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(more);
    }
    if table::wants_table(r.header(header::ACCEPT)) {
        let items: Vec<Value> = items.iter().map(|o| (**o).clone()).collect();
        return ok(&table::table(&t.rt, &items, &meta));
    }
    let items: Vec<&Value> = items.iter().map(AsRef::as_ref).collect();
    let body =
        json!({"kind": list_kind(&t.rt), "apiVersion": t.rt.api_version(), "metadata": meta});
    Ok(list_response(&body, &items))
}

/// A list document: `head` (kind, apiVersion, metadata) with `items` serialized in place,
/// without building a [`Value`] of the whole list.
fn list_response(head: &Value, items: &[&Value]) -> Response<Body> {
    let mut text = head.to_string();
    text.pop(); // the closing brace
    text.push_str(",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&item.to_string());
    }
    text.push_str("]}");
    let mut r = Response::new(full(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Validates kind, apiVersion and metadata of a written object and fills them in.
fn check_body(t: &Target<'_>, obj: &mut Value, name: Option<&str>) -> Result<(), ApiError> {
    let Some(o) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    let want = t.rt.api_version();
    match o.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != want => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({want})"
            )));
        }
        _ => {}
    }
    match o.get("kind").and_then(Value::as_str) {
        Some(k) if k != t.rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.rt.kind
            )));
        }
        _ => {}
    }
    o.insert("apiVersion".to_owned(), json!(want));
    o.insert("kind".to_owned(), json!(t.rt.kind));
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return Err(ApiError::bad_request("metadata must be an object"));
    };
    if let Some(ns) = t.ns {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".to_owned(), json!(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    if let Some(name) = name {
        match meta.get("name").and_then(Value::as_str) {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta.insert("name".to_owned(), json!(name));
            }
        }
    }
    Ok(())
}

/// The request's `fieldValidation` mode, checked as the real server does.
fn field_validation(r: &Req) -> Result<&str, ApiError> {
    let mode = r.q("fieldValidation").unwrap_or("Warn");
    if !matches!(mode, "Ignore" | "Warn" | "Strict") {
        return Err(ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: \"{mode}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
        )));
    }
    Ok(mode)
}

/// Decodes a body into the kind's Go type as the real server does before anything else: a
/// field of the wrong type is a 400 naming the Go struct field.
fn decode(t: &Target<'_>, obj: &Value) -> Result<(), ApiError> {
    let Some(msg) = Schema::of(&t.rt).and_then(|s| s.decode_error(obj)) else {
        return Ok(());
    };
    let kind = &t.rt.kind;
    Err(ApiError::bad_request(format!(
        "{kind} in version \"{}\" cannot be handled as a {kind}: {msg}",
        t.rt.version
    )))
}

/// Checks the result of a merge, JSON or strategic merge patch: the real server decodes a
/// merge or JSON patch's result (a type error quotes the whole patched object) and converts a
/// strategic one's (the error quotes the patch, as Go prints a map).
fn check_patched(
    t: &Target<'_>,
    strategic: bool,
    patch: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let Some(schema) = Schema::of(&t.rt) else {
        return Ok(());
    };
    let (shown, msg) = if strategic {
        (schema::go_v(patch), schema.conversion_error(new))
    } else {
        (new.to_string(), schema.decode_error(new))
    };
    match msg {
        Some(msg) => Err(ApiError::invalid_patch(&shown, &msg)),
        None => Ok(()),
    }
}

/// Types a server-side apply body against the kind's schema, whatever `fieldValidation` says:
/// type errors and undeclared fields are a 500 listing them all, then a value the Go type
/// cannot hold is a 500 naming it (both as kube-apiserver v1.32 words them). `body` is the
/// body as sent, whose own namespace the messages name.
fn type_apply(t: &Target<'_>, body: &Value) -> Result<(), ApiError> {
    let Some(schema) = Schema::of(&t.rt) else {
        return Ok(());
    };
    // Go prints a GroupVersion with its empty core group: `/v1`.
    let gv = format!("{}/{}", t.rt.group, t.rt.version);
    let object = format!(
        "{}/{}; {gv}, Kind={}",
        meta_str(body, "namespace").unwrap_or_default(),
        meta_str(body, "name").unwrap_or_default(),
        t.rt.kind
    );
    let errs = schema.typed_errors(body);
    if !errs.is_empty() {
        let list = if errs.len() == 1 {
            errs.concat()
        } else {
            format!("errors:\n  {}", errs.join("\n  "))
        };
        return Err(ApiError::typed_patch(format!(
            "failed to create typed patch object ({object}): {list}"
        )));
    }
    match schema.conversion_error(body) {
        Some(msg) => Err(ApiError::typed_patch(format!(
            "failed to convert new object ({object}) to proper version: unable to convert unstructured object to {gv}, Kind={}: {msg}",
            t.rt.kind
        ))),
        None => Ok(()),
    }
}

/// Applies the request's `fieldValidation` to a written object: Strict rejects unknown fields,
/// Warn (the default) and Ignore drop them; the answer is the warnings to send.
fn validate_fields(t: &Target<'_>, r: &Req, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    let mode = field_validation(r)?;
    let Some(schema) = Schema::of(&t.rt) else {
        return Ok(Vec::new());
    };
    let unknown = schema.unknown_fields(obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    let kind = &t.rt.kind;
    let fields: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field \"{}\"", schema::dotted(p)))
        .collect();
    if mode == "Strict" {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: {}",
            t.rt.version,
            fields.join(", ")
        )));
    }
    for p in &unknown {
        schema::remove(obj, p);
    }
    if mode == "Ignore" {
        return Ok(Vec::new());
    }
    Ok(fields)
}

/// Adds `Warning` headers (code 299, as the real server's warnings) to an answer.
fn with_warnings(res: ApiResult, warnings: &[String]) -> ApiResult {
    let mut resp = res?;
    for w in warnings {
        let quoted = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            resp.headers_mut().append("warning", v);
        }
    }
    Ok(resp)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// The CustomResourceDefinition of a custom type (for its schema); `None` for built-in types.
fn crd_of(store: &Store, rt: &ResourceType) -> Option<Arc<Value>> {
    if !rt.custom {
        return None;
    }
    store.get(&(
        "apiextensions.k8s.io/customresourcedefinitions".to_owned(),
        String::new(),
        format!("{}.{}", rt.plural, rt.group),
    ))
}

/// How the lists of objects of `rt` merge: by the built-in rules, or by the list types of the
/// schema its CRD (from `crd_of`) gives the served version.
fn lists<'a>(rt: &ResourceType, crd: Option<&'a Value>) -> Lists<'a> {
    if !rt.custom {
        return Lists::Builtin;
    }
    let schema = crd
        .and_then(|c| c.pointer("/spec/versions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(rt.version.as_str()))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"));
    Lists::custom(schema)
}

fn create(cluster: &Arc<Cluster>, t: &Target<'_>, r: &Req) -> ApiResult {
    let mut obj = r.json_body()?;
    decode(t, &obj)?;
    check_body(t, &mut obj, None)?;
    let warnings = validate_fields(t, r, &mut obj)?;
    with_warnings(create_checked(cluster, t, r, obj), &warnings)
}

fn create_checked(cluster: &Arc<Cluster>, t: &Target<'_>, r: &Req, mut obj: Value) -> ApiResult {
    let mut store = cluster.store();
    check_namespace(&store, t, true)?;
    let name = match meta_str(&obj, "name") {
        Some(n) if !n.is_empty() => n.to_owned(),
        _ => match meta_str(&obj, "generateName") {
            Some(g) if !g.is_empty() => format!("{g}{}", random_suffix(5)),
            _ => {
                return Err(ApiError::invalid(
                    &t.rt,
                    "",
                    "metadata.name",
                    "FieldValueRequired",
                    "name or generateName is required",
                ));
            }
        },
    };
    if t.rt.namespaced && t.ns.is_none() {
        return Err(ApiError::bad_request(
            "the namespace of the object is required",
        ));
    }
    let k = key(t, &name);
    if store.get(&k).is_some() {
        return Err(ApiError::already_exists(&t.rt, &name));
    }
    obj["metadata"]["name"] = json!(name);
    if t.rt.status
        && !status_set_on_create(&t.rt)
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    let manager = r.manager();
    let crd = crd_of(&store, &t.rt);
    let stored = insert_new(
        cluster,
        &mut store,
        t,
        k,
        obj,
        |o| {
            let av = t.rt.api_version();
            record_update(
                None,
                o,
                &manager,
                &av,
                Part::Main,
                lists(&t.rt, crd.as_deref()),
            );
        },
        r.dry_run(),
    )?;
    Ok(json_response(StatusCode::CREATED, &stored))
}

/// The 422 answer to the validation errors of an object, if any.
fn check_valid(rt: &ResourceType, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let errs = invalid::check(rt, obj, old);
    if errs.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_fields(
        &rt.group,
        &rt.kind,
        meta_str(obj, "name").unwrap_or_default(),
        &errs,
    ))
}

/// Fills in server metadata of a new object, runs the simulation hooks and stores it (unless
/// dry-run). `own` records field ownership.
fn insert_new(
    cluster: &Arc<Cluster>,
    store: &mut Store,
    t: &Target<'_>,
    k: Key,
    mut obj: Value,
    own: impl FnOnce(&mut Value),
    dry_run: bool,
) -> Result<Value, ApiError> {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".to_owned(), json!(new_uid()));
        meta.insert("creationTimestamp".to_owned(), json!(now_rfc3339()));
        meta.remove("resourceVersion");
        meta.remove("deletionTimestamp");
        meta.remove("managedFields");
        if t.rt.has_generation() {
            meta.insert("generation".to_owned(), json!(1));
        } else {
            meta.remove("generation");
        }
    }
    sim::defaults_on_create(&t.rt, &mut obj, store);
    check_valid(&t.rt, &obj, None)?;
    own(&mut obj);
    if crate::certmanager::is_request(&t.rt) {
        obj["status"] = crate::certmanager::issue(store, &obj);
    }
    if t.rt.plural == "customresourcedefinitions" {
        let rts = crd_types(&obj).map_err(|m| {
            ApiError::invalid(
                &t.rt,
                meta_str(&obj, "name").unwrap_or_default(),
                "spec",
                "FieldValueInvalid",
                &m,
            )
        })?;
        obj["status"] = sim::crd_status(&obj);
        if !dry_run {
            register(store, rts);
        }
    }
    if dry_run {
        return Ok(obj);
    }
    Ok(store_with_sim(cluster, store, &t.rt, k, obj, true))
}

/// Creates an object a simulated controller makes (a workload's ReplicaSet or Pod).
pub(crate) fn create_child(
    cluster: &Arc<Cluster>,
    store: &mut Store,
    tk: &str,
    ns: &str,
    mut obj: Value,
) {
    let Some(rt) = type_of(store, tk) else {
        return;
    };
    let name = meta_str(&obj, "name").unwrap_or_default().to_owned();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".to_owned(), json!(new_uid()));
        meta.insert("creationTimestamp".to_owned(), json!(now_rfc3339()));
        if rt.has_generation() {
            meta.insert("generation".to_owned(), json!(1));
        }
    }
    sim::defaults_on_create(&rt, &mut obj, store);
    record_update(
        None,
        &mut obj,
        CONTROLLER_MANAGER,
        &rt.api_version(),
        Part::Main,
        Lists::Builtin,
    );
    let k = (tk.to_owned(), ns.to_owned(), name);
    store_with_sim(cluster, store, &rt, k, obj, true);
}

/// Writes a new spec of an object a simulated controller manages (a ReplicaSet it scales).
pub(crate) fn update_child(cluster: &Arc<Cluster>, store: &mut Store, k: Key, mut obj: Value) {
    let Some(rt) = type_of(store, &k.0) else {
        return;
    };
    let old = store.get(&k);
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    obj["metadata"]["generation"] = json!(generation + 1);
    if let Some(o) = &old {
        sim::defaults_on_update(&rt, o, &mut obj);
    }
    record_update(
        old.as_deref(),
        &mut obj,
        CONTROLLER_MANAGER,
        &rt.api_version(),
        Part::Main,
        Lists::Builtin,
    );
    store_with_sim(cluster, store, &rt, k, obj, true);
}

/// Deletes an object a simulated controller no longer wants, in the background.
pub(crate) fn remove_child(store: &mut Store, k: &Key) {
    if let Some(rt) = type_of(store, &k.0) {
        finish_delete(store, &rt, k, "Background");
    }
}

/// Whether a create keeps the status it is given although the type has a status subresource:
/// kube-apiserver's node strategy lets a Node be created with its status (its addresses), by
/// POST and by server-side apply alike; later writes of the main resource leave it alone.
fn status_set_on_create(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.kind == "Node"
}

/// The field manager of the simulated controllers.
const CONTROLLER_MANAGER: &str = "kube-controller-manager";

/// The shortest and longest wait between two simulated restarts of a crashing container (the
/// shortest keeps a zero ready delay from spinning; the longest is the kubelet's).
const MIN_BACK_OFF: Duration = Duration::from_millis(100);
/// See [`MIN_BACK_OFF`].
const MAX_BACK_OFF: Duration = Duration::from_secs(300);

/// The simulated rollout of one spec of one object, run by a task after the write.
struct Rollout<'a> {
    cluster: &'a Arc<Cluster>,
    rt: &'a ResourceType,
    key: &'a Key,
    uid: &'a str,
    generation: Option<&'a Value>,
    delay: Duration,
}

impl Rollout<'_> {
    /// Waits `d`; false when the fleet shuts down first.
    async fn sleep(&self, d: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(d) => true,
            () = self.cluster.shutdown.cancelled() => false,
        }
    }

    /// Writes the status of `stage`. False, writing nothing, when the object is gone or a newer
    /// spec restarted the rollout (its own task finishes it), and for a crash when the object
    /// is being deleted (a terminating Pod is not restarted).
    fn advance(&self, stage: sim::Stage) -> bool {
        let mut store = self.cluster.store();
        let Some(cur) = store.get(self.key) else {
            return false;
        };
        if meta_str(&cur, "uid") != Some(self.uid)
            || cur.pointer("/metadata/generation") != self.generation
        {
            return false;
        }
        if matches!(stage, sim::Stage::Crashed(_))
            && cur.pointer("/metadata/deletionTimestamp").is_some()
        {
            return false;
        }
        if let Some(st) = sim::status_at(self.rt, &cur, stage, self.delay) {
            let mut obj = (*cur).clone();
            obj["status"] = st;
            store.put(self.key.clone(), obj);
        }
        true
    }
}

/// Stores an object whose spec changed (or that is new) and starts its simulated rollout.
fn store_with_sim(
    cluster: &Arc<Cluster>,
    store: &mut Store,
    rt: &Arc<ResourceType>,
    k: Key,
    mut obj: Value,
    spec_changed: bool,
) -> Value {
    let delay = cluster.ready_delay;
    if spec_changed
        && sim::simulated(rt)
        && let Some(st) = sim::status(rt, &obj, delay.is_zero(), delay)
    {
        obj["status"] = st;
    }
    let stored = store.put(k.clone(), obj);
    if spec_changed {
        controllers::reconcile(cluster, store, rt, &stored);
    }
    // A crash-after-ready app also crashes when the ready delay is zero (at once, after being
    // ready on the write).
    let crashes = spec_changed
        && sim::simulated(rt)
        && sim::health(rt, &stored) == sim::Health::CrashAfterReady;
    // Only a Pod's containers restart (and not under `restartPolicy: Never`).
    let restarts = crashes
        && rt.group.is_empty()
        && rt.plural == "pods"
        && stored
            .pointer("/spec/restartPolicy")
            .and_then(Value::as_str)
            != Some("Never");
    if spec_changed && sim::simulated(rt) && (!delay.is_zero() || crashes) {
        let uid = meta_str(&stored, "uid").unwrap_or_default().to_owned();
        let generation = stored.pointer("/metadata/generation").cloned();
        let c = cluster.clone();
        let rt = rt.clone();
        tokio::spawn(async move {
            let rollout = Rollout {
                cluster: &c,
                rt: &rt,
                key: &k,
                uid: &uid,
                generation: generation.as_ref(),
                delay,
            };
            // With no delay the write itself made it ready.
            let up =
                delay.is_zero() || (rollout.sleep(delay).await && rollout.advance(sim::Stage::Up));
            if !up || !crashes {
                return;
            }
            // It crashes a ready delay after it got ready; a Pod's containers are then
            // restarted after a doubling back-off, as the kubelet does, and crash again.
            let (mut wait, mut count) = (delay, 1u32);
            while rollout.sleep(wait).await
                && rollout.advance(sim::Stage::Crashed(count))
                && restarts
            {
                wait = wait.saturating_mul(2).clamp(MIN_BACK_OFF, MAX_BACK_OFF);
                count = count.saturating_add(1);
            }
        });
    }
    (*stored).clone()
}

/// Writes `new` over `old` (update, patch, apply): preconditions, server metadata, generation,
/// ownership, deletion once the last finalizer is gone.
fn write_existing(
    cluster: &Arc<Cluster>,
    store: &mut Store,
    t: &Target<'_>,
    old: &Value,
    mut new: Value,
    own: impl FnOnce(&Value, &mut Value),
    dry_run: bool,
) -> Result<Value, ApiError> {
    let name = meta_str(old, "name").unwrap_or_default().to_owned();
    if let Some(rv) = meta_str(&new, "resourceVersion")
        && !rv.is_empty()
        && Some(rv) != meta_str(old, "resourceVersion")
    {
        return Err(ApiError::stale(&t.rt, &name));
    }
    if let Some(uid) = meta_str(&new, "uid")
        && !uid.is_empty()
        && Some(uid) != meta_str(old, "uid")
    {
        return Err(ApiError::conflict(
            &t.rt,
            &name,
            format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(old, "uid").unwrap_or_default()
            ),
            Vec::new(),
        ));
    }
    // The part the write may not touch comes from the stored object.
    let p = part(t);
    new = match p {
        Part::Main => {
            let mut n = restrict(&new, Part::Main);
            if t.rt.status {
                if let Some(st) = old.get("status") {
                    n["status"] = st.clone();
                }
            } else if let Some(st) = new.get("status") {
                n["status"] = st.clone();
            }
            n
        }
        Part::Status => {
            let mut n = old.clone();
            n["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            n
        }
    };
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old.get("metadata").and_then(|m| m.get(f)) {
            Some(v) => new["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove(f);
                }
            }
        }
    }
    // Defaults come before ownership and the change check, as the real server defaults the
    // decoded body before its field manager and storage see it.
    sim::defaults_on_update(&t.rt, old, &mut new);
    if p == Part::Main {
        check_valid(&t.rt, &new, Some(old))?;
    }
    let spec_changed = p == Part::Main
        && strip_meta(&restrict(old, Part::Main)) != strip_meta(&restrict(&new, Part::Main));
    if spec_changed && t.rt.has_generation() {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        new["metadata"]["generation"] = json!(g + 1);
    }
    own(old, &mut new);
    if t.rt.plural == "customresourcedefinitions" {
        let rts = crd_types(&new)
            .map_err(|m| ApiError::invalid(&t.rt, &name, "spec", "FieldValueInvalid", &m))?;
        new["status"] = sim::crd_status(&new);
        if !dry_run {
            register(store, rts);
        }
    }
    if dry_run {
        return Ok(new);
    }
    let k = key(t, &name);
    let finalizing = new.pointer("/metadata/deletionTimestamp").is_some()
        && new
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    if finalizing {
        return Ok(finish_delete(store, &t.rt, &k, "Background").map_or(new, |v| (*v).clone()));
    }
    let sim_spec = spec_changed && old.pointer("/metadata/deletionTimestamp").is_none();
    let stored = store_with_sim(cluster, store, &t.rt, k, new, sim_spec);
    if stored.pointer("/metadata/deletionTimestamp").is_some()
        && let Some(uid) = meta_str(&stored, "uid")
    {
        // Its other finalizers may have been what the foreground deletion waited for.
        release_foreground(store, uid);
    }
    Ok(stored)
}

/// An object without the metadata that does not count as a spec change.
fn strip_meta(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
    }
    v
}

fn update(cluster: &Arc<Cluster>, t: &Target<'_>, name: &str, r: &Req) -> ApiResult {
    let mut obj = r.json_body()?;
    decode(t, &obj)?;
    check_body(t, &mut obj, Some(name))?;
    let warnings = validate_fields(t, r, &mut obj)?;
    with_warnings(update_checked(cluster, t, name, r, obj), &warnings)
}

fn update_checked(
    cluster: &Arc<Cluster>,
    t: &Target<'_>,
    name: &str,
    r: &Req,
    mut obj: Value,
) -> ApiResult {
    let mut store = cluster.store();
    check_namespace(&store, t, false)?;
    let old = store
        .get(&key(t, name))
        .ok_or_else(|| ApiError::not_found(&t.rt, name))?;
    if t.sub == Some("approval") {
        obj = approve(cluster, &old, &obj)?;
    }
    let manager = r.manager();
    let av = t.rt.api_version();
    let p = part(t);
    let crd = crd_of(&store, &t.rt);
    let stored = write_existing(
        cluster,
        &mut store,
        t,
        &old,
        obj,
        |o, n| record_update(Some(o), n, &manager, &av, p, lists(&t.rt, crd.as_deref())),
        r.dry_run(),
    )?;
    ok(&stored)
}

/// A CSR approval update: the conditions of the status change, and an approved request gets a
/// certificate signed by the cluster's CA at once (or a `Failed` condition if it cannot be
/// signed).
fn approve(cluster: &Cluster, old: &Value, body: &Value) -> Result<Value, ApiError> {
    let mut n = old.clone();
    let conditions = body
        .pointer("/status/conditions")
        .cloned()
        .unwrap_or(json!([]));
    let approved = conditions.as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Approved" && c["status"] == "True")
    });
    n["status"]["conditions"] = conditions;
    if !approved || old.pointer("/status/certificate").is_some() {
        return Ok(n);
    }
    let request = old
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let signed = base64::engine::general_purpose::STANDARD
        .decode(request)
        .map_err(|e| format!("spec.request is not base64: {e}"))
        .and_then(|pem| String::from_utf8(pem).map_err(|e| format!("spec.request is not PEM: {e}")))
        .and_then(|pem| {
            let signer = cluster.ca().map_err(|e| e.to_string())?;
            signer.sign_csr(&pem)
        });
    match signed {
        Ok(cert) => {
            n["status"]["certificate"] =
                json!(base64::engine::general_purpose::STANDARD.encode(cert))
        }
        Err(message) => {
            if let Some(c) = n["status"]["conditions"].as_array_mut() {
                c.push(
                    json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                              "message": message, "lastUpdateTime": now_rfc3339()}),
                );
            }
        }
    }
    Ok(n)
}

fn patch(cluster: &Arc<Cluster>, t: &Target<'_>, name: &str, r: &Req) -> ApiResult {
    let ct = r.media_type();
    let body = r.json_body()?;
    let manager = r.manager();
    let av = t.rt.api_version();
    let p = part(t);
    let mut store = cluster.store();
    check_namespace(&store, t, false)?;
    let k = key(t, name);
    let old = store.get(&k);
    let crd = crd_of(&store, &t.rt);
    let lists = lists(&t.rt, crd.as_deref());
    if ct == "application/apply-patch+yaml" {
        if r.q("fieldManager").is_none_or(str::is_empty) {
            return Err(ApiError::invalid(
                &t.rt,
                name,
                "fieldManager",
                "FieldValueRequired",
                "is required for apply patch",
            ));
        }
        field_validation(r)?;
        type_apply(t, &body)?;
        let mut applied = body;
        check_body(t, &mut applied, Some(name))?;
        let force = r.q("force").is_some_and(|f| f == "true");
        let conflict =
            |c: crate::apply::ApplyConflict| ApiError::conflict(&t.rt, name, c.message, c.causes);
        return match old {
            None => {
                check_namespace(&store, t, true)?;
                let base = json!({"apiVersion": av, "kind": t.rt.kind, "metadata": applied["metadata"].clone()});
                let mut obj = apply(&base, &applied, &manager, &av, force, Part::Main, lists)
                    .map_err(conflict)?;
                // Apply's own fields are in managedFields already; keep them.
                let mf = obj.pointer("/metadata/managedFields").cloned();
                if status_set_on_create(&t.rt)
                    && let Some(st) = applied.get("status")
                {
                    obj["status"] = st.clone();
                } else if t.rt.status
                    && let Some(o) = obj.as_object_mut()
                {
                    o.remove("status");
                }
                let stored = insert_new(
                    cluster,
                    &mut store,
                    t,
                    k,
                    obj.take(),
                    |o| {
                        if let Some(mf) = mf {
                            o["metadata"]["managedFields"] = mf;
                        }
                    },
                    r.dry_run(),
                )?;
                Ok(json_response(StatusCode::CREATED, &stored))
            }
            Some(old) => {
                let new =
                    apply(&old, &applied, &manager, &av, force, p, lists).map_err(conflict)?;
                let stored =
                    write_existing(cluster, &mut store, t, &old, new, |_, _| {}, r.dry_run())?;
                ok(&stored)
            }
        };
    }
    let old = old.ok_or_else(|| ApiError::not_found(&t.rt, name))?;
    let mut new = (*old).clone();
    match ct.as_str() {
        "application/json-patch+json" => json_patch(&mut new, &body).map_err(|m| ApiError {
            code: 422,
            reason: "Invalid",
            message: m,
            details: None,
            retry_after: None,
        })?,
        "application/merge-patch+json" => merge_patch(&mut new, &body),
        "application/strategic-merge-patch+json" => {
            if t.rt.custom {
                return Err(ApiError::unsupported_media_type(&ct));
            }
            strategic_merge(&mut new, &body);
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    }
    check_patched(
        t,
        ct == "application/strategic-merge-patch+json",
        &body,
        &new,
    )?;
    check_body(t, &mut new, Some(name))?;
    let warnings = validate_fields(t, r, &mut new)?;
    if t.sub == Some("approval") {
        new = approve(cluster, &old, &new)?;
    }
    // A patch applies to the current object: its resourceVersion only counts if the patch set it.
    if body.pointer("/metadata/resourceVersion").is_none()
        && let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("resourceVersion");
    }
    let stored = write_existing(
        cluster,
        &mut store,
        t,
        &old,
        new,
        |o, n| record_update(Some(o), n, &manager, &av, p, lists),
        r.dry_run(),
    )?;
    with_warnings(ok(&stored), &warnings)
}

/// DeleteOptions from the body and the query.
fn delete_options(r: &Req) -> Result<(String, Option<String>, Option<String>), ApiError> {
    let body: Value = if r.body.is_empty() {
        json!({})
    } else {
        r.json_body()?
    };
    let policy = r
        .q("propagationPolicy")
        .or_else(|| body.get("propagationPolicy").and_then(Value::as_str))
        .unwrap_or("Background")
        .to_owned();
    if !matches!(policy.as_str(), "Background" | "Foreground" | "Orphan") {
        return Err(ApiError::bad_request(format!(
            "unsupported propagation policy {policy:?}"
        )));
    }
    let pre_uid = body
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let pre_rv = body
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((policy, pre_uid, pre_rv))
}

fn delete(cluster: &Arc<Cluster>, t: &Target<'_>, name: &str, r: &Req) -> ApiResult {
    let (policy, pre_uid, pre_rv) = delete_options(r)?;
    let mut store = cluster.store();
    let k = key(t, name);
    let old = store
        .get(&k)
        .ok_or_else(|| ApiError::not_found(&t.rt, name))?;
    if pre_uid.is_some_and(|u| Some(u.as_str()) != meta_str(&old, "uid"))
        || pre_rv.is_some_and(|v| Some(v.as_str()) != meta_str(&old, "resourceVersion"))
    {
        return Err(ApiError::conflict(
            &t.rt,
            name,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed",
                t.rt.qualified()
            ),
            Vec::new(),
        ));
    }
    if r.dry_run() {
        return ok(&old);
    }
    let out = begin_delete(cluster, &mut store, &t.rt, &k, &policy);
    // An object deleted at once answers a Status naming it, as the real server's registry does
    // for every kind but Pods; one that stays (finalizers, foreground) answers itself.
    let gone = store.get(&k).is_none();
    if gone && !(t.rt.group.is_empty() && t.rt.plural == "pods") {
        let mut details = crate::status::details(&t.rt, name);
        if let Some(uid) = meta_str(&old, "uid") {
            details["uid"] = json!(uid);
        }
        return ok(
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Success", "details": details}),
        );
    }
    ok(&out)
}

/// The finalizer that keeps an object deleted in the foreground until its blocking dependents
/// are gone.
const FOREGROUND: &str = "foregroundDeletion";

/// Deletes an object: marks it (finalizers pending, namespaces, foreground deletion) or removes
/// it with its dependents. Returns what the answer shows.
fn begin_delete(
    cluster: &Arc<Cluster>,
    store: &mut Store,
    rt: &ResourceType,
    k: &Key,
    policy: &str,
) -> Value {
    let Some(old) = store.get(k) else {
        return Value::Null;
    };
    let has_finalizers = old
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    let is_ns = rt.group.is_empty() && rt.plural == "namespaces";
    let foreground = policy == "Foreground" && !is_ns;
    if has_finalizers || is_ns || foreground {
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return (*old).clone();
        }
        let mut obj = (*old).clone();
        obj["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
        obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if foreground {
            // As the real server: the owner stays, marked, while the garbage collector deletes
            // its dependents; it goes once no dependent blocks it.
            match obj["metadata"]["finalizers"].as_array_mut() {
                Some(f) => f.push(json!(FOREGROUND)),
                None => obj["metadata"]["finalizers"] = json!([FOREGROUND]),
            }
        }
        if is_ns {
            obj["status"] = json!({"phase": "Terminating"});
        }
        let stored = (*store.put(k.clone(), obj)).clone();
        if is_ns {
            terminate_namespace(cluster, k.2.clone());
        }
        if foreground && let Some(uid) = meta_str(&stored, "uid") {
            for dk in dependents(store, uid, false) {
                if let Some(drt) = type_of(store, &dk.0) {
                    begin_delete(cluster, store, &drt, &dk, "Foreground");
                }
            }
            release_foreground(store, uid);
        }
        return stored;
    }
    finish_delete(store, rt, k, policy).map_or(Value::Null, |v| (*v).clone())
}

/// The objects with an owner reference to `uid` (only those blocking its deletion if
/// `blocking`).
fn dependents(store: &Store, uid: &str, blocking: bool) -> Vec<Key> {
    store
        .all()
        .filter(|(_, o)| {
            refers_to(o, uid, |r| {
                !blocking || r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
            })
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Whether one of `obj`'s owner references names `uid` and passes `also`.
pub(crate) fn refers_to(obj: &Value, uid: &str, also: impl Fn(&Value) -> bool) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid) && also(r))
        })
}

/// Finishes the foreground deletion of the object `uid` if it waits for dependents and none
/// blocks it any more: drops its `foregroundDeletion` finalizer, and the object if that was the
/// last one.
fn release_foreground(store: &mut Store, uid: &str) {
    let waiting = store.all().find(|(_, o)| {
        meta_str(o, "uid") == Some(uid)
            && o.pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == FOREGROUND))
    });
    let Some((k, owner)) = waiting.map(|(k, o)| (k.clone(), o.clone())) else {
        return;
    };
    if !dependents(store, uid, true).is_empty() {
        return;
    }
    let mut owner = (*owner).clone();
    let mut done = false;
    if let Some(f) = owner["metadata"]["finalizers"].as_array_mut() {
        f.retain(|x| x != FOREGROUND);
        done = f.is_empty();
    }
    if done {
        if let Some(rt) = type_of(store, &k.0) {
            finish_delete(store, &rt, &k, "Background");
        }
    } else {
        store.put(k, owner);
    }
}

/// Removes an object, applies the propagation policy to the objects it owns and releases owners
/// it kept in foreground deletion.
fn finish_delete(
    store: &mut Store,
    rt: &ResourceType,
    k: &Key,
    policy: &str,
) -> Option<Arc<Value>> {
    let gone = store.remove(k)?;
    if rt.plural == "customresourcedefinitions" {
        unregister(store, &gone);
    }
    let owners: Vec<String> = gone
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
        .collect();
    if let Some(uid) = meta_str(&gone, "uid").map(str::to_owned) {
        collect_dependents(store, &uid, policy);
    }
    for owner in owners {
        release_foreground(store, &owner);
    }
    Some(gone)
}

/// What happens to the dependents of a removed object: orphaned (their reference to it
/// dropped) or deleted in the background.
fn collect_dependents(store: &mut Store, uid: &str, policy: &str) {
    for dk in dependents(store, uid, false) {
        if policy == "Orphan" {
            if let Some(o) = store.get(&dk) {
                let mut o = (*o).clone();
                if let Some(refs) = o
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                }
                store.put(dk, o);
            }
        } else if let Some(drt) = type_of(store, &dk.0) {
            let Some(o) = store.get(&dk) else { continue };
            let has_finalizers = o
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if !has_finalizers {
                finish_delete(store, &drt, &dk, policy);
            } else if o.pointer("/metadata/deletionTimestamp").is_none() {
                let mut o = (*o).clone();
                o["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
                store.put(dk, o);
            }
        }
    }
}

fn type_of(store: &Store, tk: &str) -> Option<Arc<ResourceType>> {
    BUILTIN_TYPES
        .iter()
        .chain(store.custom_types.iter())
        .find(|t| type_key(t) == tk)
        .cloned()
}

/// The namespace controller: after the ready delay, deletes everything in the namespace and
/// then the namespace itself.
fn terminate_namespace(cluster: &Arc<Cluster>, ns: String) {
    let c = cluster.clone();
    let run = move |c: &Arc<Cluster>| {
        let mut store = c.store();
        let keys: Vec<Key> = store
            .all()
            .filter(|(k, _)| k.1 == ns)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            // Finalizers of contents are not waited for: the simulated controllers own none.
            if let Some(rt) = type_of(&store, &k.0) {
                finish_delete(&mut store, &rt, &k, "Background");
            }
        }
        if let Some(rt) = type_of(&store, "/namespaces") {
            finish_delete(
                &mut store,
                &rt,
                &("/namespaces".to_owned(), String::new(), ns.clone()),
                "Background",
            );
        }
    };
    let delay = c.ready_delay;
    tokio::spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(delay) => run(&c),
            () = c.shutdown.cancelled() => {}
        }
    });
}

fn delete_collection(cluster: &Arc<Cluster>, t: &Target<'_>, r: &Req) -> ApiResult {
    let (ls, fs) = selectors(r)?;
    let (policy, _, _) = delete_options(r)?;
    let mut store = cluster.store();
    check_namespace(&store, t, false)?;
    let tk = type_key(&t.rt);
    let keys: Vec<Key> = store
        .list(&tk, t.ns)
        .filter(|(_, o)| ls.matches(o) && fs.matches(o))
        .map(|(k, _)| k.clone())
        .collect();
    let mut items = Vec::new();
    for k in keys {
        if r.dry_run() {
            if let Some(o) = store.get(&k) {
                items.push((*o).clone());
            }
        } else {
            items.push(begin_delete(cluster, &mut store, &t.rt, &k, &policy));
        }
    }
    ok(
        &json!({"kind": list_kind(&t.rt), "apiVersion": t.rt.api_version(),
               "metadata": {"resourceVersion": store.rv().to_string()}, "items": items}),
    )
}

/// The resource types a CRD object defines (one per served version).
fn crd_types(crd: &Value) -> Result<Vec<Arc<ResourceType>>, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural is required")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind is required")?;
    let expected = format!("{plural}.{group}");
    if meta_str(crd, "name") != Some(expected.as_str()) {
        return Err(format!(
            "metadata.name must be spec.names.plural+\".\"+spec.group: {expected}"
        ));
    }
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or("spec.versions[].name is required")?;
        out.push(Arc::new(ResourceType {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            singular: names
                .get("singular")
                .and_then(Value::as_str)
                .map_or_else(|| kind.to_ascii_lowercase(), str::to_owned),
            kind: kind.to_owned(),
            namespaced,
            short_names: strs(names.get("shortNames")),
            categories: strs(names.get("categories")),
            status: v.pointer("/subresources/status").is_some(),
            custom: true,
            scale: v.pointer("/subresources/scale").map(|sc| {
                let path = |f: &str| sc.get(f).and_then(Value::as_str).map(str::to_owned);
                ScalePaths {
                    spec_replicas: path("specReplicasPath").unwrap_or_default(),
                    status_replicas: path("statusReplicasPath").unwrap_or_default(),
                    label_selector: path("labelSelectorPath"),
                }
            }),
        }));
    }
    Ok(out)
}

fn register(store: &mut Store, rts: Vec<Arc<ResourceType>>) {
    if let Some(first) = rts.first() {
        let (g, p) = (first.group.clone(), first.plural.clone());
        store
            .custom_types
            .retain(|t| !(t.group == g && t.plural == p));
    }
    store.custom_types.extend(rts);
}

/// Stops serving a deleted CRD's types and deletes their objects.
fn unregister(store: &mut Store, crd: &Value) {
    let Ok(rts) = crd_types(crd) else { return };
    let Some(first) = rts.first() else { return };
    let tk = type_key(first);
    store
        .custom_types
        .retain(|t| !(t.group == first.group && t.plural == first.plural));
    let keys: Vec<Key> = store.list(&tk, None).map(|(k, _)| k.clone()).collect();
    for k in keys {
        store.remove(&k);
    }
}

/// Registers the types of the CRDs a loaded store holds.
pub(crate) fn restore_custom_types(store: &mut Store) {
    let crds: Vec<Arc<Value>> = store
        .list("apiextensions.k8s.io/customresourcedefinitions", None)
        .map(|(_, v)| v.clone())
        .collect();
    for crd in crds {
        if let Ok(rts) = crd_types(&crd) {
            register(store, rts);
        }
    }
}

fn watch_line(kind: &str, obj: &Value) -> Bytes {
    let mut s = json!({"type": kind, "object": obj}).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn watch_stream(cluster: &Arc<Cluster>, t: &Target<'_>, r: &Req) -> ApiResult {
    let (ls, fs) = selectors(r)?;
    let bookmarks = r.q("allowWatchBookmarks").is_some_and(|b| b == "true");
    let timeout = r
        .q("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let from: Option<u64> = match r.q("resourceVersion") {
        Some(v) if !v.is_empty() && v != "0" => Some(
            v.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {v:?}")))?,
        ),
        _ => None,
    };
    let tk = type_key(&t.rt);
    let ns = t.ns.map(str::to_owned);
    let selected = move |o: &Value| ls.matches(o) && fs.matches(o);
    // What a watcher with selectors sees of an event: objects entering the selection are ADDED,
    // objects leaving it DELETED, as the real server reports them.
    let translate = move |e: &Event| -> Option<Bytes> {
        if e.key.0 != tk || ns.as_ref().is_some_and(|n| *n != e.key.1) {
            return None;
        }
        let now = selected(&e.object);
        let kind = match e.kind {
            EventType::Modified => match (e.old.as_deref().is_some_and(&selected), now) {
                (true, true) => EventType::Modified,
                (false, true) => EventType::Added,
                (true, false) => EventType::Deleted,
                (false, false) => return None,
            },
            k if now => k,
            _ => return None,
        };
        Some(watch_line(kind.as_str(), &e.object))
    };
    let (initial, mut rx, mut last_rv) = {
        let mut store = cluster.store();
        let now = store.rv();
        match from {
            Some(rv) => {
                let (past, rx) = store
                    .watch_from(rv)
                    .map_err(|oldest| ApiError::gone(rv, oldest))?;
                (
                    past.iter().filter_map(|e| translate(e)).collect::<Vec<_>>(),
                    rx,
                    rv,
                )
            }
            None => {
                let (_, rx) = store
                    .watch_from(now)
                    .map_err(|oldest| ApiError::gone(now, oldest))?;
                let lines = store
                    .list(&type_key(&t.rt), t.ns)
                    .filter_map(|(k, o)| {
                        translate(&Event {
                            rv: now,
                            key: k.clone(),
                            kind: EventType::Added,
                            object: o.clone(),
                            old: None,
                        })
                    })
                    .collect();
                (lines, rx, now)
            }
        }
    };
    let (tx, out) = tokio::sync::mpsc::channel::<Bytes>(64);
    let c = cluster.clone();
    let (kind, av) = (t.rt.kind.clone(), t.rt.api_version());
    tokio::spawn(async move {
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let deadline = async {
            match timeout {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(c.bookmark_interval);
        tick.tick().await;
        loop {
            tokio::select! {
                () = &mut deadline => return,
                () = c.shutdown.cancelled() => return,
                () = tx.closed() => return,
                _ = tick.tick(), if bookmarks => {
                    let rv = c.store().rv().max(last_rv);
                    let bm = json!({"kind": kind, "apiVersion": av, "metadata": {"resourceVersion": rv.to_string(),
                        "annotations": {"k8s.io/initial-events-end": "true"}}});
                    if tx.send(watch_line("BOOKMARK", &bm)).await.is_err() { return; }
                }
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        if ev.rv <= last_rv { continue; }
                        last_rv = ev.rv;
                        if let Some(line) = translate(&ev)
                            && tx.send(line).await.is_err()
                        {
                            return;
                        }
                    }
                    // A watcher that fell behind the log is ended; clients re-list and re-watch.
                    Err(_) => return,
                },
            }
        }
    });
    let stream = futures::stream::unfold(out, |mut out| async move {
        out.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), out))
    });
    let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
