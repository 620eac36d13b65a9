//! The file both security stores keep their state in (`acl_store.rs`, `scram_store.rs`): Kafka
//! metadata records framed as in Kafka's metadata log (`records::ApiMessageAndVersion`), each
//! preceded by its length (u32, big-endian). Written whole, replacing the file atomically.

use std::path::Path;

use crate::log::partition_log::write_atomically;
use crate::metadata::records::MetadataRecord;

/// Replaces the file at `path` (its directory made first if needed) with `records`.
pub fn write(path: &Path, records: impl IntoIterator<Item = MetadataRecord>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut out = Vec::new();
    for record in records {
        let framed = record.encode_framed(0).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        out.extend_from_slice(&(framed.len() as u32).to_be_bytes());
        out.extend_from_slice(&framed);
    }
    write_atomically(path, &out)
}

/// Calls `f` with each record of a file's `bytes`, in order, up to the first error (the file's
/// or `f`'s).
pub fn read(mut bytes: &[u8], mut f: impl FnMut(MetadataRecord) -> Result<(), String>) -> Result<(), String> {
    while !bytes.is_empty() {
        if bytes.len() < 4 {
            return Err("truncated length".into());
        }
        let len = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        let Some(framed) = bytes.get(4..4 + len) else { return Err("truncated record".into()) };
        f(MetadataRecord::decode_framed(framed).map_err(|e| format!("{e:?}"))?.record)?;
        bytes = &bytes[4 + len..];
    }
    Ok(())
}
