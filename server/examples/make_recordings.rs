//! Re-makes the regression recordings in `tests/recordings/` (issue 19): each drives a world
//! built from a shipped scenario through its command path and records it. Run on purpose,
//! after a change to the simulation that is meant to change behaviour:
//!
//! `cargo run --release -p steerd --example make_recordings`

use std::path::PathBuf;

use anyhow::Context;
use steerd::record::{format, generate};

fn main() -> anyhow::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("tests").join("recordings");
    std::fs::create_dir_all(&out)?;
    let work = std::env::temp_dir().join(format!("steerd-make-recordings-{}", std::process::id()));
    for reg in generate::regressions() {
        let dir = work.join(reg.name);
        let bytes = generate::make(&reg, &root.join("scenarios"), &dir, 1).with_context(|| reg.name.to_string())?;
        let parsed = format::parse(&bytes)?;
        let path = out.join(format!("{}.{}", reg.name, steerd::record::EXT));
        steerd::store::write_atomic(&path, &bytes).with_context(|| format!("writing {}", path.display()))?;
        println!("{}: {} bytes, {} records in {} chunks", path.display(), bytes.len(), parsed.records.len(), parsed.chunks);
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
