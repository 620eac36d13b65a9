//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` implements
//! them: the credential derivation (salted password -> stored key / server key), and the server
//! side of one exchange (client-first -> server-first -> client-final -> server-final).
//!
//! Owns no state beyond one exchange and nothing on disk (credentials live in `scram_store.rs`).
//! Invariants: only stored keys and server keys are ever kept, never a password or a salted
//! password; the client proof is checked in constant time; the combined nonce of the final
//! message must be exactly the one the server sent; a credential with fewer iterations than the
//! mechanism's minimum (4096) is refused as Kafka does; extensions other than `tokenauth` are
//! ignored. With `tokenauth=true` the user name is a delegation token's id, checked against the
//! credential derived from the token's HMAC (`token_store.rs`), and the exchange authenticates
//! the token's owner.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

pub use super::token_store::TokenLogin;

/// A SCRAM mechanism, with Kafka's type codes (`ScramMechanism`: 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

/// Kafka's iteration bounds (`ScramMechanism.minIterations`, `ScramControlManager.MAX_ITERATIONS`).
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    pub fn from_type(t: i8) -> Option<Mechanism> {
        match t {
            1 => Some(Mechanism::Sha256),
            2 => Some(Mechanism::Sha512),
            _ => None,
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "SCRAM-SHA-256" => Some(Mechanism::Sha256),
            "SCRAM-SHA-512" => Some(Mechanism::Sha512),
            _ => None,
        }
    }

    pub fn type_code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
            Mechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            Mechanism::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }
}

/// What the broker keeps of a user's SCRAM password (Kafka's `ScramCredential`). Its `Debug`
/// hides the salt and the keys (`security::redact`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::redact::Hidden;
        f.debug_struct("Credential")
            .field("salt", &Hidden)
            .field("stored_key", &Hidden)
            .field("server_key", &Hidden)
            .field("iterations", &self.iterations)
            .finish()
    }
}

impl Credential {
    /// From the salted password an AlterUserScramCredentials upsertion carries.
    pub fn from_salted_password(mechanism: Mechanism, salt: &[u8], salted: &[u8], iterations: i32) -> Credential {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Credential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
            iterations,
        }
    }

    /// From a password (`ketch format --add-scram`, tests).
    pub fn from_password(mechanism: Mechanism, password: &str, salt: &[u8], iterations: i32) -> Credential {
        let salted = mechanism.salted_password(password.as_bytes(), salt, iterations.max(1) as u32);
        Credential::from_salted_password(mechanism, salt, &salted, iterations)
    }
}

/// Why an exchange failed. `Reported` messages go to the client as they are (Kafka's
/// `SaslAuthenticationException`); `Generic` ones are logged only and the client gets Kafka's
/// generic "invalid credentials" text (Kafka's `SaslException`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Reported(String),
    Generic(String),
}

enum State {
    First,
    Final {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: Credential,
        user: String,
        token_expiry_ms: Option<i64>,
    },
    Done,
}

/// The server side of one SCRAM exchange.
pub struct Server {
    mechanism: Mechanism,
    state: State,
    server_nonce: String,
    /// The authenticated user once complete (a delegation token's owner for a token login).
    pub user: Option<String>,
    /// For a delegation token login, once complete: the token's expiry (its session's end).
    pub token_expiry_ms: Option<i64>,
}

/// A printable nonce of ~130 random bits, as Kafka's `ScramFormatter.secureRandomString`.
pub fn random_nonce() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..26).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// `saslname` decoding: `=2C` is `,` and `=3D` is `=`; any other `=` is invalid.
fn username(saslname: &str) -> Option<String> {
    let mut out = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

fn printable_no_comma(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

fn is_base64(s: &str) -> Option<Vec<u8>> {
    B64.decode(s).ok()
}

/// Extensions (`,key=value` pairs after the nonce): keys are letters, values 0x01-0x7F but `,`.
fn parse_extensions(parts: &[&str]) -> Option<Vec<(String, String)>> {
    parts
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=')?;
            let ok = !k.is_empty()
                && k.bytes().all(|b| b.is_ascii_alphabetic())
                && !v.is_empty()
                && v.bytes().all(|b| (0x01..=0x7f).contains(&b));
            ok.then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

impl Server {
    pub fn new(mechanism: Mechanism) -> Server {
        Server::with_nonce(mechanism, random_nonce())
    }

    /// With a given server nonce (tests with RFC vectors).
    pub fn with_nonce(mechanism: Mechanism, server_nonce: String) -> Server {
        Server { mechanism, state: State::First, server_nonce, user: None, token_expiry_ms: None }
    }

    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Done) && self.user.is_some()
    }

    /// One client message in, the server's answer out. `lookup` finds a user's credential.
    pub fn evaluate(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<Credential>,
    ) -> Result<Vec<u8>, Failure> {
        self.evaluate_with_tokens(message, lookup, |_| None)
    }

    /// `evaluate`, with `token_lookup` finding a delegation token's login by its id.
    pub fn evaluate_with_tokens(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<Credential>,
        token_lookup: impl FnOnce(&str) -> Option<TokenLogin>,
    ) -> Result<Vec<u8>, Failure> {
        let text = std::str::from_utf8(message).map_err(|_| Failure::Generic("message is not UTF-8".into()))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => self.first(text, lookup, token_lookup),
            State::Final { client_first_bare, server_first, nonce, credential, user, token_expiry_ms } => {
                let out = self.last(text, &client_first_bare, &server_first, &nonce, &credential, user)?;
                self.token_expiry_ms = token_expiry_ms; // (only once the proof is right)
                Ok(out)
            }
            State::Done => Err(Failure::Generic("unexpected message after the exchange ended".into())),
        }
    }

    fn first(
        &mut self,
        text: &str,
        lookup: impl FnOnce(&str) -> Option<Credential>,
        token_lookup: impl FnOnce(&str) -> Option<TokenLogin>,
    ) -> Result<Vec<u8>, Failure> {
        let invalid = || Failure::Generic(format!("Invalid SASL/SCRAM client first message format: {text}"));
        // gs2-header: "n," (no channel binding), optional "a=authzid", ","
        let rest = text.strip_prefix("n,").ok_or_else(invalid)?;
        let (authzid, bare) = rest.split_once(',').ok_or_else(invalid)?;
        let authzid = match authzid {
            "" => None,
            a => Some(username(a.strip_prefix("a=").ok_or_else(invalid)?).ok_or_else(invalid)?),
        };
        let mut parts: Vec<&str> = bare.split(',').collect();
        if parts.first().is_some_and(|p| p.starts_with("m=")) {
            parts.remove(0); // reserved mandatory extension: Kafka's pattern accepts and ignores it
        }
        if parts.len() < 2 {
            return Err(invalid());
        }
        let saslname = parts[0].strip_prefix("n=").ok_or_else(invalid)?;
        let client_nonce = parts[1].strip_prefix("r=").ok_or_else(invalid)?;
        if saslname.is_empty() || !saslname.bytes().all(|b| (0x01..=0x7f).contains(&b)) {
            return Err(invalid());
        }
        if !printable_no_comma(client_nonce) {
            return Err(invalid());
        }
        let extensions = parse_extensions(&parts[2..]).ok_or_else(invalid)?;
        let user = username(saslname).ok_or_else(|| Failure::Generic(format!("Invalid username: {saslname}")))?;
        let token_auth = extensions.iter().any(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"));
        // A token login authenticates the token's owner (Kafka's authorization id) until its expiry.
        let (credential, authenticated, token_expiry_ms) = match token_auth {
            true => match token_lookup(&user) {
                Some(login) => (login.credential, login.owner_name, Some(login.expiry_ms)),
                None => return Err(Failure::Generic(format!("Token Authentication failed: Invalid tokenId : {user}"))),
            },
            false => match lookup(&user) {
                Some(credential) => (credential, user.clone(), None),
                None => return Err(Failure::Generic("Authentication failed: Invalid user credentials".into())),
            },
        };
        if let Some(a) = authzid {
            if a != user {
                return Err(Failure::Reported(
                    "Authentication failed: Client requested an authorization id that is different from username"
                        .into(),
                ));
            }
        }
        if credential.iterations < MIN_ITERATIONS {
            return Err(Failure::Generic(format!(
                "Iterations {} is less than the minimum {} for {}",
                credential.iterations,
                MIN_ITERATIONS,
                self.mechanism.name()
            )));
        }
        let nonce = format!("{client_nonce}{}", self.server_nonce);
        let server_first = format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
        let out = server_first.clone().into_bytes();
        self.state = State::Final {
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
            credential,
            user: authenticated,
            token_expiry_ms,
        };
        Ok(out)
    }

    fn last(
        &mut self,
        text: &str,
        client_first_bare: &str,
        server_first: &str,
        nonce: &str,
        credential: &Credential,
        user: String,
    ) -> Result<Vec<u8>, Failure> {
        let invalid = || Failure::Generic(format!("Invalid SASL/SCRAM client final message format: {text}"));
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(invalid)?;
        let proof = is_base64(proof).ok_or_else(invalid)?;
        let parts: Vec<&str> = without_proof.split(',').collect();
        if parts.len() < 2 {
            return Err(invalid());
        }
        let channel = parts[0].strip_prefix("c=").ok_or_else(invalid)?;
        is_base64(channel).ok_or_else(invalid)?;
        let client_nonce = parts[1].strip_prefix("r=").ok_or_else(invalid)?;
        if !printable_no_comma(client_nonce) {
            return Err(invalid());
        }
        parse_extensions(&parts[2..]).ok_or_else(invalid)?;
        if client_nonce != nonce {
            return Err(Failure::Generic("Invalid client nonce in the final client message.".into()));
        }
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = self.mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(Failure::Generic("Invalid client credentials".into()));
        }
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(a, b)| a ^ b).collect();
        let computed = self.mechanism.hash(&client_key);
        if !bool::from(computed.ct_eq(&credential.stored_key)) {
            return Err(Failure::Generic("Invalid client credentials".into()));
        }
        let server_signature = self.mechanism.hmac(&credential.server_key, auth_message.as_bytes());
        self.user = Some(user);
        self.state = State::Done;
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// The client side (this node's own logins, `node/client.rs`; tests): the two client messages.
pub mod client {
    use super::*;

    /// Kafka's client checks of a server-first message: the nonce extends the client's, the
    /// iteration count is at least the mechanism's minimum (and, here, at most what any Kafka
    /// credential may have: a peer cannot make this node hash without bound).
    pub fn check_server_first(client_first: &str, server_first: &str) -> Result<(), String> {
        let client_nonce = client_first.rsplit_once(",r=").map_or("", |(_, n)| n);
        let field = |name: &str| server_first.split(',').find_map(|p| p.strip_prefix(name));
        let nonce = field("r=").ok_or("no nonce")?;
        if !nonce.starts_with(client_nonce) || nonce.len() == client_nonce.len() {
            return Err("the server's nonce does not extend the client's".into());
        }
        let iterations: i32 = field("i=").and_then(|i| i.parse().ok()).ok_or("no iteration count")?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!("{iterations} iterations, outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"));
        }
        Ok(())
    }

    pub fn first(user: &str, nonce: &str) -> String {
        format!("n,,n={},r={nonce}", user.replace('=', "=3D").replace(',', "=2C"))
    }

    /// The client-final message for `server_first`, and the server signature to expect.
    pub fn last(mechanism: Mechanism, password: &str, client_first: &str, server_first: &str) -> (String, Vec<u8>) {
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0u32;
        for part in server_first.split(',') {
            if let Some(v) = part.strip_prefix("r=") {
                nonce = v;
            } else if let Some(v) = part.strip_prefix("s=") {
                salt = B64.decode(v).unwrap_or_default();
            } else if let Some(v) = part.strip_prefix("i=") {
                iterations = v.parse().unwrap_or(0);
            }
        }
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let stored_key = mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let bare = client_first.strip_prefix("n,,").unwrap_or(client_first);
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = mechanism.hmac(&salted, b"Server Key");
        let server_signature = mechanism.hmac(&server_key, auth_message.as_bytes());
        (format!("{without_proof},p={}", B64.encode(proof)), server_signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil".
    #[test]
    fn rfc7677_sha256_exchange() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = Credential::from_password(Mechanism::Sha256, "pencil", &salt, 4096);
        let mut server = Server::with_nonce(Mechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into());
        let first = server
            .evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |u| (u == "user").then(|| credential.clone()))
            .unwrap();
        assert_eq!(
            String::from_utf8(first).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let last = server
            .evaluate(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                |_| None,
            )
            .unwrap();
        assert_eq!(String::from_utf8(last).unwrap(), "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert!(server.is_complete());
        assert_eq!(server.user.as_deref(), Some("user"));
    }

    #[test]
    fn rfc7677_wrong_proof_and_wrong_nonce_fail() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = Credential::from_password(Mechanism::Sha256, "pencil", &salt, 4096);
        for final_message in [
            // One bit of the proof flipped.
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU=",
            // The client's nonce alone, without the server's part.
            "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "garbage",
        ] {
            let mut server = Server::with_nonce(Mechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into());
            server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |_| Some(credential.clone())).unwrap();
            assert!(matches!(server.evaluate(final_message.as_bytes(), |_| None), Err(Failure::Generic(_))));
            assert!(!server.is_complete());
        }
    }

    #[test]
    fn a_token_login_authenticates_its_owner_until_its_expiry() {
        let credential = Credential::from_password(Mechanism::Sha256, "aG1hYw==", b"salt", 4096);
        let login = TokenLogin { credential: credential.clone(), owner_name: "alice".into(), expiry_ms: 99 };
        for (password, ok) in [("aG1hYw==", true), ("wrong", false)] {
            let mut server = Server::new(Mechanism::Sha256);
            let cf = "n,,n=tok1,r=abcdefgh,tokenauth=true";
            let users = |_: &str| -> Option<Credential> { panic!("a token login never looks up users") };
            let sf = server.evaluate_with_tokens(cf.as_bytes(), users, |id| (id == "tok1").then(|| login.clone()));
            let sf = String::from_utf8(sf.unwrap()).unwrap();
            let (last, _) = client::last(Mechanism::Sha256, password, cf, &sf);
            let got = server.evaluate(last.as_bytes(), |_| None);
            assert_eq!(got.is_ok(), ok, "{password}");
            if ok {
                assert_eq!((server.user.as_deref(), server.token_expiry_ms), (Some("alice"), Some(99)));
            }
        }
        let mut s = Server::new(Mechanism::Sha256);
        let got = s.evaluate_with_tokens(b"n,,n=tok2,r=abc,tokenauth=true", |_| Some(credential.clone()), |_| None);
        assert!(got.is_err(), "an unknown token, even where a user of that name exists");
    }

    #[test]
    fn sha512_round_trip_and_refusals() {
        let credential = Credential::from_password(Mechanism::Sha512, "s3cret", b"salty", 8192);
        for (password, ok) in [("s3cret", true), ("wrong", false)] {
            let mut server = Server::new(Mechanism::Sha512);
            let cf = client::first("al=ice,x", "abcdefgh");
            let sf = server.evaluate(cf.as_bytes(), |u| (u == "al=ice,x").then(|| credential.clone())).unwrap();
            let sf = String::from_utf8(sf).unwrap();
            let (last, expected) = client::last(Mechanism::Sha512, password, &cf, &sf);
            let got = server.evaluate(last.as_bytes(), |_| None);
            assert_eq!(got.is_ok(), ok, "{password}");
            if ok {
                assert_eq!(got.unwrap(), format!("v={}", B64.encode(expected)).into_bytes());
            }
        }
        // Unknown user, a token login, too few iterations, another authzid, bad saslname.
        let mut s = Server::new(Mechanism::Sha512);
        assert!(matches!(s.evaluate(b"n,,n=bob,r=abc", |_| None), Err(Failure::Generic(_))));
        let mut s = Server::new(Mechanism::Sha512);
        let got = s.evaluate(b"n,,n=alice,r=abc,tokenauth=true", |_| Some(credential.clone()));
        assert!(got.is_err(), "a token login is not a user's");
        let mut s = Server::new(Mechanism::Sha512);
        let got = s.evaluate(b"n,,n=alice,r=abc,foo=bar", |_| Some(credential.clone()));
        assert!(got.is_ok(), "other extensions are ignored");
        let weak = Credential::from_password(Mechanism::Sha512, "x", b"s", 100);
        let mut s = Server::new(Mechanism::Sha512);
        assert!(s.evaluate(b"n,,n=alice,r=abc", |_| Some(weak)).is_err());
        let mut s = Server::new(Mechanism::Sha512);
        let got = s.evaluate(b"n,a=bob,n=alice,r=abc", |_| Some(credential.clone()));
        assert!(matches!(got, Err(Failure::Reported(_))));
        let mut s = Server::new(Mechanism::Sha512);
        assert!(s.evaluate(b"n,,n=a=4,r=abc", |_| Some(credential.clone())).is_err());
        let mut s = Server::new(Mechanism::Sha512);
        assert!(s.evaluate(b"y,,n=alice,r=abc", |_| Some(credential.clone())).is_err(), "channel binding flag");
        let mut s = Server::new(Mechanism::Sha512);
        assert!(s.evaluate(&[0xff, 0xfe], |_| Some(credential.clone())).is_err());
    }
}
