//! The high-watermark checkpoint of a broker in a cluster, in Kafka's file and format:
//! `<log dir>/replication-offset-checkpoint`, text lines: the version (0), the entry count,
//! then one `topic partition offset` line per hosted partition. Written atomically (temp file,
//! fsync, rename) every `replica.high.watermark.checkpoint.interval.ms` and at shutdown; read
//! when a replica's log is opened, so a restarted broker does not take its log end (which may
//! hold records never committed) for its high watermark.
//! Invariants: a file that does not parse is ignored whole (high watermarks then start at the
//! log start, as with no file), never half-read.

use std::collections::HashMap;
use std::path::Path;

use crate::log::partition_log::write_atomically;

pub const FILE_NAME: &str = "replication-offset-checkpoint";
const VERSION: i64 = 0;

/// (topic, partition) -> high watermark, from `dir`'s checkpoint (empty when absent or bad).
pub fn read(dir: &Path) -> HashMap<(String, i32), i64> {
    let Ok(text) = std::fs::read_to_string(dir.join(FILE_NAME)) else { return HashMap::new() };
    parse(&text).unwrap_or_else(|| {
        tracing::warn!(dir = %dir.display(), "ignoring an unreadable {FILE_NAME}");
        HashMap::new()
    })
}

fn parse(text: &str) -> Option<HashMap<(String, i32), i64>> {
    let mut lines = text.lines();
    if lines.next()?.trim().parse::<i64>().ok()? != VERSION {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut out = HashMap::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let mut fields = lines.next()?.split_whitespace();
        let (topic, partition, offset) = (fields.next()?, fields.next()?.parse().ok()?, fields.next()?.parse().ok()?);
        out.insert((topic.to_string(), partition), offset);
    }
    Some(out)
}

/// Replaces `dir`'s checkpoint with `entries`.
pub fn write(dir: &Path, entries: &[(String, i32, i64)]) -> std::io::Result<()> {
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for (topic, partition, offset) in entries {
        text.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    write_atomically(&dir.join(FILE_NAME), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_files_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).is_empty());
        write(dir.path(), &[("a".into(), 0, 5), ("b-c".into(), 3, 0)]).unwrap();
        let read_back = read(dir.path());
        assert_eq!(read_back.len(), 2);
        assert_eq!(read_back[&("a".to_string(), 0)], 5);
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(), "0\n2\na 0 5\nb-c 3 0\n");
        std::fs::write(dir.path().join(FILE_NAME), "0\n3\na 0 5\n").unwrap();
        assert!(read(dir.path()).is_empty(), "a short file is ignored whole");
    }
}
