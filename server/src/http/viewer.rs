//! The live web viewer: `GET /` and `GET /viewer/{*file}`. The page's files are embedded in the
//! binary (no CDN, works offline); see `server/viewer/`. `sdk/*.js` is the TypeScript SDK
//! (`clients/typescript`) as tsc compiles it: the viewer's only wire decoder.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The embedded files: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    ("index.html", "text/html; charset=utf-8", include_str!("../../viewer/index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("../../viewer/app.js")),
    ("state.js", "text/javascript; charset=utf-8", include_str!("../../viewer/state.js")),
    ("rest.js", "text/javascript; charset=utf-8", include_str!("../../viewer/rest.js")),
    ("stream.js", "text/javascript; charset=utf-8", include_str!("../../viewer/stream.js")),
    ("world.js", "text/javascript; charset=utf-8", include_str!("../../viewer/world.js")),
    ("overlays.js", "text/javascript; charset=utf-8", include_str!("../../viewer/overlays.js")),
    ("stuck.js", "text/javascript; charset=utf-8", include_str!("../../viewer/stuck.js")),
    ("view.js", "text/javascript; charset=utf-8", include_str!("../../viewer/view.js")),
    ("input.js", "text/javascript; charset=utf-8", include_str!("../../viewer/input.js")),
    ("replay.js", "text/javascript; charset=utf-8", include_str!("../../viewer/replay.js")),
    ("status.js", "text/javascript; charset=utf-8", include_str!("../../viewer/status.js")),
    ("draw.js", "text/javascript; charset=utf-8", include_str!("../../viewer/draw.js")),
    ("sdk/index.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/index.js")),
    ("sdk/codec.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/codec.js")),
    ("sdk/cell.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/cell.js")),
    ("sdk/clock.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/clock.js")),
    ("sdk/view.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/view.js")),
    ("sdk/client.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/client.js")),
    ("sdk/types.js", "text/javascript; charset=utf-8", include_str!("../../viewer/sdk/types.js")),
    ("players.js", "text/javascript; charset=utf-8", include_str!("../../viewer/players.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("../../viewer/style.css")),
];

fn serve(name: &str) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, ctype, body)) => (
            [
                (header::CONTENT_TYPE, *ctype),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                // Everything the page needs comes from this server (scripts, styles, /ws, REST).
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
                ),
            ],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "no such viewer file").into_response(),
    }
}

/// `GET /`: the viewer page.
pub async fn index() -> Response {
    serve("index.html")
}

/// `GET /viewer/{*file}`: the page's scripts (also `sdk/…`) and styles.
pub async fn file(Path(name): Path<String>) -> Response {
    serve(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_served_with_its_type() {
        for (name, ctype, body) in FILES {
            let r = serve(name);
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()), Some(*ctype));
            assert!(!body.is_empty());
        }
        assert_eq!(serve("../Cargo.toml").status(), StatusCode::NOT_FOUND);
        assert_eq!(serve("nope.js").status(), StatusCode::NOT_FOUND);
        assert_eq!(serve("sdk/../app.js").status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn every_file_of_the_viewer_folder_is_embedded() -> std::io::Result<()> {
        // A module added to server/viewer/ but not to FILES would 404 in the page: list the
        // folder (and sdk/) and compare.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("viewer");
        let mut on_disk = Vec::new();
        for sub in ["", "sdk"] {
            for e in std::fs::read_dir(dir.join(sub))? {
                let name = e?.file_name().to_string_lossy().into_owned();
                if name.ends_with(".js") || name.ends_with(".html") || name.ends_with(".css") {
                    on_disk.push(if sub.is_empty() { name } else { format!("{sub}/{name}") });
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(n, _, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        Ok(())
    }

    /// The viewer's own modules (not the SDK): name and text.
    fn modules() -> impl Iterator<Item = (&'static str, &'static str)> {
        FILES.iter().filter(|(n, _, _)| n.ends_with(".js") && !n.starts_with("sdk/")).map(|(n, _, b)| (*n, *b))
    }

    #[test]
    fn each_module_owns_its_state() {
        // Invariant (ARCHITECTURE.md, `server/viewer/`): a module's state is private to it (its
        // `own` object); others read it through the functions it exports. No module exports a
        // binding others could reassign, or its `own`; state.js shares no state object but `V`.
        for (name, body) in modules() {
            for bad in ["export let ", "export var ", "export const own", "export { own"] {
                assert!(!body.contains(bad), "{name} exports mutable state: `{bad}`");
            }
            for (i, m) in body.match_indices("import {") {
                let names = &body[i + m.len()..];
                let names = &names[..names.find('}').unwrap_or(names.len())];
                assert!(!names.split(',').any(|n| n.split_whitespace().next() == Some("own")), "{name} imports another module's `own`");
            }
        }
        let state = modules().find(|(n, _)| *n == "state.js").map(|(_, b)| b).unwrap_or_default();
        let mut exported: Vec<&str> = state
            .match_indices("export const ")
            .map(|(i, m)| {
                let rest = &state[i + m.len()..];
                &rest[..rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(rest.len())]
            })
            .collect();
        exported.sort_unstable();
        assert_eq!(exported, ["$", "V", "canvas", "ctx", "groupColor"]);
    }

    #[test]
    fn each_figure_of_v_has_one_writer() {
        // `V` (state.js) holds the figures the browser test reads: each is assigned, counted or
        // pushed to by one module only.
        let mut writers: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> = Default::default();
        for (name, body) in modules() {
            for (i, _) in body.match_indices("V.") {
                let before = body[..i].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.') {
                    continue;
                }
                let after = &body[i + 2..];
                let (field, tail) = after.split_at(after.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(after.len()));
                let tail = tail.trim_start();
                let writes = ["++", "--", "+=", "-=", ".push("].iter().any(|w| tail.starts_with(w)) || (tail.starts_with('=') && !tail.starts_with("=="));
                if writes && !field.is_empty() {
                    writers.entry(field).or_default().insert(name);
                }
            }
        }
        assert!(writers.len() >= 10, "the scan finds V's figures: {writers:?}");
        for (field, files) in &writers {
            assert_eq!(files.len(), 1, "V.{field} is written by {files:?}");
        }
    }

    #[test]
    fn the_page_loads_only_local_files() {
        for (_, _, body) in FILES {
            assert!(!body.contains("http://") && !body.contains("https://"), "the viewer must not reference remote URLs");
        }
    }
}
