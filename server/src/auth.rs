//! Who a client is: the admin token, a signed player token (JWT), or — in dev mode, with no
//! player key configured — an anonymous player with a fresh id.
//!
//! Player tokens are issued by the game's own backend: HS256 with `auth.player_jwt_secret`, or
//! RS256 / EdDSA with the public key file `auth.player_jwt_public_key`. Claims: `sub` (the
//! player id), `role` (`player` or `spectator`; default `player`), optional `worlds` (the world
//! names the token is good for), optional `team`, `exp` (required), and optional `nbf`, `iat`,
//! `iss` and `aud`.
//!
//! Checks beyond the signature, each with [`LEEWAY_SECS`] of clock skew: `exp` not passed, `nbf`
//! and `iat` not in the future, `exp` at most `auth.max_token_lifetime_secs` beyond now and
//! beyond `iat`; `iss` equal to `auth.jwt_issuer` and `aud` naming `auth.jwt_audience` when
//! those are set (then the claim is required; unset, it is not checked).

use std::sync::atomic::{AtomicU64, Ordering};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use steer_proto::Role;
use subtle::ConstantTimeEq;

use crate::config::AuthSettings;

/// Longest player id (`sub`) and team name accepted.
pub const MAX_ID_LEN: usize = 64;
/// Most world names in a token's `worlds`.
pub const MAX_TOKEN_WORLDS: usize = 64;
/// Clock skew tolerated on `exp`, `nbf` and `iat` (and on a session's token expiry), seconds.
pub const LEEWAY_SECS: u64 = 5;

/// The claims of a player token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// Player id.
    pub sub: String,
    /// `player` (default) or `spectator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// World names the token may be used in (absent: every world).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worlds: Option<Vec<String>>,
    /// Team: team-mates share vision in `owned` worlds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
    /// Not valid before, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
}

/// An authenticated client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Player id (`admin` for the admin token).
    pub player: String,
    /// What it may do.
    pub role: Role,
    /// Team, if any.
    pub team: Option<String>,
    /// Worlds it may use (`None`: all).
    pub worlds: Option<Vec<String>>,
    /// Expiry of its player token (`exp`), seconds since the Unix epoch; `None` for the admin
    /// and anonymous dev-mode players.
    pub expires: Option<u64>,
}

impl Identity {
    /// The admin.
    pub fn admin() -> Self {
        Identity { player: "admin".into(), role: Role::Admin, team: None, worlds: None, expires: None }
    }

    /// An anonymous dev-mode player: a player without a token expiry (every player token has
    /// an `exp`).
    pub fn is_anonymous(&self) -> bool {
        self.role == Role::Player && self.expires.is_none()
    }

    /// Has its token expired at `now` (seconds since the Unix epoch), beyond [`LEEWAY_SECS`]?
    pub fn expired_at(&self, now: u64) -> bool {
        self.expires.is_some_and(|e| now > e.saturating_add(LEEWAY_SECS))
    }

    /// May this identity use world `name`? Err: the reason for `unauthorized`.
    pub fn check_world(&self, name: &str) -> Result<(), String> {
        match &self.worlds {
            Some(w) if !w.iter().any(|x| x == name) => Err(format!("token is not valid for world `{name}` (its worlds: {})", w.join(", "))),
            _ => Ok(()),
        }
    }

    /// The key under which the world computes this player's vision: its team, or itself.
    pub fn vision_key(&self) -> String {
        vision_key(&self.player, self.team.as_deref())
    }
}

/// The vision key of a player: `t:TEAM`, or `p:ID` without a team.
pub fn vision_key(player: &str, team: Option<&str>) -> String {
    match team {
        Some(t) => format!("t:{t}"),
        None => format!("p:{player}"),
    }
}

/// Why a token was refused (the message of `unauthorized`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

/// The server's token checker.
pub struct Auth {
    /// SHA-256 of the admin token: compared by digest, so the compare takes the same time
    /// whatever the length or content of the token presented.
    admin_digest: Option<[u8; 32]>,
    key: Option<(DecodingKey, Validation)>,
    /// `auth.max_token_lifetime_secs`.
    max_lifetime: u64,
    anon: AtomicU64,
    /// Random prefix of anonymous ids, so ids are not reused across restarts.
    anon_prefix: String,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("dev_mode", &self.dev_mode()).finish_non_exhaustive()
    }
}

/// Random bytes as lowercase hex (from the OS).
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    if getrandom::fill(&mut b).is_err() {
        // Never reached on the supported platforms; fall back to a time-and-counter mix rather
        // than fail a connection.
        static N: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let mut x = t ^ N.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
        for v in &mut b {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x as u8;
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Auth {
    /// From the settings; the error names the setting.
    pub fn new(admin_token: Option<String>, s: &AuthSettings) -> Result<Self, String> {
        let key = match (&s.player_jwt_secret, &s.player_jwt_public_key) {
            (Some(_), Some(_)) => return Err("set one of auth.player_jwt_secret and auth.player_jwt_public_key, not both".into()),
            (Some(secret), None) => Some((DecodingKey::from_secret(secret.as_bytes()), validation(&[Algorithm::HS256], s))),
            (None, Some(path)) => {
                let pem = std::fs::read(path).map_err(|e| format!("auth.player_jwt_public_key: cannot read {}: {e}", path.display()))?;
                if let Ok(k) = DecodingKey::from_rsa_pem(&pem) {
                    Some((k, validation(&[Algorithm::RS256], s)))
                } else if let Ok(k) = DecodingKey::from_ed_pem(&pem) {
                    Some((k, validation(&[Algorithm::EdDSA], s)))
                } else {
                    return Err(format!("auth.player_jwt_public_key: {} is neither an RSA nor an Ed25519 public key in PEM", path.display()));
                }
            }
            (None, None) => None,
        };
        let admin_digest = admin_token.map(|t| Sha256::digest(t.as_bytes()).into());
        Ok(Auth { admin_digest, key, max_lifetime: s.max_token_lifetime_secs, anon: AtomicU64::new(1), anon_prefix: random_hex(3) })
    }

    /// True without a player key: tokenless clients are anonymous players.
    pub fn dev_mode(&self) -> bool {
        self.key.is_none()
    }

    /// True if `given` is the admin token: their SHA-256 digests compared in constant time, so
    /// neither the token's content nor its length shows in the time taken.
    pub fn is_admin_token(&self, given: &str) -> bool {
        let d = Sha256::digest(given.as_bytes());
        self.admin_digest.as_ref().is_some_and(|t| bool::from(t.as_slice().ct_eq(d.as_slice())))
    }

    /// Who presents `token` (none: anonymous in dev mode).
    pub fn authenticate(&self, token: Option<&str>) -> Result<Identity, AuthError> {
        match token {
            Some(t) if self.is_admin_token(t) => Ok(Identity::admin()),
            Some(t) => match &self.key {
                Some((key, validation)) => verify(t, key, validation, self.max_lifetime, now_secs()),
                None => Err(AuthError("unknown token: this server has no player key, so the only token it accepts is its admin token (if it has one)".into())),
            },
            None if self.key.is_some() => Err(AuthError("a player token is required".into())),
            None => Ok(self.anonymous()),
        }
    }

    /// A fresh anonymous player (dev mode).
    pub fn anonymous(&self) -> Identity {
        let n = self.anon.fetch_add(1, Ordering::Relaxed);
        Identity { player: format!("anon-{}-{n}", self.anon_prefix), role: Role::Player, team: None, worlds: None, expires: None }
    }
}

/// What jsonwebtoken checks: the algorithms, `exp` and `nbf` with [`LEEWAY_SECS`], and `iss` /
/// `aud` when configured (then required). Without `auth.jwt_audience`, `aud` is not checked at
/// all (jsonwebtoken would refuse every token that carries one).
fn validation(algs: &[Algorithm], s: &AuthSettings) -> Validation {
    let mut v = Validation::new(algs[0]);
    v.algorithms = algs.to_vec();
    v.leeway = LEEWAY_SECS;
    v.validate_exp = true;
    v.validate_nbf = true;
    let mut required = vec!["exp", "sub"];
    if let Some(iss) = &s.jwt_issuer {
        v.set_issuer(&[iss]);
        required.push("iss");
    }
    match &s.jwt_audience {
        Some(aud) => {
            v.set_audience(&[aud]);
            v.validate_aud = true;
            required.push("aud");
        }
        None => {
            v.aud = None;
            v.validate_aud = false;
        }
    }
    v.set_required_spec_claims(&required);
    v
}

/// Checks `token` at `now` (seconds since the Unix epoch); `max_lifetime`:
/// `auth.max_token_lifetime_secs`.
fn verify(token: &str, key: &DecodingKey, validation: &Validation, max_lifetime: u64, now: u64) -> Result<Identity, AuthError> {
    use jsonwebtoken::errors::ErrorKind;
    let data = jsonwebtoken::decode::<Claims>(token, key, validation).map_err(|e| {
        AuthError(match e.kind() {
            ErrorKind::ExpiredSignature => "token expired".into(),
            ErrorKind::ImmatureSignature => "token not yet valid (its `nbf` is in the future)".into(),
            ErrorKind::InvalidIssuer => "token issuer (`iss`) is not the one this server accepts (auth.jwt_issuer)".into(),
            ErrorKind::InvalidAudience => "token audience (`aud`) does not name this server (auth.jwt_audience)".into(),
            ErrorKind::InvalidSignature => "token signature is not valid (forged, or signed with another key)".into(),
            ErrorKind::InvalidAlgorithm => "token algorithm is not the one configured".into(),
            ErrorKind::MissingRequiredClaim(c) => format!("token lacks the `{c}` claim"),
            _ => format!("malformed token: {e}"),
        })
    })?;
    let c = data.claims;
    if c.iat.is_some_and(|iat| iat > now.saturating_add(LEEWAY_SECS)) {
        return Err(AuthError("token issued in the future (its `iat`); check the issuer's clock".into()));
    }
    if c.exp > now.saturating_add(max_lifetime).saturating_add(LEEWAY_SECS) || c.iat.is_some_and(|iat| c.exp.saturating_sub(iat) > max_lifetime) {
        return Err(AuthError(format!("token lifetime exceeds auth.max_token_lifetime_secs ({max_lifetime} s)")));
    }
    let good_id = |s: &str| !s.is_empty() && s.len() <= MAX_ID_LEN && s.chars().all(|ch| !ch.is_control());
    if !good_id(&c.sub) {
        return Err(AuthError(format!("token `sub` must be 1 to {MAX_ID_LEN} printable characters")));
    }
    if c.sub == "admin" {
        return Err(AuthError("token `sub` `admin` is reserved".into()));
    }
    if c.team.as_deref().is_some_and(|t| !good_id(t)) {
        return Err(AuthError(format!("token `team` must be 1 to {MAX_ID_LEN} printable characters")));
    }
    if c.worlds.as_ref().is_some_and(|w| w.len() > MAX_TOKEN_WORLDS) {
        return Err(AuthError(format!("token `worlds` lists more than {MAX_TOKEN_WORLDS} worlds")));
    }
    let role = match c.role.as_deref() {
        None | Some("player") => Role::Player,
        Some("spectator") => Role::Spectator,
        Some(other) => return Err(AuthError(format!("token `role` must be `player` or `spectator`, not `{other}`"))),
    };
    Ok(Identity { player: c.sub, role, team: c.team, worlds: c.worlds, expires: Some(c.exp) })
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Mints an HS256 player token (`steerd token`, tests).
pub fn mint(secret: &str, claims: &Claims) -> Result<String, String> {
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(secret.as_bytes())).map_err(|e| e.to_string())
}

/// Parses a duration like `90s`, `15m`, `1h`, `2d` or plain seconds.
pub fn parse_ttl(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('s') => (&s[..s.len() - 1], 1),
        Some('m') => (&s[..s.len() - 1], 60),
        Some('h') => (&s[..s.len() - 1], 3600),
        Some('d') => (&s[..s.len() - 1], 86_400),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("ttl: expected e.g. 90s, 15m, 1h or 2d, got `{s}`"))?;
    n.checked_mul(mul).filter(|v| *v > 0).ok_or_else(|| format!("ttl: `{s}` must be positive and not overflow"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef-test";

    fn auth() -> Auth {
        Auth::new(Some("adm".into()), &AuthSettings { player_jwt_secret: Some(SECRET.into()), ..AuthSettings::default() }).unwrap()
    }

    fn claims(sub: &str, exp: u64) -> Claims {
        Claims { sub: sub.into(), role: None, worlds: Some(vec!["a".into()]), team: Some("red".into()), exp, nbf: None, iat: None }
    }

    #[test]
    fn verifies_good_tokens_and_names_the_reason_of_bad_ones() {
        let a = auth();
        let t = mint(SECRET, &claims("alice", now_secs() + 60)).unwrap();
        let id = a.authenticate(Some(&t)).unwrap();
        assert_eq!((id.player.as_str(), id.role, id.team.as_deref()), ("alice", Role::Player, Some("red")));
        assert!(id.check_world("a").is_ok());
        assert!(id.check_world("b").unwrap_err().contains("not valid for world `b`"));
        assert_eq!(a.authenticate(Some("adm")).unwrap().role, Role::Admin);
        let expired = mint(SECRET, &claims("alice", now_secs() - 120)).unwrap();
        assert_eq!(a.authenticate(Some(&expired)).unwrap_err().0, "token expired");
        let forged = mint("another-secret-0123456789", &claims("alice", now_secs() + 60)).unwrap();
        assert!(a.authenticate(Some(&forged)).unwrap_err().0.contains("signature"));
        assert!(a.authenticate(Some("garbage")).unwrap_err().0.contains("malformed"));
        assert!(a.authenticate(None).unwrap_err().0.contains("required"));
        let mut c = claims("bob", now_secs() + 60);
        c.role = Some("admin".into());
        assert!(a.authenticate(Some(&mint(SECRET, &c).unwrap())).unwrap_err().0.contains("role"));
        c.role = Some("spectator".into());
        assert_eq!(a.authenticate(Some(&mint(SECRET, &c).unwrap())).unwrap().role, Role::Spectator);
        assert!(a.authenticate(Some(&mint(SECRET, &claims("admin", now_secs() + 60)).unwrap())).is_err());
    }

    /// A throwaway Ed25519 key pair made for this test (`openssl genpkey -algorithm ed25519`).
    const ED_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPcUn8y1Q9uQMIRxWFONtHdQDgzI2T5d+NLlWmrkbadJ\n-----END PRIVATE KEY-----\n";
    const ED_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAnDbiQd2oKHUYPCU/TNDGfsoj1DVDxt+HZQWAcMUrYsc=\n-----END PUBLIC KEY-----\n";

    #[test]
    fn verifies_eddsa_tokens_with_a_public_key_file() {
        let path = std::env::temp_dir().join(format!("steerd-ed25519-{}.pub", random_hex(8)));
        std::fs::write(&path, ED_PUBLIC).unwrap();
        let a = Auth::new(None, &AuthSettings { player_jwt_public_key: Some(path.clone()), ..AuthSettings::default() });
        let _ = std::fs::remove_file(&path);
        let a = a.unwrap();
        assert!(!a.dev_mode());
        let key = EncodingKey::from_ed_pem(ED_PRIVATE.as_bytes()).unwrap();
        let t = jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &claims("carol", now_secs() + 60), &key).unwrap();
        let id = a.authenticate(Some(&t)).unwrap();
        assert_eq!((id.player.as_str(), id.role), ("carol", Role::Player));
        // An HS256 token (any secret) is refused by a server that holds a public key.
        let hs = mint(SECRET, &claims("carol", now_secs() + 60)).unwrap();
        assert!(a.authenticate(Some(&hs)).is_err());
        // Expired under EdDSA too.
        let old = jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &claims("carol", now_secs() - 120), &key).unwrap();
        assert_eq!(a.authenticate(Some(&old)).unwrap_err().0, "token expired");
        // A file that is no key is an error naming the setting.
        let bad = std::env::temp_dir().join(format!("steerd-notakey-{}.pem", random_hex(8)));
        std::fs::write(&bad, "not a key").unwrap();
        let e = Auth::new(None, &AuthSettings { player_jwt_public_key: Some(bad.clone()), ..AuthSettings::default() }).unwrap_err();
        let _ = std::fs::remove_file(&bad);
        assert!(e.contains("auth.player_jwt_public_key"), "{e}");
    }

    #[test]
    fn dev_mode_gives_fresh_anonymous_players() {
        let a = Auth::new(None, &AuthSettings::default()).unwrap();
        assert!(a.dev_mode());
        let (x, y) = (a.authenticate(None).unwrap(), a.authenticate(None).unwrap());
        assert_ne!(x.player, y.player);
        assert_eq!(x.role, Role::Player);
        assert!(a.authenticate(Some("anything")).is_err());
    }

    /// A token of arbitrary claims (HS256 with [`SECRET`]).
    fn raw(claims: &serde_json::Value) -> String {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &EncodingKey::from_secret(SECRET.as_bytes())).unwrap()
    }

    #[test]
    fn a_token_not_yet_valid_is_refused() {
        let (a, now) = (auth(), now_secs());
        let e = a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 600, "nbf": now + 60})))).unwrap_err();
        assert!(e.0.contains("not yet valid"), "{e}");
        // Within the leeway, and in the past: accepted.
        assert!(a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 600, "nbf": now + 3})))).is_ok());
        assert!(a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 600, "nbf": now - 60})))).is_ok());
    }

    #[test]
    fn a_token_issued_in_the_future_is_refused() {
        let (a, now) = (auth(), now_secs());
        let e = a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 600, "iat": now + 60})))).unwrap_err();
        assert!(e.0.contains("`iat`"), "{e}");
        // A few seconds of clock skew pass, as on `exp`.
        let id = a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 600, "iat": now + 3})))).unwrap();
        assert_eq!(id.expires, Some(now + 600));
        assert!(a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now - 3})))).is_ok(), "expired within the leeway");
        assert!(!id.expired_at(now + 600 + LEEWAY_SECS) && id.expired_at(now + 601 + LEEWAY_SECS));
    }

    #[test]
    fn issuer_and_audience_are_checked_when_configured() {
        let now = now_secs();
        let s = AuthSettings { player_jwt_secret: Some(SECRET.into()), jwt_issuer: Some("backend".into()), jwt_audience: Some("steerd-eu".into()), ..AuthSettings::default() };
        let a = Auth::new(None, &s).unwrap();
        let tok = |iss: serde_json::Value, aud: serde_json::Value| {
            let mut c = serde_json::json!({"sub": "alice", "exp": now + 600});
            for (k, v) in [("iss", iss), ("aud", aud)] {
                if !v.is_null() {
                    c[k] = v;
                }
            }
            a.authenticate(Some(&raw(&c)))
        };
        use serde_json::{Value::Null, json};
        assert!(tok(json!("backend"), json!("steerd-eu")).is_ok());
        assert!(tok(json!("backend"), json!(["other", "steerd-eu"])).is_ok(), "an array naming the audience");
        assert!(tok(json!("mallory"), json!("steerd-eu")).unwrap_err().0.contains("auth.jwt_issuer"));
        assert!(tok(json!("backend"), json!("steerd-us")).unwrap_err().0.contains("auth.jwt_audience"));
        assert!(tok(json!("backend"), json!(["a", "b"])).unwrap_err().0.contains("auth.jwt_audience"));
        assert!(tok(Null, json!("steerd-eu")).unwrap_err().0.contains("lacks the `iss` claim"));
        assert!(tok(json!("backend"), Null).unwrap_err().0.contains("lacks the `aud` claim"));
        // Not configured: neither is checked, and a token with an `aud` is accepted.
        let plain = auth();
        assert!(plain.authenticate(Some(&raw(&json!({"sub": "alice", "exp": now + 600, "aud": "anyone", "iss": "anybody"})))).is_ok());
        assert!(plain.authenticate(Some(&raw(&json!({"sub": "alice", "exp": now + 600, "aud": ["x", "y"]})))).is_ok());
    }

    #[test]
    fn a_token_living_longer_than_the_maximum_is_refused() {
        let now = now_secs();
        let a = Auth::new(None, &AuthSettings { player_jwt_secret: Some(SECRET.into()), max_token_lifetime_secs: 3600, ..AuthSettings::default() }).unwrap();
        let e = a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 7200})))).unwrap_err();
        assert!(e.0.contains("auth.max_token_lifetime_secs"), "{e}");
        // Measured from `iat` too: issued an hour ago for two hours.
        let e = a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "iat": now - 3600, "exp": now + 3601})))).unwrap_err();
        assert!(e.0.contains("auth.max_token_lifetime_secs"), "{e}");
        assert!(a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "iat": now - 1800, "exp": now + 1800})))).is_ok());
        assert!(a.authenticate(Some(&raw(&serde_json::json!({"sub": "alice", "exp": now + 3600})))).is_ok());
        // The default is a day.
        let e = auth().authenticate(Some(&mint(SECRET, &claims("alice", now + 2 * 86_400)).unwrap())).unwrap_err();
        assert!(e.0.contains("86400"), "{e}");
    }

    #[test]
    fn the_admin_token_compares_by_digest_whatever_the_length() {
        let a = auth();
        assert!(a.is_admin_token("adm"));
        for other in ["", "ad", "adm ", "admin", "bdm", &"a".repeat(10_000)] {
            assert!(!a.is_admin_token(other), "{other:?} taken for the admin token");
        }
        assert_eq!(a.authenticate(Some("adm")).unwrap(), Identity::admin());
        assert!(Identity::admin().expires.is_none() && !Identity::admin().is_anonymous());
        let dev = Auth::new(None, &AuthSettings::default()).unwrap();
        assert!(!dev.is_admin_token("") && !dev.is_admin_token("adm"), "no admin token: nothing is one");
        assert!(dev.anonymous().is_anonymous());
    }

    #[test]
    fn ttl_parses() {
        assert_eq!(parse_ttl("1h"), Ok(3600));
        assert_eq!(parse_ttl("90"), Ok(90));
        assert_eq!(parse_ttl("2d"), Ok(172_800));
        assert!(parse_ttl("0s").is_err() && parse_ttl("x").is_err() && parse_ttl("").is_err());
        assert_eq!(random_hex(16).len(), 32);
        assert_ne!(random_hex(16), random_hex(16));
    }
}
