//! Hands out producer ids that are unique across restarts.
//!
//! On disk: `<first log dir>/.ketch/producer-id-block` holds one decimal number, the first id that has
//! not been reserved. Ids are reserved in blocks of `BLOCK_SIZE`: the new limit is written
//! (atomically, fsynced) before any id of the block is handed out, so a crash can skip ids but
//! never hand one out twice.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::log::partition_log::write_atomically;

const BLOCK_SIZE: i64 = 1000;

pub struct ProducerIds {
    path: PathBuf,
    inner: Mutex<(i64, i64)>, // (next id, end of reserved block)
}

impl ProducerIds {
    pub fn open(log_dir: &Path) -> anyhow::Result<ProducerIds> {
        let dir = log_dir.join(".ketch");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("producer-id-block");
        let next = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        Ok(ProducerIds { path, inner: Mutex::new((next, next)) })
    }

    /// The next unused producer id.
    pub fn next(&self) -> std::io::Result<i64> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.0 >= inner.1 {
            let end = inner.0 + BLOCK_SIZE;
            write_atomically(&self.path, format!("{end}\n").as_bytes())?;
            inner.1 = end;
        }
        let id = inner.0;
        inner.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_unique_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(dir.path()).unwrap();
        let a: Vec<i64> = (0..3).map(|_| ids.next().unwrap()).collect();
        assert_eq!(a, vec![0, 1, 2]);
        drop(ids);
        let ids = ProducerIds::open(dir.path()).unwrap();
        assert!(ids.next().unwrap() >= 1000);
    }
}
