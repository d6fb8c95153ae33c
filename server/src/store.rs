//! Scenario storage: JSON files in the data directory, written crash-safely (temp file, fsync,
//! rename, fsync of the directory), plus the shipped scenarios, read-only.
//!
//! **Invariant:** a stored scenario file is always either the old or the new version, whole;
//! stray temp files from a crash are swept at start.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::scenario::valid_name;
use crate::scenario::{MAX_SCENARIO_BYTES, Scenario, ScenarioError};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Bad scenario name.
    #[error("invalid scenario name: use 1 to 64 of A-Z a-z 0-9 _ -")]
    BadName,
    /// Not found.
    #[error("no scenario `{0}`")]
    NotFound(String),
    /// A shipped scenario cannot be changed.
    #[error("scenario `{0}` is shipped with steerd and read-only")]
    ReadOnly(String),
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// Disk trouble.
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
    /// Too large.
    #[error("scenario is larger than {MAX_SCENARIO_BYTES} bytes")]
    TooLarge,
}

/// Where a scenario comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Saved in the data dir.
    Saved,
    /// Shipped, read-only.
    Shipped,
}

/// The scenario store.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    shipped: PathBuf,
}

const TMP_SUFFIX: &str = ".tmp";

impl Store {
    /// Opens (creates) the store and sweeps temp files left by a crash.
    pub fn open(data_dir: &Path, shipped: &Path) -> Result<Self, StoreError> {
        let dir = data_dir.join("scenarios");
        fs::create_dir_all(&dir)?;
        for e in fs::read_dir(&dir)?.flatten() {
            let p = e.path();
            if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(TMP_SUFFIX)) {
                tracing::warn!(path = %p.display(), "removing stray temp file");
                let _ = fs::remove_file(&p);
            }
        }
        Ok(Store { dir, shipped: shipped.to_path_buf() })
    }

    fn path(&self, name: &str) -> Result<PathBuf, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName);
        }
        Ok(self.dir.join(format!("{name}.json")))
    }

    fn shipped_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::BadName);
        }
        Ok(self.shipped.join(format!("{name}.json")))
    }

    /// Every scenario name with its origin (saved ones shadow shipped ones of the same name).
    pub fn list(&self) -> Vec<(String, Origin)> {
        let mut out: std::collections::BTreeMap<String, Origin> = Default::default();
        for (dir, origin) in [(&self.shipped, Origin::Shipped), (&self.dir, Origin::Saved)] {
            if let Ok(rd) = fs::read_dir(dir) {
                for e in rd.flatten() {
                    let p = e.path();
                    if let Some(stem) = p.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".json")) {
                        if valid_name(stem) {
                            out.insert(stem.to_string(), origin);
                        }
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    /// Reads a scenario (saved first, then shipped).
    pub fn get(&self, name: &str) -> Result<(Scenario, Origin), StoreError> {
        for (p, origin) in [(self.path(name)?, Origin::Saved), (self.shipped_path(name)?, Origin::Shipped)] {
            match fs::metadata(&p) {
                Ok(m) if m.len() > MAX_SCENARIO_BYTES as u64 => return Err(StoreError::TooLarge),
                Ok(_) => {
                    let text = fs::read_to_string(&p)?;
                    return Ok((Scenario::from_json(&text)?, origin));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::NotFound(name.to_string()))
    }

    /// Writes a scenario crash-safely.
    pub fn put(&self, name: &str, scenario: &Scenario) -> Result<(), StoreError> {
        let path = self.path(name)?;
        if self.shipped_path(name)?.exists() {
            return Err(StoreError::ReadOnly(name.to_string()));
        }
        let text = serde_json::to_vec_pretty(scenario).map_err(|e| StoreError::Io(std::io::Error::other(e)))?;
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(StoreError::TooLarge);
        }
        write_atomic(&path, &text)?;
        Ok(())
    }

    /// Deletes a saved scenario.
    pub fn delete(&self, name: &str) -> Result<(), StoreError> {
        let path = self.path(name)?;
        if !path.exists() && self.shipped_path(name)?.exists() {
            return Err(StoreError::ReadOnly(name.to_string()));
        }
        match fs::remove_file(&path) {
            Ok(()) => {
                sync_dir(&self.dir)?;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::NotFound(name.to_string())),
            Err(e) => Err(e.into()),
        }
    }
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one, whole:
/// a unique temp file in the same directory, fsync, rename over, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = dir_of(path);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.{}.{}{TMP_SUFFIX}", std::process::id(), unique()));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The directory holding `path`: its parent, or `.` for a bare file name (whose `parent()` is
/// the empty path, which cannot be opened to sync).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("steerd-store-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_bare_file_name_is_written_in_the_working_directory() {
        assert_eq!(dir_of(Path::new("state.json")), Path::new("."));
        assert_eq!(dir_of(Path::new("out/state.json")), Path::new("out"));
        assert_eq!(dir_of(Path::new("/state.json")), Path::new("/"));
        // What the empty parent made fail: syncing "" after the rename. `.` opens and syncs.
        sync_dir(dir_of(Path::new("state.json"))).unwrap();
        assert!(sync_dir(Path::new("")).is_err(), "the empty path cannot be opened");
    }

    #[test]
    fn put_get_list_delete_and_traversal() {
        let d = tmpdir("basic");
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let s = Store::open(&d, &shipped).unwrap();
        let (flock, origin) = s.get("flock").unwrap();
        assert_eq!(origin, Origin::Shipped);
        assert!(matches!(s.put("flock", &flock), Err(StoreError::ReadOnly(_))));
        s.put("mine", &flock).unwrap();
        assert_eq!(s.get("mine").unwrap(), (flock, Origin::Saved));
        assert!(s.list().contains(&("mine".into(), Origin::Saved)));
        for bad in ["../x", "/etc/passwd", "a\0b", "..", "x.json"] {
            assert!(matches!(s.get(bad), Err(StoreError::BadName)), "{bad}");
        }
        s.delete("mine").unwrap();
        assert!(matches!(s.get("mine"), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn stray_temp_files_are_swept_at_open() {
        let d = tmpdir("sweep");
        fs::create_dir_all(d.join("scenarios")).unwrap();
        let stray = d.join("scenarios/.x.json.1.2.tmp");
        fs::write(&stray, b"half").unwrap();
        Store::open(&d, &d).unwrap();
        assert!(!stray.exists());
    }
}
