//! The one authorization step of the server: (caller, world policy, action) → allow or deny.
//!
//! Every REST route and every WebSocket message kind is decided here before a handler or a
//! world thread sees it: [`rule_of_route`] maps a route (method and path pattern, as the
//! OpenAPI document names it) to a [`Rule`], [`rule_of_msg`] maps a client message kind to
//! one, and [`decide`] judges a caller against the rule. A route or method with no rule is
//! judged as an admin call (deny by default); a unit test checks that every route of the OpenAPI document has one,
//! and the match over message kinds has no wildcard arm, so the compiler names a new kind.
//!
//! What a granted caller may then *see* of a world is its [`Sight`]: everything, or (a player
//! in a world that is not `open`) its own and its team's vision, which the world thread
//! applies to every read and to every agent a command names (`runtime::world::views`).
//!
//! Pure: no I/O, no clock; the caller's identity comes from `auth`.
//!
//! **Invariant:** no token never outranks a token: in `secured` mode a call without a token
//! is refused everything but the public routes, and in `dev` mode (no secret configured) no
//! token is valid at all.

use steer_proto::{ClientMsgKind, ErrorCode, Role};

use crate::auth::Identity;
use crate::config::Visibility;

/// How the server authenticates, from its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No secret configured: REST is open to anyone, WebSocket clients are anonymous players.
    /// Announced at start (WARN) and in `/health`; binds loopback addresses only unless told.
    Dev,
    /// An admin token or a player key is configured: every call but the public ones needs a
    /// token with the rights for it.
    Secured {
        /// An admin token is configured (without one, admin calls answer 401).
        admin: bool,
        /// A player key is configured (without one, WebSocket clients without a token are
        /// anonymous players, as in dev mode, and REST has no player tokens).
        players: bool,
    },
}

impl Mode {
    /// The mode of a server with (or without) an admin token and a player key.
    pub fn new(admin_token: bool, player_key: bool) -> Self {
        if admin_token || player_key { Mode::Secured { admin: admin_token, players: player_key } } else { Mode::Dev }
    }

    /// The name `/health` reports: `dev`, `jwt` (a player key) or `admin_token` (only an admin
    /// token).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Dev => "dev",
            Mode::Secured { players: true, .. } => "jwt",
            Mode::Secured { players: false, .. } => "admin_token",
        }
    }
}

/// What an action needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Anyone, token or not: health, metrics, this document, the viewer's files, the
    /// WebSocket upgrade (whose Hello is authenticated as a message).
    Public,
    /// Any authenticated caller (in dev mode, anyone): world summaries, obstacles, walls,
    /// scenarios, a replay's timeline. Counts of agents are narrowed to the caller's sight.
    Read,
    /// Any authenticated caller; the agents answered are narrowed to the caller's sight
    /// (agents, one agent, the snapshot, an agent's flow field).
    AgentRead,
    /// Whole-world state that cannot be narrowed to a sight (the recording, an agent's
    /// avoidance with its neighbours): the admin and spectators, and players in `open` worlds.
    WholeWorldRead,
    /// A command on agents (spawn, despawn, behaviours, MoveTo): the admin, and players on
    /// their own agents (the world thread checks ownership and sight). Not spectators.
    Command,
    /// The session's own messages (Hello, ping, subscribe, unsubscribe): any caller that
    /// passed Hello.
    Session,
    /// Everything else: the admin only.
    Admin,
    /// Server to server (a handoff's transfer): the cluster secret, which the gate checks
    /// (`http/guard.rs`); no token of any role is enough.
    Cluster,
}

/// What a granted caller sees of a world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sight {
    /// Everything (the admin, spectators, dev-mode REST, players in `open` worlds).
    All,
    /// A player in a world that is not `open`: its own agents and what its (team's) vision
    /// covers. `key` is its vision key (`auth::vision_key`).
    Vision {
        /// Player id.
        player: String,
        /// Vision key (team or player).
        key: String,
    },
}

/// A granted call: who acts, and what it sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The identity acting (the admin for dev-mode REST calls without a token); `None` only
    /// for public calls without a valid token.
    pub identity: Option<Identity>,
    /// What it sees of the world named by the call (`All` for calls naming none).
    pub sight: Sight,
}

/// A refused call: HTTP status, wire code and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Denial {
    /// 401 (no or bad token) or 403 (a valid token without the right).
    pub status: u16,
    /// `unauthorized` or `forbidden`.
    pub code: ErrorCode,
    /// Why.
    pub message: String,
}

impl Denial {
    fn unauthorized(message: impl Into<String>) -> Self {
        Denial { status: 401, code: ErrorCode::Unauthorized, message: message.into() }
    }
    fn forbidden(message: impl Into<String>) -> Self {
        Denial { status: 403, code: ErrorCode::Forbidden, message: message.into() }
    }
}

/// Who calls, as the front end authenticated it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No token.
    Nobody,
    /// A token that is not valid (the reason).
    Invalid(String),
    /// A valid token (or a WebSocket session's identity, anonymous dev players included).
    Known(Identity),
}

/// The world a call names: its name and visibility policy.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// World name.
    pub name: &'a str,
    /// Its visibility policy.
    pub visibility: Visibility,
}

/// Judges `caller` against `rule` in `mode`, for a call naming `world` (if any).
pub fn decide(mode: Mode, caller: &Caller, rule: Rule, world: Option<Target<'_>>) -> Result<Grant, Denial> {
    if rule == Rule::Public {
        // Public calls act on nothing: the identity is only who called, if anyone.
        let identity = match caller {
            Caller::Known(id) => Some(id.clone()),
            _ => None,
        };
        return Ok(Grant { identity, sight: Sight::All });
    }
    let identity = match (caller, mode) {
        (Caller::Known(id), _) => id.clone(),
        (Caller::Invalid(why), _) => return Err(Denial::unauthorized(why.clone())),
        // Dev mode: REST is open, as the admin.
        (Caller::Nobody, Mode::Dev) => Identity::admin(),
        (Caller::Nobody, Mode::Secured { .. }) => return Err(Denial::unauthorized("this call needs `Authorization: Bearer <token>` (an admin, player or spectator token)")),
    };
    // A token limited to some worlds is no token elsewhere (whatever its role would allow, so a
    // refusal tells nothing of a world it is not for).
    if let Some(w) = world {
        identity.check_world(w.name).map_err(Denial::unauthorized)?;
    }
    let open = world.is_none_or(|w| w.visibility == Visibility::Open);
    let sight = world.map_or(Sight::All, |w| sight_of(&identity, w.visibility));
    let allowed = match (rule, identity.role) {
        (Rule::Cluster, _) => false,
        (Rule::Public, _) | (_, Role::Admin) => true,
        (Rule::Read | Rule::AgentRead | Rule::Session, _) => true,
        (Rule::WholeWorldRead, Role::Spectator) => true,
        (Rule::WholeWorldRead, Role::Player) => open,
        (Rule::Command, Role::Player) => true,
        (Rule::Command, Role::Spectator) => false,
        (Rule::Admin, Role::Player | Role::Spectator) => false,
    };
    if allowed {
        return Ok(Grant { identity: Some(identity), sight });
    }
    Err(match rule {
        Rule::Admin if matches!(mode, Mode::Secured { admin: false, .. }) => {
            Denial::unauthorized("admin calls are disabled on this server: it has no admin token (set `admin_token`)")
        }
        Rule::Admin => Denial::forbidden(format!("this call is for the admin; `{}` is a {}", identity.player, identity.role)),
        Rule::Command => Denial::forbidden("spectators command nothing"),
        Rule::Cluster => Denial::forbidden("a server-to-server call: it needs the cluster secret, not a token"),
        _ => Denial::forbidden(format!("in world `{}` (visibility not `open`) this read is for the admin and spectators", world.map_or("", |w| w.name))),
    })
}

/// What `identity` sees of a world of `visibility`: a player in a world that is not `open`
/// sees through its (team's) vision, everyone else everything.
pub fn sight_of(identity: &Identity, visibility: Visibility) -> Sight {
    match identity.role {
        Role::Player if visibility != Visibility::Open => Sight::Vision { player: identity.player.clone(), key: identity.vision_key() },
        _ => Sight::All,
    }
}

/// The rule of a client message kind. No wildcard arm: a new kind does not compile until it
/// has a rule here.
pub fn rule_of_msg(kind: ClientMsgKind) -> Rule {
    match kind {
        ClientMsgKind::Hello | ClientMsgKind::Ping | ClientMsgKind::Subscribe | ClientMsgKind::Unsubscribe => Rule::Session,
        ClientMsgKind::MoveTo
        | ClientMsgKind::SetBehaviors
        | ClientMsgKind::AddBehavior
        | ClientMsgKind::RemoveBehavior
        | ClientMsgKind::ResetBehaviors
        | ClientMsgKind::Spawn
        | ClientMsgKind::Despawn => Rule::Command,
    }
}

/// Every route the server serves: (method, path as in the OpenAPI document, rule).
pub const ROUTES: &[(&str, &str, Rule)] = &[
    ("GET", "/", Rule::Public),
    ("GET", "/viewer/{*file}", Rule::Public),
    ("GET", "/health", Rule::Public),
    ("GET", "/metrics", Rule::Public),
    ("GET", "/openapi.json", Rule::Public),
    ("GET", "/ws", Rule::Public),
    ("GET", "/worlds", Rule::Read),
    ("POST", "/worlds", Rule::Admin),
    ("GET", "/worlds/{world}", Rule::Read),
    ("PATCH", "/worlds/{world}", Rule::Admin),
    ("DELETE", "/worlds/{world}", Rule::Admin),
    ("POST", "/worlds/{world}/step", Rule::Admin),
    ("POST", "/worlds/{world}/reset", Rule::Admin),
    ("GET", "/worlds/{world}/snapshot", Rule::AgentRead),
    ("GET", "/worlds/{world}/agents", Rule::AgentRead),
    ("POST", "/worlds/{world}/agents", Rule::Command),
    ("GET", "/worlds/{world}/agents/{id}", Rule::AgentRead),
    ("DELETE", "/worlds/{world}/agents/{id}", Rule::Command),
    ("PUT", "/worlds/{world}/agents/{id}/behaviors", Rule::Command),
    ("PUT", "/worlds/{world}/agents/{id}/owner", Rule::Admin),
    ("GET", "/worlds/{world}/agents/{id}/avoidance", Rule::WholeWorldRead),
    ("GET", "/worlds/{world}/players", Rule::Admin),
    ("DELETE", "/worlds/{world}/players/{player}", Rule::Admin),
    ("POST", "/worlds/{world}/move-to", Rule::Command),
    ("GET", "/worlds/{world}/flowfield", Rule::AgentRead),
    ("GET", "/worlds/{world}/obstacles", Rule::Read),
    ("POST", "/worlds/{world}/obstacles", Rule::Admin),
    ("POST", "/worlds/{world}/obstacles/random", Rule::Admin),
    ("DELETE", "/worlds/{world}/obstacles/{id}", Rule::Admin),
    ("PATCH", "/worlds/{world}/obstacles/{id}", Rule::Admin),
    ("GET", "/worlds/{world}/walls", Rule::Read),
    ("POST", "/worlds/{world}/walls", Rule::Admin),
    ("DELETE", "/worlds/{world}/walls/{id}", Rule::Admin),
    ("POST", "/worlds/{world}/load", Rule::Admin),
    ("POST", "/worlds/{world}/save", Rule::Admin),
    ("GET", "/worlds/{world}/recording", Rule::WholeWorldRead),
    ("GET", "/worlds/{world}/replay", Rule::Read),
    ("POST", "/worlds/{world}/replay/seek", Rule::Admin),
    ("POST", "/worlds/{world}/replay/play", Rule::Admin),
    ("POST", "/worlds/{world}/replay/pause", Rule::Admin),
    ("POST", "/worlds/{world}/replay/speed", Rule::Admin),
    ("GET", "/recordings", Rule::Admin),
    ("DELETE", "/recordings/{name}", Rule::Admin),
    ("POST", "/worlds/{world}/handoff", Rule::Admin),
    ("POST", "/cluster/worlds/{world}", Rule::Cluster),
    ("POST", "/debug/panic", Rule::Admin),
    ("POST", "/debug/stall", Rule::Admin),
    ("POST", "/debug/stall/release", Rule::Admin),
    ("GET", "/scenarios", Rule::Read),
    ("GET", "/scenarios/{name}", Rule::Read),
    ("PUT", "/scenarios/{name}", Rule::Admin),
    ("DELETE", "/scenarios/{name}", Rule::Admin),
];

/// The rule of a route (`HEAD` is judged as `GET`); `None`: the route has no rule (the gate
/// judges it as [`Rule::Admin`]).
pub fn rule_of_route(method: &str, path: &str) -> Option<Rule> {
    let method = if method == "HEAD" { "GET" } else { method };
    ROUTES.iter().find(|(m, p, _)| *m == method && *p == path).map(|(_, _, r)| *r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn player(name: &str) -> Caller {
        Caller::Known(Identity { player: name.into(), role: Role::Player, team: None, worlds: None, expires: None })
    }
    fn spectator() -> Caller {
        Caller::Known(Identity { player: "eve".into(), role: Role::Spectator, team: None, worlds: None, expires: None })
    }
    const OWNED: Option<Target<'static>> = Some(Target { name: "w", visibility: Visibility::Owned });
    const OPEN: Option<Target<'static>> = Some(Target { name: "w", visibility: Visibility::Open });
    const JWT_ONLY: Mode = Mode::Secured { admin: false, players: true };
    const BOTH: Mode = Mode::Secured { admin: true, players: true };

    #[test]
    fn no_token_never_outranks_a_token() {
        // Secured: without a token only public routes pass, whatever the rule.
        for rule in [Rule::Read, Rule::AgentRead, Rule::WholeWorldRead, Rule::Command, Rule::Session, Rule::Admin] {
            for mode in [JWT_ONLY, BOTH, Mode::Secured { admin: true, players: false }] {
                let d = decide(mode, &Caller::Nobody, rule, OPEN).unwrap_err();
                assert_eq!((d.status, d.code), (401, ErrorCode::Unauthorized), "{rule:?} {mode:?}");
            }
        }
        assert!(decide(JWT_ONLY, &Caller::Nobody, Rule::Public, None).is_ok());
        // A player's token may command; none may not; a bad one is 401.
        assert!(decide(JWT_ONLY, &player("bob"), Rule::Command, OWNED).is_ok());
        assert_eq!(decide(JWT_ONLY, &Caller::Invalid("token expired".into()), Rule::Read, OPEN).unwrap_err().message, "token expired");
    }

    #[test]
    fn admin_calls_without_an_admin_token_are_disabled_not_open() {
        let d = decide(JWT_ONLY, &player("bob"), Rule::Admin, OPEN).unwrap_err();
        assert_eq!(d.status, 401);
        assert!(d.message.contains("no admin token"), "{}", d.message);
        let d = decide(BOTH, &player("bob"), Rule::Admin, OPEN).unwrap_err();
        assert_eq!((d.status, d.code), (403, ErrorCode::Forbidden));
        assert!(decide(BOTH, &Caller::Known(Identity::admin()), Rule::Admin, OPEN).is_ok());
    }

    #[test]
    fn dev_mode_rest_is_the_admin_and_has_no_tokens() {
        let g = decide(Mode::Dev, &Caller::Nobody, Rule::Admin, OWNED).unwrap();
        assert_eq!((g.identity.map(|i| i.role), g.sight), (Some(Role::Admin), Sight::All));
    }

    #[test]
    fn sight_narrows_players_in_worlds_that_are_not_open() {
        let g = decide(BOTH, &player("bob"), Rule::AgentRead, OWNED).unwrap();
        assert_eq!(g.sight, Sight::Vision { player: "bob".into(), key: "p:bob".into() });
        assert_eq!(decide(BOTH, &player("bob"), Rule::AgentRead, OPEN).unwrap().sight, Sight::All);
        assert_eq!(decide(BOTH, &spectator(), Rule::AgentRead, OWNED).unwrap().sight, Sight::All);
        for v in [Visibility::Owned, Visibility::SpectatorsOnlyWholeWorld] {
            let d = decide(BOTH, &player("bob"), Rule::WholeWorldRead, Some(Target { name: "w", visibility: v })).unwrap_err();
            assert_eq!(d.status, 403);
        }
        assert!(decide(BOTH, &spectator(), Rule::WholeWorldRead, OWNED).is_ok());
        assert!(decide(BOTH, &player("bob"), Rule::WholeWorldRead, OPEN).is_ok());
        assert_eq!(decide(BOTH, &spectator(), Rule::Command, OPEN).unwrap_err().status, 403);
    }

    #[test]
    fn tokens_limited_to_worlds_are_refused_elsewhere() {
        let c = Caller::Known(Identity { player: "bob".into(), role: Role::Player, team: None, worlds: Some(vec!["a".into()]), expires: None });
        assert!(decide(BOTH, &c, Rule::Read, Some(Target { name: "a", visibility: Visibility::Open })).is_ok());
        assert_eq!(decide(BOTH, &c, Rule::Read, Some(Target { name: "b", visibility: Visibility::Open })).unwrap_err().status, 401);
    }

    #[test]
    fn every_message_kind_has_a_rule() {
        for k in ClientMsgKind::ALL {
            let r = rule_of_msg(*k);
            assert_ne!(r, Rule::Public, "{k:?}: a message is never public: Hello authenticates");
        }
    }

    /// Every route of the served OpenAPI document has a rule, and the table names no route the
    /// document lacks (but the viewer's files, which are not API).
    #[test]
    fn every_documented_route_has_a_rule() {
        let doc = crate::http::openapi::document();
        let mut documented = Vec::new();
        for (path, item) in doc.paths.paths.iter() {
            let ops = [
                ("GET", item.get.is_some()),
                ("POST", item.post.is_some()),
                ("PUT", item.put.is_some()),
                ("PATCH", item.patch.is_some()),
                ("DELETE", item.delete.is_some()),
            ];
            for (m, present) in ops {
                if present {
                    assert!(rule_of_route(m, path).is_some(), "{m} {path} has no authorization rule");
                    documented.push((m, path.clone()));
                }
            }
        }
        for (m, p, _) in ROUTES {
            if *p == "/" || p.starts_with("/viewer/") {
                continue;
            }
            assert!(documented.iter().any(|(dm, dp)| dm == m && dp == p), "{m} {p} has a rule but is not in the OpenAPI document");
        }
        assert_eq!(rule_of_route("HEAD", "/health"), Some(Rule::Public));
        assert_eq!(rule_of_route("GET", "/nowhere"), None);
    }
}
