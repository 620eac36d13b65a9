//! PKCS12 and JKS keystores and truststores (`ketch::security::keystore`) read from arbitrary bytes
//! with the password "secret": an error, never a panic, and no allocation past libFuzzer's limit.
#![no_main]

use ketch::security::keystore::{key_and_chain, trusted};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for kind in ["PKCS12", "JKS"] {
        let _ = key_and_chain(kind, "ssl.keystore.location", data, Some("secret"), None);
        let _ = trusted(kind, "ssl.truststore.location", data, Some("secret"));
    }
});
