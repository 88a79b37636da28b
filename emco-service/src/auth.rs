//! Authentication: who a REST or gRPC caller is, from a bearer token (a static token, or a JWT
//! of an OIDC issuer), and the guard that applies `emco_orchestrator::auth`'s rules to every
//! REST call before any handler runs.
//!
//! The configuration is one YAML file (`--auth-config`):
//!
//! ```yaml
//! tokens:                         # static bearer tokens, for small setups
//!   - token: "s3cret"
//!     subject: alice
//!     roles: [project-owner:shop]
//! oidc:                           # JWTs of an OIDC issuer (RS256, ES256)
//!   issuer: https://login.example.com/realms/emco
//!   audience: emco
//!   jwksFile: /etc/emco/jwks.json # or jwksUrl; neither: the issuer's discovery document
//!   rolesClaim: roles             # role names in the token [default: roles]
//!   groupsClaim: groups           # groups the bindings below name [default: groups]
//!   subjectClaim: sub             # [default: sub]
//! bindings:                       # roles by subject or group, for tokens without roles
//!   - group: ops
//!     roles: [cluster-admin]
//! ```
//!
//! Without the file the server is open: every caller is an anonymous platform admin (a warning
//! at start says so).

use emco_core::poison::{read, write};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use axum::Json;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use emco_core::Error;
use emco_core::x509::CertSubject;
use emco_orchestrator::auth::{Access, Principal, Role, Scope, Target};
use emco_rest::ApiError;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

use crate::tls::Peer;

/// The cookie the dashboard's login sets: the caller's bearer token, sent back by the browser.
pub const SESSION_COOKIE: &str = "emco_session";

/// How long fetched signing keys are used before they are fetched again.
const KEYS_TTL: Duration = Duration::from_secs(600);
/// The least time between two fetches caused by tokens naming unknown keys.
const REFETCH_GAP: Duration = Duration::from_secs(30);
/// The time one fetch of a discovery document or key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest key set or discovery document read.
const MAX_DOCUMENT: usize = 1024 * 1024;
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 60;
/// The largest project list narrowed for a caller who sees only some projects.
const MAX_LIST: usize = 64 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    tokens: Vec<StaticToken>,
    oidc: Option<OidcFile>,
    #[serde(default)]
    bindings: Vec<Binding>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticToken {
    token: String,
    subject: String,
    #[serde(default)]
    roles: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OidcFile {
    issuer: String,
    audience: String,
    jwks_file: Option<PathBuf>,
    jwks_url: Option<String>,
    roles_claim: Option<String>,
    groups_claim: Option<String>,
    subject_claim: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Binding {
    subject: Option<String>,
    group: Option<String>,
    roles: Vec<String>,
}

fn roles_of(names: &[String], whose: &str) -> Result<Vec<Role>, Error> {
    names
        .iter()
        .map(|n| n.parse().map_err(|e: Error| e.within(whose)))
        .collect()
}

/// A token's SHA-256: the static tokens are kept and looked up by it, so the lookup's timing
/// says nothing about how much of a guess matched.
fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Where an issuer's signing keys come from.
#[derive(Debug)]
enum KeySource {
    File(PathBuf),
    Url(String),
    /// The `jwks_uri` of `{issuer}/.well-known/openid-configuration`.
    Discovery(String),
}

#[derive(Debug, Default)]
struct KeyCache {
    keys: Option<Arc<JwkSet>>,
    fetched: Option<Instant>,
}

#[derive(Debug)]
struct Oidc {
    issuer: String,
    audience: String,
    roles_claim: String,
    groups_claim: String,
    subject_claim: String,
    source: KeySource,
    cache: tokio::sync::Mutex<KeyCache>,
}

#[derive(Debug, Default)]
struct Inner {
    tokens: HashMap<[u8; 32], Principal>,
    oidc: Option<Oidc>,
    by_subject: BTreeMap<String, Vec<Role>>,
    by_group: BTreeMap<String, Vec<Role>>,
}

impl Inner {
    /// `subject` with `roles` and those the bindings give it and its `groups`.
    fn bound(&self, subject: &str, groups: &[String], mut roles: Vec<Role>) -> Principal {
        roles.extend(self.by_subject.get(subject).into_iter().flatten().cloned());
        for group in groups {
            roles.extend(self.by_group.get(group).into_iter().flatten().cloned());
        }
        Principal::new(subject, roles)
    }
}

/// How callers are known.
#[derive(Debug, Clone)]
enum Mode {
    /// Every caller is this principal, credentials or not: the open mode (the anonymous
    /// platform admin), or an embedder acting for a principal it names.
    As(Principal),
    /// By the credentials the configuration accepts.
    Verified(Arc<Loaded>),
}

/// A configuration and, when it came from files, what to read again when they change.
#[derive(Debug)]
struct Loaded {
    /// The auth file.
    path: Option<PathBuf>,
    /// The configuration in use and the modification times of the files it was read from
    /// (the auth file, a key set file).
    current: RwLock<(Arc<Inner>, Vec<Option<SystemTime>>)>,
}

impl Loaded {
    fn new(path: Option<PathBuf>, inner: Inner) -> Self {
        let stamps = path.as_deref().map_or_else(Vec::new, |p| stamps(p, &inner));
        Self {
            path,
            current: RwLock::new((Arc::new(inner), stamps)),
        }
    }

    fn inner(&self) -> Arc<Inner> {
        Arc::clone(&read(&self.current).0)
    }
}

/// The modification times of auth file `path` and of the key set file `inner` reads.
fn stamps(path: &Path, inner: &Inner) -> Vec<Option<SystemTime>> {
    let keys = inner.oidc.as_ref().and_then(|o| match &o.source {
        KeySource::File(f) => Some(f.as_path()),
        _ => None,
    });
    std::iter::once(path)
        .chain(keys)
        .map(crate::tls::modified)
        .collect()
}

/// Who a caller is. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Authenticator {
    mode: Mode,
}

impl Default for Authenticator {
    fn default() -> Self {
        Self::open()
    }
}

impl Authenticator {
    /// Every caller an anonymous platform admin.
    #[must_use]
    pub fn open() -> Self {
        Self::acting_as(Principal::open())
    }

    /// Every caller is `principal`, whatever credentials it sends: for a program that embeds
    /// the router in its own process and calls it for one user (the embedded Python
    /// orchestrator), so the same rules apply there as on a server.
    #[must_use]
    pub fn acting_as(principal: Principal) -> Self {
        Self {
            mode: Mode::As(principal),
        }
    }

    /// Nobody in: what a server whose auth file is gone runs with rather than open.
    #[must_use]
    pub fn closed() -> Self {
        Self {
            mode: Mode::Verified(Arc::new(Loaded::new(None, Inner::default()))),
        }
    }

    /// Whether no credentials are configured and every caller may do anything.
    #[must_use]
    pub fn is_open(&self) -> bool {
        matches!(&self.mode, Mode::As(p) if *p == Principal::open())
    }

    /// The authentication `path` configures (see the module's documentation). A key set file is
    /// read now; keys from a URL are fetched on the first token.
    ///
    /// # Errors
    /// InvalidArgument when the file cannot be read, is not valid, names an unknown role, or
    /// configures no way in.
    pub fn from_file(path: &Path) -> Result<Self, Error> {
        let inner = read_auth_file(path)?;
        Ok(Self {
            mode: Mode::Verified(Arc::new(Loaded::new(Some(path.to_owned()), inner))),
        })
    }

    /// Reads the auth file again when it or the key set file it names changed since it was
    /// read: a file that is not valid (half written, a typo) is refused and the configuration
    /// in use kept until the files change again. A new configuration fetches URL keys again.
    /// Nothing for an authenticator not from a file.
    ///
    /// # Errors
    /// As [`Authenticator::from_file`], for a changed file not taken.
    pub fn reload(&self) -> Result<bool, Error> {
        let Mode::Verified(loaded) = &self.mode else {
            return Ok(false);
        };
        let Some(path) = &loaded.path else {
            return Ok(false);
        };
        let now = {
            // A read lock for the check: every request takes one.
            let current = read(&loaded.current);
            let now = stamps(path, &current.0);
            if current.1 == now {
                return Ok(false);
            }
            now
        };
        // Read without the lock (checks at once would read and store the same files).
        let read = read_auth_file(path);
        let mut current = write(&loaded.current);
        match read {
            Ok(inner) => {
                // Stamps taken before the read: a file that changed while it was read differs
                // from them at the next check and is read again. Only a new key set file's is
                // taken now, and read again once more for it.
                let after = stamps(path, &inner);
                let kept = if after == now { after } else { Vec::new() };
                *current = (Arc::new(inner), kept);
                Ok(true)
            }
            Err(e) => {
                // Said once per change of the files, not at every check.
                current.1 = now;
                Err(e)
            }
        }
    }

    /// [`Authenticator::from_file`] of the file's text.
    ///
    /// # Errors
    /// As [`Authenticator::from_file`].
    pub fn parse(text: &str) -> Result<Self, Error> {
        let inner = parse_auth_file(text)?;
        Ok(Self {
            mode: Mode::Verified(Arc::new(Loaded::new(None, inner))),
        })
    }
}

/// The configuration of the auth file at `path`.
fn read_auth_file(path: &Path) -> Result<Inner, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::invalid(format!("cannot read the auth config {}", path.display())).with_source(e)
    })?;
    parse_auth_file(&text).map_err(|e| {
        Error::invalid(format!(
            "the auth config {} is not valid: {e}",
            path.display()
        ))
    })
}

/// The configuration of an auth file's text (a key set file it names is read now).
fn parse_auth_file(text: &str) -> Result<Inner, Error> {
    let file: AuthFile =
        emco_go::yaml::from_str(text).map_err(|e| Error::invalid(e.to_string()))?;
    if file.tokens.is_empty() && file.oidc.is_none() {
        return Err(Error::invalid("it has neither tokens nor oidc"));
    }
    let mut inner = Inner::default();
    for (i, t) in file.tokens.iter().enumerate() {
        if t.token.len() < 16 {
            return Err(Error::invalid(format!(
                "tokens[{i}] ({}) is shorter than 16 characters",
                t.subject
            )));
        }
        let roles = roles_of(&t.roles, &format!("tokens[{i}].roles"))?;
        if inner
            .tokens
            .insert(digest(&t.token), Principal::new(&t.subject, roles))
            .is_some()
        {
            return Err(Error::invalid(format!("tokens[{i}] repeats a token")));
        }
    }
    for (i, b) in file.bindings.iter().enumerate() {
        let roles = roles_of(&b.roles, &format!("bindings[{i}].roles"))?;
        let to = match (&b.subject, &b.group) {
            (Some(s), None) => inner.by_subject.entry(s.clone()),
            (None, Some(g)) => inner.by_group.entry(g.clone()),
            _ => {
                return Err(Error::invalid(format!(
                    "bindings[{i}] must name one subject or one group"
                )));
            }
        };
        to.or_default().extend(roles);
    }
    if let Some(o) = file.oidc {
        let source = match (o.jwks_file, o.jwks_url) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid("oidc has both jwksFile and jwksUrl"));
            }
            (Some(f), None) => KeySource::File(f),
            (None, Some(u)) => KeySource::Url(u),
            (None, None) => KeySource::Discovery(format!(
                "{}/.well-known/openid-configuration",
                o.issuer.trim_end_matches('/')
            )),
        };
        let oidc = Oidc {
            issuer: o.issuer,
            audience: o.audience,
            roles_claim: o.roles_claim.unwrap_or_else(|| "roles".to_owned()),
            groups_claim: o.groups_claim.unwrap_or_else(|| "groups".to_owned()),
            subject_claim: o.subject_claim.unwrap_or_else(|| "sub".to_owned()),
            source,
            cache: tokio::sync::Mutex::default(),
        };
        if let KeySource::File(path) = &oidc.source {
            let keys = read_key_file(path)?;
            *oidc
                .cache
                .try_lock()
                .map_err(|_| Error::internal("unshared lock"))? = KeyCache {
                keys: Some(Arc::new(keys)),
                fetched: Some(Instant::now()),
            };
        }
        inner.oidc = Some(oidc);
    }
    Ok(inner)
}

impl Authenticator {
    /// The principal `token` proves; in the open mode the anonymous platform admin, and for an
    /// authenticator [acting as](Authenticator::acting_as) someone that principal, whatever the
    /// token.
    ///
    /// # Errors
    /// Unauthenticated when there is no token or it proves nobody (unknown, expired, for
    /// another audience or issuer, badly signed); Unavailable when the issuer's keys cannot be
    /// fetched.
    pub async fn authenticate(&self, token: Option<&str>) -> Result<Principal, Error> {
        self.authenticate_with(token, None).await
    }

    /// [`Authenticator::authenticate`] of a caller that may also have proved a client
    /// certificate (`client`, verified by the TLS layer): the token when there is one, else
    /// the certificate's subject with the roles the bindings give its user and groups.
    ///
    /// # Errors
    /// As [`Authenticator::authenticate`].
    pub async fn authenticate_with(
        &self,
        token: Option<&str>,
        client: Option<&CertSubject>,
    ) -> Result<Principal, Error> {
        let inner = match &self.mode {
            Mode::As(p) => return Ok(p.clone()),
            Mode::Verified(loaded) => loaded.inner(),
        };
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            if let Some(cert) = client {
                return Ok(inner.bound(&cert.user, &cert.groups, Vec::new()));
            }
            return Err(Error::unauthenticated(
                "credentials are required: send Authorization: Bearer TOKEN or a client \
                 certificate",
            ));
        };
        if let Some(p) = inner.tokens.get(&digest(token)) {
            return Ok(p.clone());
        }
        match &inner.oidc {
            // Three dot-separated parts: a JWT; anything else is a static token not known.
            Some(oidc) if token.split('.').count() == 3 => oidc.principal(&inner, token).await,
            _ => Err(Error::unauthenticated("the token is not valid")),
        }
    }
}

fn read_key_file(path: &Path) -> Result<JwkSet, Error> {
    let text = std::fs::read(path).map_err(|e| {
        Error::invalid(format!("cannot read the key set {}", path.display())).with_source(e)
    })?;
    serde_json::from_slice(&text).map_err(|e| {
        Error::invalid(format!(
            "the key set {} is no JSON Web Key Set: {e}",
            path.display()
        ))
    })
}

impl Oidc {
    async fn principal(&self, inner: &Inner, token: &str) -> Result<Principal, Error> {
        let invalid =
            |what: &str| Error::unauthenticated(format!("the token is not valid: {what}"));
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(&e.to_string()))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(invalid(&format!(
                "algorithm {:?} is not accepted (RS256, ES256)",
                header.alg
            )));
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        let claims =
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation)
                .map_err(|e| invalid(&e.to_string()))?
                .claims;
        let subject = claims
            .get(&self.subject_claim)
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(&format!("no {:?} claim", self.subject_claim)))?;
        let strings = |claim: &str| -> Vec<String> {
            match claims.get(claim) {
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                Some(Value::String(s)) => vec![s.clone()],
                _ => Vec::new(),
            }
        };
        let roles: Vec<Role> = strings(&self.roles_claim)
            .iter()
            // Issuers carry roles of other systems too: names not ours are not errors.
            .filter_map(|r| r.parse().ok())
            .collect();
        Ok(inner.bound(subject, &strings(&self.groups_claim), roles))
    }

    /// The key `kid` names (or the only key for `alg` when the token names none), fetching the
    /// key set again when it is stale or, at most every [`REFETCH_GAP`], when the key is unknown
    /// (the issuer rotated its keys).
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Error> {
        let mut cache = self.cache.lock().await;
        let age = cache.fetched.map(|t| t.elapsed());
        let stale = age.is_none_or(|a| a > KEYS_TTL) && !matches!(self.source, KeySource::File(_));
        if stale {
            self.refresh(&mut cache).await?;
        }
        if let Some(key) = cache.keys.as_deref().and_then(|k| pick(k, kid, alg)) {
            return key;
        }
        if cache.fetched.is_some_and(|t| t.elapsed() >= REFETCH_GAP) {
            self.refresh(&mut cache).await?;
            if let Some(key) = cache.keys.as_deref().and_then(|k| pick(k, kid, alg)) {
                return key;
            }
        }
        Err(Error::unauthenticated(format!(
            "the token is not valid: no signing key {} of the issuer",
            kid.map_or_else(|| format!("for {alg:?}"), |k| format!("{k:?}"))
        )))
    }

    async fn refresh(&self, cache: &mut KeyCache) -> Result<(), Error> {
        let keys = match &self.source {
            KeySource::File(path) => read_key_file(path),
            KeySource::Url(url) => fetch_json(url).await,
            KeySource::Discovery(url) => {
                let doc: Value = fetch_json(url).await?;
                let jwks = doc
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        Error::unavailable(format!("the discovery document {url} has no jwks_uri"))
                    })?
                    .to_owned();
                fetch_json(&jwks).await
            }
        };
        // A failed fetch is not retried for REFETCH_GAP; keys fetched before stay in use.
        cache.fetched = Some(Instant::now());
        match keys {
            Ok(k) => {
                cache.keys = Some(Arc::new(k));
                Ok(())
            }
            Err(e) if cache.keys.is_some() => {
                tracing::warn!(error = %e, "cannot fetch the issuer's keys again; using the ones fetched before");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// The key of `set` for a token of `alg` naming `kid`.
fn pick(set: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<Result<DecodingKey, Error>> {
    let fits = |k: &&jsonwebtoken::jwk::Jwk| {
        let family = match &k.algorithm {
            jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => alg == Algorithm::RS256,
            jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => alg == Algorithm::ES256,
            _ => false,
        };
        family && kid.is_none_or(|id| k.common.key_id.as_deref() == Some(id))
    };
    let mut fitting = set.keys.iter().filter(fits);
    let key = fitting.next()?;
    if kid.is_none() && fitting.next().is_some() {
        // Which of several keys signed it is a guess: refuse rather than try them all.
        return Some(Err(Error::unauthenticated(
            "the token is not valid: it names no key (kid) and the issuer has several",
        )));
    }
    Some(
        DecodingKey::from_jwk(key)
            .map_err(|e| Error::unauthenticated(format!("the issuer's key cannot be used: {e}"))),
    )
}

/// GETs `url` (http or https, the system's roots) as JSON.
async fn fetch_json<T: serde::de::DeserializeOwned>(url: &str) -> Result<T, Error> {
    use http_body_util::BodyExt as _;
    let unavailable =
        |e: &dyn std::fmt::Display| Error::unavailable(format!("cannot fetch {url}: {e}"));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| unavailable(&e))?
        .https_or_http()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, http_body_util::Empty<bytes::Bytes>>(connector);
    let uri: http::Uri = url
        .parse()
        .map_err(|e| Error::invalid(format!("{url} is no URL: {e}")))?;
    let fetch = async {
        let resp = client.get(uri).await.map_err(|e| unavailable(&e))?;
        if resp.status() != StatusCode::OK {
            return Err(unavailable(&format!("answered {}", resp.status())));
        }
        let body = http_body_util::Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| unavailable(&e))?
            .to_bytes();
        serde_json::from_slice(&body)
            .map_err(|e| unavailable(&format!("not the JSON expected: {e}")))
    };
    tokio::time::timeout(FETCH_TIMEOUT, fetch)
        .await
        .map_err(|_| unavailable(&"timed out"))?
}

/// The bearer token of a request: `Authorization: Bearer`, else the dashboard's session cookie.
#[must_use]
pub fn credentials(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then_some(token.trim());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(SESSION_COOKIE)?.strip_prefix('='))
}

/// 401 with the challenge a client expects.
fn unauthenticated(e: Error) -> Response {
    let mut resp = ApiError::from(e).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"emco\""),
    );
    resp
}

/// The REST guard: authenticates every call outside the public scope and authorizes it by
/// `emco_orchestrator::rest::target_of` before any handler (or lookup) runs; the principal
/// goes into the request's extensions for the handlers and into the response's for the audit.
/// The list of projects is narrowed to the caller's.
/// What the REST guard checks with.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    pub(crate) auth: Authenticator,
    pub(crate) limit: Option<Arc<crate::ratelimit::RateLimit>>,
}

pub(crate) async fn guard(
    State(Guard { auth, limit }): State<Guard>,
    mut req: Request,
    next: Next,
) -> Response {
    let target = emco_orchestrator::rest::target_of(req.method(), req.uri().path());
    if target.scope == Scope::Public {
        return next.run(req).await;
    }
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<Peer>>()
        .map(|c| c.0.clone());
    let client = peer.as_ref().and_then(|p| p.client.clone());
    let principal = match auth
        .authenticate_with(credentials(req.headers()), client.as_deref())
        .await
    {
        Ok(p) => p,
        Err(e) if e.kind() == emco_core::ErrorKind::Unauthenticated => return unauthenticated(e),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if let Some(limit) = &limit {
        // Each subject its own rate; on an open server everyone is anonymous: by address.
        let who = match (&peer, auth.is_open()) {
            (Some(p), true) => p.addr.ip().to_string(),
            _ => principal.subject().to_owned(),
        };
        if let Err(wait) = limit.take(&who) {
            let mut resp = ApiError::with_status(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{who:?} sends more than {} requests a second; retry later",
                    limit.per_second()
                ),
            )
            .into_response();
            let secs = wait.as_secs().max(1).to_string();
            if let Ok(v) = HeaderValue::from_str(&secs) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            resp.extensions_mut().insert(principal);
            return resp;
        }
    }
    if let Err(e) = principal.authorize(&target) {
        let mut resp = ApiError::from(e).into_response();
        resp.extensions_mut().insert(principal);
        return resp;
    }
    let narrow = req.method() == Method::GET
        && target.scope == Scope::Shared
        && req.uri().path().trim_end_matches('/') == "/v2/projects"
        && !principal.sees_all_projects();
    req.extensions_mut().insert(principal.clone());
    let mut resp = next.run(req).await;
    if narrow {
        resp = narrowed_projects(resp, &principal).await;
    }
    resp.extensions_mut().insert(principal);
    resp
}

/// A project list answer with only the projects `principal` sees.
async fn narrowed_projects(resp: Response, principal: &Principal) -> Response {
    if resp.status() != StatusCode::OK {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_LIST).await else {
        return ApiError::from(Error::internal("the project list cannot be read")).into_response();
    };
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&bytes) else {
        return ApiError::from(Error::internal("the project list is no JSON array"))
            .into_response();
    };
    let seen: Vec<Value> = items
        .into_iter()
        .filter(|p| {
            p.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some_and(|n| principal.sees_project(n))
        })
        .collect();
    let mut resp = Json(seen).into_response();
    *resp.status_mut() = parts.status;
    resp
}

/// The gRPC guard: every service but health belongs to the platform admin (its callers are
/// controllers and rsync clients, platform parts); a refusal is the gRPC status of its kind.
#[derive(Debug, Clone)]
pub struct GrpcGuard(pub Authenticator);

impl<S> tower::Layer<S> for GrpcGuard {
    type Service = GrpcGuarded<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcGuarded {
            auth: self.0.clone(),
            inner,
        }
    }
}

/// A gRPC service behind [`GrpcGuard`].
#[derive(Debug, Clone)]
pub struct GrpcGuarded<S> {
    auth: Authenticator,
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for GrpcGuarded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The clone is not ready; the service polled ready is the one that serves.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        Box::pin(async move {
            if req.uri().path().starts_with("/grpc.health.v1.Health/") {
                return inner.call(req).await;
            }
            let target = Target::new(Scope::Platform, Access::Write);
            // tonic puts the connection's peer in the request's extensions.
            let client = req
                .extensions()
                .get::<Peer>()
                .and_then(|p| p.client.clone());
            let allowed = match auth
                .authenticate_with(credentials(req.headers()), client.as_deref())
                .await
            {
                Ok(p) => p.authorize(&target),
                Err(e) => Err(e),
            };
            match allowed {
                Ok(()) => inner.call(req).await,
                Err(e) => Ok(tonic::Status::new(
                    emco_core::grpc::code_of(e.kind()),
                    e.message().to_owned(),
                )
                .into_http()),
            }
        })
    }
}
