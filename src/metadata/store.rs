//! Persistence of topic metadata.
//!
//! On-disk format: one file per topic, `<log.dir>/.ketch/topics/<name>.properties`, in Java
//! properties syntax: `topic.id` (UUID), `partitions`, and `config.<key>` for each override.
//! Files are replaced atomically (temp file, fsync, rename, fsync directory).

use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::config::{parse_properties, Properties};
use crate::log::partition_log::write_atomically;

pub struct StoredTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub overrides: Properties,
}

fn topics_dir(log_dir: &Path) -> PathBuf {
    log_dir.join(".ketch").join("topics")
}

pub fn save(log_dir: &Path, topic: &StoredTopic) -> anyhow::Result<()> {
    let dir = topics_dir(log_dir);
    std::fs::create_dir_all(&dir)?;
    let mut text = format!("topic.id={}\npartitions={}\n", topic.id, topic.partitions);
    for (key, value) in &topic.overrides {
        text.push_str(&format!("config.{key}={value}\n"));
    }
    write_atomically(&dir.join(format!("{}.properties", topic.name)), text.as_bytes())?;
    Ok(())
}

pub fn remove(log_dir: &Path, name: &str) -> anyhow::Result<()> {
    let dir = topics_dir(log_dir);
    std::fs::remove_file(dir.join(format!("{name}.properties")))?;
    std::fs::File::open(&dir)?.sync_all()?;
    Ok(())
}

pub fn load_all(log_dir: &Path) -> anyhow::Result<Vec<StoredTopic>> {
    let dir = topics_dir(log_dir);
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".properties")) else {
            continue;
        };
        let props = parse_properties(&std::fs::read_to_string(&path)?)?;
        let id = props.get("topic.id").ok_or_else(|| anyhow::anyhow!("{} lacks topic.id", path.display()))?;
        let partitions =
            props.get("partitions").ok_or_else(|| anyhow::anyhow!("{} lacks partitions", path.display()))?;
        let overrides =
            props.iter().filter_map(|(k, v)| k.strip_prefix("config.").map(|k| (k.to_string(), v.clone()))).collect();
        out.push(StoredTopic { name: name.to_string(), id: id.parse()?, partitions: partitions.parse()?, overrides });
    }
    Ok(out)
}

/// Removes partition directories that belong to no topic (left by an interrupted deletion).
pub fn remove_orphan_dirs(log_dir: &Path, known: impl Fn(&str, i32) -> bool) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(log_dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        let Some((topic, partition)) = name.rsplit_once('-') else { continue };
        let Ok(partition) = partition.parse::<i32>() else { continue };
        if !known(topic, partition) {
            tracing::warn!(dir = %entry.path().display(), "removing partition directory of a deleted topic");
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// Random bytes from the OS (topic ids, cluster id).
pub fn random_bytes() -> [u8; 16] {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(&mut bytes).is_ok() {
            return bytes;
        }
    }
    // Fallback: hash the clock and pid through std's randomly seeded hasher.
    use std::hash::{BuildHasher, Hasher};
    for chunk in bytes.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i64(crate::log::now_ms());
        h.write_u32(std::process::id());
        chunk.copy_from_slice(&h.finish().to_be_bytes()[..chunk.len()]);
    }
    bytes
}
