//! The delegation tokens in force (`tokens.rs` decides them), and the SCRAM credentials token
//! logins are checked with (Kafka's `DelegationTokenCache`).
//!
//! On disk (a single node): `<first log dir>/.ketch/tokens.records`: one Kafka
//! DelegationTokenRecord per token, in the file format of `records_file.rs`, as `scram_store.rs`
//! keeps credentials; replaced atomically on every change, read at start. In a cluster the
//! tokens are cluster metadata: a broker (or the controller's own SASL listeners) reads them from
//! its metadata image (`read_from_image`) and changes go through the controller.
//!
//! Invariants: no HMAC and no password is stored (the HMAC is computed from the token id and
//! `delegation.token.secret.key`); a change is acknowledged only once durable; a token login's
//! credential is derived once per (token, mechanism) and only for a token that exists, so an
//! unauthenticated client cannot make the broker hash for ids it invents.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::records_file;
use super::scram::{Credential, Mechanism, MIN_ITERATIONS};
use super::tokens::{self, TokenSettings, Tokens};
use crate::metadata::image::MetadataImage;
use crate::metadata::records::{DelegationTokenRecord, MetadataRecord};

/// A current metadata image (None before there is one: no tokens then).
pub type ImageSource = Box<dyn Fn() -> Option<Arc<MetadataImage>> + Send + Sync>;

/// What a token login authenticates as: the token owner's name (the principal is `User:` it,
/// token authenticated) until the token's expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenLogin {
    pub credential: Credential,
    pub owner_name: String,
    pub expiry_ms: i64,
}

pub struct TokenStore {
    pub settings: TokenSettings,
    path: PathBuf,
    tokens: RwLock<Tokens>,
    image: OnceLock<ImageSource>,
    /// (token id, mechanism) -> the credential derived from the token's HMAC.
    credentials: Mutex<HashMap<(String, Mechanism), Credential>>,
}

impl TokenStore {
    pub fn open(settings: TokenSettings, metadata_dir: &Path) -> anyhow::Result<TokenStore> {
        let path = metadata_dir.join(".ketch").join("tokens.records");
        let mut tokens = Tokens::new();
        match std::fs::read(&path) {
            Ok(bytes) => records_file::read(&bytes, |record| {
                tokens::apply(&mut tokens, &[record]);
                Ok(())
            })
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(TokenStore::with(settings, path, tokens))
    }

    /// A store of the tokens in the images `source` gives, and no file.
    pub fn of_image(settings: TokenSettings, source: ImageSource) -> TokenStore {
        let store = TokenStore::with(settings, PathBuf::new(), Tokens::new());
        store.read_from_image(source);
        store
    }

    fn with(settings: TokenSettings, path: PathBuf, tokens: Tokens) -> TokenStore {
        TokenStore {
            settings,
            path,
            tokens: RwLock::new(tokens),
            image: OnceLock::new(),
            credentials: Mutex::new(HashMap::new()),
        }
    }

    /// From now on tokens are read from the metadata image `source` gives (a broker of a
    /// cluster). Set once; later calls are ignored.
    pub fn read_from_image(&self, source: ImageSource) {
        let _ = self.image.set(source);
    }

    /// Whether tokens are the metadata image's (a cluster broker's).
    pub fn is_from_image(&self) -> bool {
        self.image.get().is_some()
    }

    /// The tokens in force.
    pub fn current(&self) -> Tokens {
        match self.image.get() {
            Some(source) => source().map(|image| image.delegation_tokens.clone()).unwrap_or_default(),
            None => self.tokens.read().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// One token in force (without copying the others).
    fn token(&self, token_id: &str) -> Option<DelegationTokenRecord> {
        match self.image.get() {
            Some(source) => source()?.delegation_tokens.get(token_id).cloned(),
            None => self.tokens.read().unwrap_or_else(|p| p.into_inner()).get(token_id).cloned(),
        }
    }

    /// A single node's change: `decide` on the tokens in force, its records applied and stored
    /// (all at once, durable on return), then its answer; `Err` when they could not be stored.
    pub fn change<T>(&self, decide: impl FnOnce(&Tokens) -> (Vec<MetadataRecord>, T)) -> std::io::Result<T> {
        assert!(!self.is_from_image(), "a cluster's tokens change through its controller");
        let mut guard = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        let (records, answer) = decide(&guard);
        if records.is_empty() {
            return Ok(answer);
        }
        let mut next = guard.clone();
        tokens::apply(&mut next, &records);
        let all = next.values().cloned().map(MetadataRecord::from);
        records_file::write(&self.path, all)?;
        *guard = next;
        Ok(answer)
    }

    /// The credential a SCRAM login with `tokenauth=true` and user name `token_id` is checked
    /// against, with whom it authenticates (Kafka's `ScramServerCallbackHandler` with a
    /// `DelegationTokenCredentialCallback`). None when tokens are off or the token is unknown.
    pub fn login(&self, token_id: &str, mechanism: Mechanism) -> Option<TokenLogin> {
        let hmac = self.settings.hmac_of(token_id)?;
        let token = self.token(token_id)?;
        let (_, owner_name) = tokens::split_principal(&token.owner);
        let mut cache = self.credentials.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 1024 {
            cache.clear(); // removed tokens' credentials: derived again when asked
        }
        let key = (token_id.to_string(), mechanism);
        let credential = cache
            .entry(key)
            .or_insert_with(|| {
                let salt: [u8; 16] = rand::random();
                Credential::from_password(mechanism, &tokens::password(&hmac), &salt, MIN_ITERATIONS)
            })
            .clone();
        Some(TokenLogin { credential, owner_name: owner_name.to_string(), expiry_ms: token.expiration_timestamp })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::records::RemoveDelegationTokenRecord;

    fn settings() -> TokenSettings {
        TokenSettings {
            secret: Some("s3cret".into()),
            max_lifetime_ms: 1000,
            expiry_time_ms: 500,
            check_interval_ms: 100,
        }
    }

    fn token(id: &str) -> DelegationTokenRecord {
        DelegationTokenRecord {
            owner: "User:alice".into(),
            requester: "User:alice".into(),
            token_id: id.into(),
            expiration_timestamp: 77,
            ..Default::default()
        }
    }

    #[test]
    fn tokens_survive_a_reopen_and_logins_derive_from_the_hmac() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(settings(), dir.path()).unwrap();
        store.change(|_| (vec![token("a").into(), token("b").into()], ())).unwrap();
        store
            .change(|_| (vec![RemoveDelegationTokenRecord { token_id: "b".into(), ..Default::default() }.into()], ()))
            .unwrap();
        let reopened = TokenStore::open(settings(), dir.path()).unwrap();
        assert_eq!(reopened.current().keys().collect::<Vec<_>>(), ["a"]);
        let bytes = std::fs::read(dir.path().join(".ketch/tokens.records")).unwrap();
        let hmac = tokens::hmac("s3cret", "a");
        assert!(!bytes.windows(hmac.len()).any(|w| w == hmac.as_slice()), "no HMAC on disk");

        let login = reopened.login("a", Mechanism::Sha512).unwrap();
        assert_eq!((login.owner_name.as_str(), login.expiry_ms), ("alice", 77));
        let expected = Credential::from_password(
            Mechanism::Sha512,
            &tokens::password(&hmac),
            &login.credential.salt,
            MIN_ITERATIONS,
        );
        assert_eq!(login.credential, expected);
        assert_eq!(reopened.login("a", Mechanism::Sha512).unwrap().credential, expected, "derived once");
        assert!(reopened.login("b", Mechanism::Sha512).is_none(), "a removed token");
        assert!(reopened.login("nope", Mechanism::Sha256).is_none());
        let off = TokenStore::open(TokenSettings { secret: None, ..settings() }, dir.path()).unwrap();
        assert!(off.login("a", Mechanism::Sha512).is_none(), "no secret, no token logins");
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(settings(), dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join(".ketch/tokens.records/blocked")).unwrap();
        assert!(store.change(|_| (vec![token("a").into()], ())).is_err());
        assert!(store.current().is_empty());
    }
}
