//! Persistence of topic metadata.
//!
//! On-disk format: one file per topic, `<log.dir>/.ketch/topics/<name>.properties`, in Java
//! properties syntax: `topic.id` (UUID), `partitions`, `directories` (for each partition in
//! order, the `directory.id` of the log directory holding it, comma-separated: Kafka's
//! `PartitionRecord.directories`; absent in files written before JBOD, an empty entry when
//! unknown), and `config.<key>` for each override.
//! Files are replaced atomically (temp file, fsync, rename, fsync directory). They live in the
//! metadata directory (the first entry of `log.dirs`) only.

use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::config::{parse_properties, Properties};
use crate::log::partition_log::write_atomically;

pub struct StoredTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// `directory.id` per partition; empty when not known (files written before JBOD).
    pub directories: Vec<String>,
    pub overrides: Properties,
}

impl StoredTopic {
    /// The directory partition `p` was last recorded in, if known.
    pub fn directory(&self, p: i32) -> Option<&str> {
        self.directories.get(p as usize).map(String::as_str).filter(|d| !d.is_empty())
    }
}

fn topics_dir(log_dir: &Path) -> PathBuf {
    log_dir.join(".ketch").join("topics")
}

pub fn save(log_dir: &Path, topic: &StoredTopic) -> anyhow::Result<()> {
    let dir = topics_dir(log_dir);
    std::fs::create_dir_all(&dir)?;
    let mut text = format!(
        "topic.id={}\npartitions={}\ndirectories={}\n",
        topic.id,
        topic.partitions,
        topic.directories.join(",")
    );
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
        let directories =
            props.get("directories").map_or_else(Vec::new, |d| d.split(',').map(str::to_string).collect());
        out.push(StoredTopic {
            name: name.to_string(),
            id: id.parse()?,
            partitions: partitions.parse()?,
            directories,
            overrides,
        });
    }
    Ok(out)
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
