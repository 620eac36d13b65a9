//! The SCRAM credentials of the cluster (KIP-554): AlterUserScramCredentials /
//! DescribeUserScramCredentials (`kafka-configs --entity-type users`) change and read them, SCRAM
//! logins (`sasl.rs`, `scram.rs`) look them up, `ketch format --add-scram` seeds them.
//!
//! On disk: `<first log dir>/.ketch/scram.records`: one Kafka `UserScramCredentialRecord` per
//! (user, mechanism), in the file format of `records_file.rs`, as `acl_store.rs` keeps ACLs.
//! Replaced atomically on every change; read at start. Invariants: only salts, stored keys and
//! server keys are stored (never a password or salted password); a change is acknowledged only
//! once durable; the validation and error texts are Kafka's `ScramControlManager`'s.
//!
//! In a cluster (a broker of a controller quorum) the credentials are cluster metadata, as in
//! Kafka's KRaft mode: the broker reads them from its metadata image (`read_from_image`), the
//! file is not consulted, and alterations go to the controller, which decides them with
//! `decide` and writes `records_of` the accepted ones into the metadata log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use super::records_file;
use super::scram::{Credential, Mechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use super::token_store::{TokenLogin, TokenStore};
use crate::metadata::image::MetadataImage;
use crate::metadata::records::{MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord};

/// (user, mechanism) -> credential.
type Credentials = BTreeMap<(String, Mechanism), Credential>;

/// A cluster broker's current metadata image (None before it has one: no credentials then).
pub type ImageSource = Box<dyn Fn() -> Option<Arc<MetadataImage>> + Send + Sync>;

pub struct ScramStore {
    path: PathBuf,
    credentials: RwLock<Credentials>,
    /// Set on a broker of a cluster: credentials come from the metadata image, not the file.
    image: OnceLock<ImageSource>,
    /// The delegation tokens whose logins (`tokenauth=true`) are SCRAM too, once attached.
    tokens: OnceLock<Arc<TokenStore>>,
}

/// An alteration: a deletion, or an upsertion with the salted password the client computed.
pub enum Alteration {
    Delete { user: String, mechanism: i8 },
    Upsert { user: String, mechanism: i8, iterations: i32, salt: Vec<u8>, salted_password: Vec<u8> },
}

impl Alteration {
    pub fn user(&self) -> &str {
        match self {
            Alteration::Delete { user, .. } | Alteration::Upsert { user, .. } => user,
        }
    }
}

/// Kafka's error codes for a refused alteration.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const DUPLICATE_RESOURCE: i16 = 92;
pub const RESOURCE_NOT_FOUND: i16 = 91;
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
pub const KAFKA_STORAGE_ERROR: i16 = 56;

/// One user's outcome: `Ok` or (error code, message).
pub type Outcome = (String, Result<(), (i16, String)>);

impl ScramStore {
    pub fn open(metadata_dir: &Path) -> anyhow::Result<ScramStore> {
        let path = metadata_dir.join(".ketch").join("scram.records");
        let credentials = match std::fs::read(&path) {
            Ok(bytes) => decode_file(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Credentials::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(ScramStore { path, credentials: RwLock::new(credentials), image: OnceLock::new(), tokens: OnceLock::new() })
    }

    /// A store of the credentials in the images `source` gives, and no file (a controller's own
    /// SASL listeners: its image is the cluster's credentials).
    pub fn of_image(source: ImageSource) -> ScramStore {
        let store = ScramStore {
            path: PathBuf::new(),
            credentials: RwLock::default(),
            image: OnceLock::new(),
            tokens: OnceLock::new(),
        };
        store.read_from_image(source);
        store
    }

    /// From now on, credentials are read from the metadata image `source` gives (a broker of a
    /// cluster, as Kafka's brokers read theirs from `ScramImage`). Set once; later calls are
    /// ignored.
    pub fn read_from_image(&self, source: ImageSource) {
        let _ = self.image.set(source);
    }

    /// Whether credentials are the metadata image's (a cluster broker's).
    pub fn is_from_image(&self) -> bool {
        self.image.get().is_some()
    }

    /// The credentials in force: the image's on a cluster broker, the file's otherwise.
    fn current(&self) -> Credentials {
        match self.image.get() {
            Some(source) => source().map(|image| from_image(&image)).unwrap_or_default(),
            None => self.read().clone(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Credentials> {
        self.credentials.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lookup(&self, user: &str, mechanism: Mechanism) -> Option<Credential> {
        match self.image.get() {
            Some(source) => {
                let image = source()?;
                let c = image.scram.get(&(user.to_string(), mechanism.type_code()))?;
                Some(Credential {
                    salt: c.salt.clone(),
                    stored_key: c.stored_key.clone(),
                    server_key: c.server_key.clone(),
                    iterations: c.iterations,
                })
            }
            None => self.read().get(&(user.to_string(), mechanism)).cloned(),
        }
    }

    /// Token logins are checked against `tokens` from now on. Set once; later calls are ignored.
    pub fn attach_tokens(&self, tokens: Arc<TokenStore>) {
        let _ = self.tokens.set(tokens);
    }

    /// A delegation token login's credential and owner (none without attached tokens).
    pub fn token_login(&self, token_id: &str, mechanism: Mechanism) -> Option<TokenLogin> {
        self.tokens.get()?.login(token_id, mechanism)
    }

    /// The credentials as UserScramCredentialRecords (a controller's bootstrap metadata).
    pub fn records(&self) -> Vec<MetadataRecord> {
        as_records(&self.read()).collect()
    }

    /// Every user with a credential, each with (mechanism, iterations).
    pub fn users(&self) -> BTreeMap<String, Vec<(Mechanism, i32)>> {
        let mut out: BTreeMap<String, Vec<(Mechanism, i32)>> = BTreeMap::new();
        for ((user, mechanism), c) in self.current().iter() {
            out.entry(user.clone()).or_default().push((*mechanism, c.iterations));
        }
        out
    }

    /// AlterUserScramCredentials, as Kafka's controller: per user (a user named twice in the
    /// request is refused whole), deletions then upsertions, all stored at once.
    pub fn alter(&self, alterations: Vec<Alteration>) -> Vec<Outcome> {
        let mut guard = self.credentials.write().unwrap_or_else(|p| p.into_inner());
        let Decided { accepted, errors } = decide(alterations, |user, m| guard.contains_key(&(user.to_string(), m)));
        let mut next = guard.clone();
        let mut outcomes = Vec::new();
        for a in &accepted {
            match a {
                Alteration::Delete { user, mechanism } => {
                    next.remove(&(user.clone(), Mechanism::from_type(*mechanism).expect("validated")));
                }
                Alteration::Upsert { user, mechanism, iterations, salt, salted_password } => {
                    let m = Mechanism::from_type(*mechanism).expect("validated");
                    next.insert(
                        (user.clone(), m),
                        Credential::from_salted_password(m, salt, salted_password, *iterations),
                    );
                }
            }
            outcomes.push((a.user().to_string(), Ok(())));
        }
        if !accepted.is_empty() {
            if let Err(e) = save(&self.path, &next) {
                for o in &mut outcomes {
                    o.1 = Err((KAFKA_STORAGE_ERROR, e.to_string()));
                }
            } else {
                *guard = next;
            }
        }
        outcomes.extend(errors.into_iter().map(|(u, e)| (u, Err(e))));
        outcomes
    }

    /// Adds credentials at format time (`--add-scram`), before the broker serves.
    pub fn add(&self, user: &str, mechanism: Mechanism, credential: Credential) -> std::io::Result<()> {
        let mut guard = self.credentials.write().unwrap_or_else(|p| p.into_inner());
        let mut next = guard.clone();
        next.insert((user.to_string(), mechanism), credential);
        save(&self.path, &next)?;
        *guard = next;
        Ok(())
    }
}

/// AlterUserScramCredentials decided as Kafka's `ScramControlManager.alterCredentials`:
/// alterations in request order (deletions first), a user named twice refused whole
/// (DUPLICATE_RESOURCE), each checked (`exists`: whether a credential is there to delete).
pub struct Decided {
    /// The alterations to apply, at most one per user.
    pub accepted: Vec<Alteration>,
    /// The refused users, each once, with Kafka's error code and message.
    pub errors: Vec<(String, (i16, String))>,
}

pub fn decide(alterations: Vec<Alteration>, exists: impl Fn(&str, Mechanism) -> bool) -> Decided {
    let mut accepted: Vec<Alteration> = Vec::new();
    let mut errors: Vec<(String, (i16, String))> = Vec::new();
    for a in alterations {
        let user = a.user().to_string();
        if errors.iter().any(|(u, _)| *u == user) {
            continue;
        }
        if let Some(i) = accepted.iter().position(|x| x.user() == user) {
            accepted.remove(i);
            errors.push((
                user,
                (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request".into()),
            ));
            continue;
        }
        match validate(&exists, &a) {
            Ok(()) => accepted.push(a),
            Err(e) => errors.push((user, e)),
        }
    }
    Decided { accepted, errors }
}

/// The metadata records of accepted alterations (`decide`): RemoveUserScramCredentialRecord,
/// or UserScramCredentialRecord with the stored and server keys of the salted password.
pub fn records_of(accepted: &[Alteration]) -> Vec<MetadataRecord> {
    accepted
        .iter()
        .filter_map(|a| match a {
            Alteration::Delete { user, mechanism } => {
                Some(MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                    name: user.clone(),
                    mechanism: *mechanism,
                    ..Default::default()
                }))
            }
            Alteration::Upsert { user, mechanism, iterations, salt, salted_password } => {
                let m = Mechanism::from_type(*mechanism)?;
                let c = Credential::from_salted_password(m, salt, salted_password, *iterations);
                Some(MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                    name: user.clone(),
                    mechanism: *mechanism,
                    salt: c.salt,
                    stored_key: c.stored_key,
                    server_key: c.server_key,
                    iterations: c.iterations,
                    ..Default::default()
                }))
            }
        })
        .collect()
}

/// The credentials of a metadata image (mechanisms this broker does not know are left out).
fn from_image(image: &MetadataImage) -> Credentials {
    image
        .scram
        .iter()
        .filter_map(|((user, mechanism), c)| {
            let m = Mechanism::from_type(*mechanism)?;
            let credential = Credential {
                salt: c.salt.clone(),
                stored_key: c.stored_key.clone(),
                server_key: c.server_key.clone(),
                iterations: c.iterations,
            };
            Some(((user.clone(), m), credential))
        })
        .collect()
}

/// One `--add-scram` argument of `kafka-storage format` (Kafka's `ScramParser`):
/// `SCRAM-SHA-256=[name=alice,password=alice-secret]`, with optional `iterations=` (4096 by
/// default), `salt=` (base64, random by default), `saltedpassword=` (base64, with `salt`).
pub fn parse_add_scram(input: &str) -> Result<(String, Mechanism, Credential), String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let input = input.trim();
    let (name, config) =
        input.split_once('=').ok_or_else(|| format!("Failed to find equals sign in SCRAM argument '{input}'"))?;
    let mechanism =
        Mechanism::from_name(name).ok_or_else(|| format!("The add-scram mechanism {name} is not supported."))?;
    let config = config.strip_prefix('[').ok_or("Expected configuration string to start with [")?;
    let config = config.strip_suffix(']').ok_or("Expected configuration string to end with ]")?;
    let mut parts = BTreeMap::new();
    for component in config.split(',') {
        let (k, v) =
            component.split_once('=').ok_or_else(|| format!("No equals sign found in SCRAM component: {component}"))?;
        let v = if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') { &v[1..v.len() - 1] } else { v };
        parts.insert(k.to_string(), v.to_string());
    }
    let user = parts.remove("name").ok_or("You must supply 'name' to add-scram")?;
    let given_salt = parts.remove("salt");
    let salt = match given_salt.clone() {
        Some(s) => b64.decode(&s).map_err(|_| format!("Failed to decode given salt: {s}"))?,
        None => {
            use rand::RngCore;
            let mut salt = vec![0u8; 32];
            rand::rng().fill_bytes(&mut salt);
            salt
        }
    };
    let iterations = match parts.remove("iterations") {
        Some(i) => i.parse::<i32>().map_err(|_| format!("Failed to parse iterations count: {i}"))?,
        None => MIN_ITERATIONS,
    };
    let password = parts.remove("password");
    let salted = parts.remove("saltedpassword");
    if let Some(unknown) = (!parts.is_empty()).then(|| parts.keys().cloned().collect::<Vec<_>>().join(", ")) {
        return Err(format!("Unknown SCRAM configurations: {unknown}"));
    }
    if iterations < MIN_ITERATIONS {
        return Err(format!(
            "The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {}",
            mechanism.name()
        ));
    }
    if iterations > MAX_ITERATIONS {
        return Err(format!(
            "The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {}",
            mechanism.name()
        ));
    }
    let credential = match (password, salted) {
        (Some(p), _) => Credential::from_password(mechanism, &p, &salt, iterations),
        (None, Some(sp)) => {
            if given_salt.is_none() {
                return Err("You must supply 'salt' with 'saltedpassword' to add-scram".into());
            }
            let sp = b64.decode(&sp).map_err(|_| format!("Failed to decode given saltedPassword: {sp}"))?;
            Credential::from_salted_password(mechanism, &salt, &sp, iterations)
        }
        (None, None) => return Err("You must supply one of 'password' or 'saltedpassword' to add-scram".into()),
    };
    Ok((user, mechanism, credential))
}

fn validate(exists: &impl Fn(&str, Mechanism) -> bool, a: &Alteration) -> Result<(), (i16, String)> {
    let (user, mechanism) = match a {
        Alteration::Delete { user, mechanism } | Alteration::Upsert { user, mechanism, .. } => (user, *mechanism),
    };
    if user.is_empty() {
        return Err((UNACCEPTABLE_CREDENTIAL, "Username must not be empty".into()));
    }
    let Some(m) = Mechanism::from_type(mechanism) else {
        return Err((UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism".into()));
    };
    match a {
        Alteration::Delete { .. } => {
            if !exists(user, m) {
                return Err((RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist".into()));
            }
        }
        Alteration::Upsert { iterations, .. } => {
            if *iterations < MIN_ITERATIONS {
                return Err((UNACCEPTABLE_CREDENTIAL, "Too few iterations".into()));
            }
            if *iterations > MAX_ITERATIONS {
                return Err((UNACCEPTABLE_CREDENTIAL, "Too many iterations".into()));
            }
        }
    }
    Ok(())
}

fn save(path: &Path, credentials: &Credentials) -> std::io::Result<()> {
    records_file::write(path, as_records(credentials))
}

/// One UserScramCredentialRecord per (user, mechanism).
fn as_records(credentials: &Credentials) -> impl Iterator<Item = MetadataRecord> + '_ {
    credentials.iter().map(|((user, mechanism), c)| {
        MetadataRecord::UserScramCredential(UserScramCredentialRecord {
            name: user.clone(),
            mechanism: mechanism.type_code(),
            salt: c.salt.clone(),
            stored_key: c.stored_key.clone(),
            server_key: c.server_key.clone(),
            iterations: c.iterations,
            ..Default::default()
        })
    })
}

fn decode_file(bytes: &[u8]) -> Result<Credentials, String> {
    let mut out = Credentials::new();
    records_file::read(bytes, |record| match record {
        MetadataRecord::UserScramCredential(r) => {
            let m = Mechanism::from_type(r.mechanism).ok_or(format!("unknown SCRAM mechanism {}", r.mechanism))?;
            let c = Credential {
                salt: r.salt,
                stored_key: r.stored_key,
                server_key: r.server_key,
                iterations: r.iterations,
            };
            out.insert((r.name, m), c);
            Ok(())
        }
        other => Err(format!("unexpected record {:?}", other.api_key())),
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> Alteration {
        let salted =
            Mechanism::from_type(mechanism).map(|m| m.salted_password(b"pw", b"salt", 4096)).unwrap_or_default();
        Alteration::Upsert { user: user.into(), mechanism, iterations, salt: b"salt".to_vec(), salted_password: salted }
    }

    #[test]
    fn alterations_validate_persist_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = ScramStore::open(dir.path()).unwrap();
        let out = store.alter(vec![
            upsert("alice", 1, 4096),
            upsert("bob", 2, 100),
            upsert("carol", 1, 20000),
            upsert("dave", 3, 4096),
            upsert("", 1, 4096),
            upsert("erin", 1, 4096),
            Alteration::Delete { user: "erin".into(), mechanism: 2 },
            Alteration::Delete { user: "frank".into(), mechanism: 1 },
        ]);
        let find = |u: &str| out.iter().find(|o| o.0 == u).unwrap().1.clone();
        assert_eq!(find("alice"), Ok(()));
        assert_eq!(find("bob"), Err((UNACCEPTABLE_CREDENTIAL, "Too few iterations".into())));
        assert_eq!(find("carol"), Err((UNACCEPTABLE_CREDENTIAL, "Too many iterations".into())));
        assert_eq!(find("dave"), Err((UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism".into())));
        assert_eq!(find(""), Err((UNACCEPTABLE_CREDENTIAL, "Username must not be empty".into())));
        assert_eq!(find("erin").unwrap_err().0, DUPLICATE_RESOURCE);
        assert_eq!(find("frank").unwrap_err().0, RESOURCE_NOT_FOUND);
        assert_eq!(out.len(), 7, "one outcome per user");
        let stored = std::fs::read(dir.path().join(".ketch/scram.records")).unwrap();
        assert!(!stored.windows(2).any(|w| w == b"pw"), "no password on disk");
        let reopened = ScramStore::open(dir.path()).unwrap();
        let c = reopened.lookup("alice", Mechanism::Sha256).unwrap();
        assert_eq!(c, Credential::from_password(Mechanism::Sha256, "pw", b"salt", 4096));
        assert!(reopened.lookup("alice", Mechanism::Sha512).is_none());
        assert_eq!(reopened.users().len(), 1);
        let out = reopened.alter(vec![Alteration::Delete { user: "alice".into(), mechanism: 1 }]);
        assert_eq!(out[0].1, Ok(()));
        assert!(ScramStore::open(dir.path()).unwrap().users().is_empty());
    }

    #[test]
    fn add_scram_arguments_as_kafka_storage_takes_them() {
        let (user, m, c) = parse_add_scram("SCRAM-SHA-256=[name=alice,password=\"alice-secret\"]").unwrap();
        assert_eq!((user.as_str(), m, c.iterations, c.salt.len()), ("alice", Mechanism::Sha256, 4096, 32));
        assert_eq!(c, Credential::from_password(m, "alice-secret", &c.salt, 4096));
        let (_, m, c) = parse_add_scram("SCRAM-SHA-512=[name=bob,salt=c2FsdA==,iterations=8192,password=x]").unwrap();
        assert_eq!((m, c.salt.as_slice(), c.iterations), (Mechanism::Sha512, &b"salt"[..], 8192));
        for (bad, why) in [
            ("SCRAM-SHA-1=[name=a,password=b]", "not supported"),
            ("SCRAM-SHA-256=name=a,password=b", "start with ["),
            ("SCRAM-SHA-256=[password=b]", "'name'"),
            ("SCRAM-SHA-256=[name=a]", "'password' or 'saltedpassword'"),
            ("SCRAM-SHA-256=[name=a,password=b,iterations=10]", ">= 4096"),
            ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
            ("SCRAM-SHA-256=[name=a,saltedpassword=eA==]", "'salt'"),
        ] {
            let err = parse_add_scram(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
