//! `ssl.principal.mapping.rules` (`ketch::server::principal_mapper`): the input up to the first
//! `\n` is the rules value, the rest a certificate subject. Parsing and applying must never
//! panic (a bad value is an error), and a rule list ending in DEFAULT always names the subject.
#![no_main]

use ketch::server::principal_mapper::PrincipalMapper;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (rules, dn) = text.split_once('\n').unwrap_or((text, "CN=client,O=ketch"));
    if let Ok(mapper) = PrincipalMapper::parse(rules) {
        let _ = mapper.name(dn);
    }
    if let Ok(mapper) = PrincipalMapper::parse(&format!("{rules},DEFAULT")) {
        assert!(mapper.name(dn).is_some(), "a rule list ending in DEFAULT names every subject");
    }
});
