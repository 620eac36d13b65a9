//! AlterUserScramCredentials on Ketch's controller (forwarded by cluster brokers from
//! `kafka-configs --alter --entity-type users --add-config 'SCRAM-SHA-256=[...]'`): decided as
//! Kafka's `ScramControlManager.alterCredentials` (`scram_store::decide`, against the
//! credentials of the controller's image) and written as UserScramCredentialRecord /
//! RemoveUserScramCredentialRecord in one change; brokers then authenticate with them.
//!
//! Invariants: nothing is written for a refused user; a success means the records are durable;
//! no password or salted password reaches the log (only salts and derived keys); below
//! metadata.version 3.5-IV2 (level 11) every alteration is refused, as Kafka refuses it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::AlterUserScramCredentialsRequest;
use kafka_protocol::messages::AlterUserScramCredentialsResponse;

use super::controller_apis::written;
use super::sasl::{alter_refused, alter_results, alterations_of};
use crate::controller::quorum::QuorumController;
use crate::metadata::image::MetadataImage;
use crate::metadata::records::MetadataRecord;
use crate::security::scram_store::{decide, records_of, Alteration, Decided, Outcome};

/// Kafka's `MetadataVersion.IBP_3_5_IV2`, the first with SCRAM in the metadata log.
const SCRAM_METADATA_VERSION: i16 = 11;

pub fn alter_user_scram_credentials(
    controller: &QuorumController,
    req: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let alterations = alterations_of(req);
    let answer = controller.change(|d| alter_credentials(d.image, alterations));
    match answer {
        Ok(outcomes) => alter_results(outcomes),
        Err(e) => written("AlterUserScramCredentials", Err(e), |error| alter_refused(req, error.code(), None)),
    }
}

/// The records to write and each user's outcome (successes first, then refusals, as Kafka
/// answers).
pub fn alter_credentials(image: &MetadataImage, alterations: Vec<Alteration>) -> (Vec<MetadataRecord>, Vec<Outcome>) {
    let Decided { accepted, mut errors } =
        decide(alterations, |user, m| image.scram.contains_key(&(user.to_string(), m.type_code())));
    let supported = image.metadata_version_at_least(SCRAM_METADATA_VERSION);
    let accepted = match supported {
        true => accepted,
        false => {
            let refused = accepted.iter().map(|a| {
                let message = "The current metadata.version does not support SCRAM".to_string();
                (a.user().to_string(), (ResponseError::UnsupportedVersion.code(), message))
            });
            errors.splice(0..0, refused.collect::<Vec<_>>());
            Vec::new()
        }
    };
    let records = records_of(&accepted);
    let outcomes = accepted
        .iter()
        .map(|a| (a.user().to_string(), Ok(())))
        .chain(errors.into_iter().map(|(user, e)| (user, Err(e))))
        .collect();
    (records, outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::image::ImageBuilder;
    use crate::security::scram::{Credential, Mechanism};
    use crate::security::scram_store::{ImageSource, ScramStore};
    use crate::security::scram_store::{DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL};
    use std::sync::{Arc, Mutex};

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> Alteration {
        let m = Mechanism::from_type(mechanism).unwrap();
        let salted_password = m.salted_password(b"pw", b"salt", iterations.max(1) as u32);
        Alteration::Upsert { user: user.into(), mechanism, iterations, salt: b"salt".to_vec(), salted_password }
    }

    fn image_at(level: i16) -> ImageBuilder {
        let mut builder = ImageBuilder::new();
        let mv = crate::metadata::records::FeatureLevelRecord {
            name: "metadata.version".into(),
            feature_level: level,
            ..Default::default()
        };
        builder.apply(0, &MetadataRecord::FeatureLevel(mv)).unwrap();
        builder
    }

    #[test]
    fn alterations_become_records_that_a_cluster_broker_authenticates_with() {
        let mut builder = image_at(27);
        let (records, outcomes) = alter_credentials(
            &builder.publish(),
            vec![
                Alteration::Delete { user: "zed".into(), mechanism: 1 },
                upsert("alice", 1, 4096),
                upsert("bob", 2, 100),
                upsert("carol", 1, 4096),
                upsert("carol", 2, 4096),
            ],
        );
        let find = |u: &str| outcomes.iter().find(|o| o.0 == u).unwrap().1.clone();
        assert_eq!(find("alice"), Ok(()));
        assert_eq!(find("zed").unwrap_err().0, RESOURCE_NOT_FOUND);
        assert_eq!(find("bob"), Err((UNACCEPTABLE_CREDENTIAL, "Too few iterations".into())));
        assert_eq!(find("carol").unwrap_err().0, DUPLICATE_RESOURCE);
        assert_eq!(outcomes.len(), 4);
        assert_eq!(records.len(), 1, "only alice's credential is written");
        let MetadataRecord::UserScramCredential(r) = &records[0] else { panic!("{records:?}") };
        let expected = Credential::from_password(Mechanism::Sha256, "pw", b"salt", 4096);
        assert_eq!(
            (r.name.as_str(), &r.stored_key, &r.server_key),
            ("alice", &expected.stored_key, &expected.server_key)
        );
        for (i, record) in records.iter().enumerate() {
            builder.apply(1 + i as i64, record).unwrap();
        }
        // A cluster broker's store reads the image, whatever its own file holds.
        let dir = tempfile::tempdir().unwrap();
        let store = ScramStore::open(dir.path()).unwrap();
        store.alter(vec![upsert("local", 1, 4096)]);
        let current = Arc::new(Mutex::new(builder.publish()));
        let shared = current.clone();
        let source: ImageSource = Box::new(move || Some(shared.lock().unwrap().clone()));
        store.read_from_image(source);
        assert_eq!(store.lookup("alice", Mechanism::Sha256), Some(expected));
        assert!(store.lookup("local", Mechanism::Sha256).is_none(), "the file is not consulted");
        assert_eq!(store.users().keys().cloned().collect::<Vec<_>>(), vec!["alice".to_string()]);
        // Deleting it: a RemoveUserScramCredentialRecord, and the login is gone.
        let (records, outcomes) =
            alter_credentials(&builder.publish(), vec![Alteration::Delete { user: "alice".into(), mechanism: 1 }]);
        assert_eq!(outcomes, vec![("alice".to_string(), Ok(()))]);
        builder.apply(10, &records[0]).unwrap();
        *current.lock().unwrap() = builder.publish();
        assert!(store.lookup("alice", Mechanism::Sha256).is_none());
        assert!(store.users().is_empty());
    }

    #[test]
    fn a_metadata_version_without_scram_refuses_every_alteration() {
        let image = image_at(SCRAM_METADATA_VERSION - 1).publish();
        let (records, outcomes) = alter_credentials(&image, vec![upsert("alice", 1, 4096)]);
        assert!(records.is_empty());
        assert_eq!(outcomes[0].1.clone().unwrap_err().0, ResponseError::UnsupportedVersion.code());
        let (records, _) = alter_credentials(&image_at(SCRAM_METADATA_VERSION).publish(), vec![upsert("a", 2, 4096)]);
        assert_eq!(records.len(), 1);
    }
}
