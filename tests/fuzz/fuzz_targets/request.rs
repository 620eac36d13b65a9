//! Whole request path: the broker's own `decode_request` (guard, then kafka-protocol's decoder).
//! Any panic, abort or allocation over libFuzzer's -malloc_limit_mb is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ketch::protocol::decode_request(bytes::Bytes::copy_from_slice(data));
});
