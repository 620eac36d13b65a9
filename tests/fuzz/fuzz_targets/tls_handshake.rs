//! The TLS handshake of an SSL listener as Ketch configures it (`ketch::server::tls::server_config`:
//! a PEM keystore, `ssl.client.auth=requested` with a PEM truststore), fed the client's bytes in
//! the pieces the input gives (split at `\xfe\xfe`); whatever certificate a client presents goes
//! through `ketch::server::tls::principal` with a mapping rule. A panic is a finding.
#![no_main]

use std::io::Cursor;
use std::sync::{Arc, OnceLock};

use ketch::server::principal_mapper::PrincipalMapper;
use libfuzzer_sys::fuzz_target;
use rustls::ServerConfig;

struct Fixture {
    config: Arc<ServerConfig>,
    mapper: PrincipalMapper,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params").self_signed(&key).expect("a certificate");
        let props = [
            ("ssl.keystore.type", "PEM".to_string()),
            ("ssl.keystore.key", key.serialize_pem()),
            ("ssl.keystore.certificate.chain", cert.pem()),
            ("ssl.truststore.certificates", cert.pem()),
            ("ssl.client.auth", "requested".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let config = ketch::server::tls::server_config(&props, "SSL").expect("a valid TLS configuration");
        let mapper = PrincipalMapper::parse("RULE:^CN=([^,]+).*$/$1/L,DEFAULT").expect("a valid rule");
        Fixture { config, mapper }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Ok(mut conn) = rustls::ServerConnection::new(f.config.clone()) else { return };
    let mut rest = data;
    loop {
        let (piece, next) = match rest.windows(2).position(|w| w == [0xfe, 0xfe]) {
            Some(i) => (&rest[..i], Some(&rest[i + 2..])),
            None => (rest, None),
        };
        let mut cursor = Cursor::new(piece);
        while (cursor.position() as usize) < piece.len() {
            match conn.read_tls(&mut cursor) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if conn.process_new_packets().is_err() {
                return;
            }
        }
        let mut out = Vec::new();
        while conn.wants_write() {
            if conn.write_tls(&mut out).is_err() {
                break;
            }
        }
        if !conn.is_handshaking() {
            let _ = ketch::server::tls::principal(conn.peer_certificates(), &f.mapper);
        }
        match next {
            Some(n) => rest = n,
            None => break,
        }
    }
});
