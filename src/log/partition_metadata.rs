//! `partition.metadata`: the topic id a partition directory belongs to (Kafka's
//! `PartitionMetadataFile`), so that a directory left behind by a deleted topic is never taken
//! for the directory of a new topic of the same name.
//!
//! On disk, in `<log.dir>/<topic>-<partition>/`, Kafka's text format:
//! `version: 0` then `topic_id: <the id in URL-safe base64 without padding>`, one per line,
//! written whole to a temporary file then renamed (never seen half written); made durable by the
//! partition's first flush (`PartitionLog::flush_work`), as Kafka flushes it before the first
//! append, so creating many partitions costs no fsync.
//! Invariants: once written, a directory's topic id never changes; a missing file means a
//! directory written before the file existed (an older Ketch), never "any topic".

use std::io;
use std::path::Path;

use base64::Engine;
use uuid::Uuid;

pub const FILE_NAME: &str = "partition.metadata";

/// The topic id recorded in the partition directory `dir` (None: no file). A file that does not
/// parse is an error, never a guess.
pub fn read(dir: &Path) -> io::Result<Option<Uuid>> {
    let text = match std::fs::read_to_string(dir.join(FILE_NAME)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name).map(str::trim));
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("{} in {}", FILE_NAME, dir.display()));
    if field("version:") != Some("0") {
        return Err(bad());
    }
    let id = field("topic_id:").ok_or_else(bad)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(id).map_err(|_| bad())?;
    Ok(Some(Uuid::from_bytes(bytes.try_into().map_err(|_| bad())?)))
}

/// Records `topic_id` in the partition directory `dir`.
pub fn write(dir: &Path, topic_id: Uuid) -> io::Result<()> {
    let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(topic_id.as_bytes());
    let path = dir.join(FILE_NAME);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("version: 0\ntopic_id: {id}\n"))?;
    std::fs::rename(&tmp, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_id_written_is_read_back_and_a_damaged_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        write(dir.path(), id).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(id));
        // Kafka's format, as its PartitionMetadataFile writes it.
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
            "version: 0\ntopic_id: ASNFZ4mrze8BI0VniavN7w\n"
        );
        std::fs::write(dir.path().join(FILE_NAME), "version: 0\ntopic_id: nope\n").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
