//! Hand-written (not generated): Kafka's `ApiMessageAndVersion` and the framing of its
//! `MetadataRecordSerde`, in which every record of the `__cluster_metadata` log is stored:
//! unsigned varints frame version, api key and version, then the message.

use super::codec::Reader;
use super::{DecodeError, EncodeError, MetadataRecord};

/// The frame version of Kafka's `MetadataRecordSerde` (`AbstractApiMessageSerde.DEFAULT_FRAME_VERSION`,
/// the only one it reads). Kafka 4.1 writes 1 (seen in its metadata log).
pub const FRAME_VERSION: u32 = 1;

/// A record with the version it is (to be) encoded at: Kafka's `ApiMessageAndVersion`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiMessageAndVersion {
    pub record: MetadataRecord,
    pub version: i16,
}

impl ApiMessageAndVersion {
    /// Decodes one framed record from exactly `buf`; see [`MetadataRecord::decode_framed`].
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let frame = r.uvarint()?;
        if frame != FRAME_VERSION {
            return Err(DecodeError::UnknownFrameVersion(frame));
        }
        let api_key = r.uvarint()?;
        let api_key = i16::try_from(api_key).map_err(|_| DecodeError::UnknownApiKey(api_key))?;
        let version = r.uvarint()?;
        // out of i16 range: reported as an unsupported version by the record's decoder
        let version = i16::try_from(version).unwrap_or(i16::MAX);
        let rest = r.take(r.remaining())?;
        let record = MetadataRecord::decode(api_key, version, rest)?;
        Ok(ApiMessageAndVersion { record, version })
    }

    /// Encodes the record with its framing.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        self.record.encode_framed(self.version)
    }
}
