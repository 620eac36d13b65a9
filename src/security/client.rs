//! The security of this node's own connections to controllers and to other brokers (Kafka's
//! client-side channel builders for `controller.listener.names` and the inter-broker listener):
//! what a listener's `listener.security.protocol.map` entry asks of a client, built once from the
//! broker's properties as Kafka builds them, with the listener's `listener.name.<l>.*` overrides.
//!
//! - SSL and SASL_SSL: TLS with rustls. Trust: the listener's truststore (`security/stores.rs`),
//!   else Mozilla's roots (Java's would be its cacerts). The keystore, when the listener has one,
//!   is this node's client certificate (so `ssl.client.auth=required` listeners accept it, as
//!   Kafka's brokers present theirs). `ssl.endpoint.identification.algorithm` (default `https`:
//!   the certificate must name the host connected to; empty: not checked, the chain still is).
//!   `ssl.enabled.protocols` and `ssl.cipher.suites` as on the server side.
//! - SASL_PLAINTEXT and SASL_SSL: the mechanism is `sasl.mechanism.controller.protocol` (to
//!   controllers) or `sasl.mechanism.inter.broker.protocol` (to brokers), Kafka's default GSSAPI
//!   refused at start; the credentials are the `username` / `password` options of the
//!   mechanism's JAAS line (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else
//!   `sasl.jaas.config`: the same line that lists a PLAIN listener's users). PLAIN,
//!   SCRAM-SHA-256, SCRAM-SHA-512, and OAUTHBEARER with Kafka's unsecured login tokens
//!   (`unsecuredLoginStringClaim_sub`, `unsecuredLoginLifetimeSeconds`). The exchange itself runs
//!   on the connection (`node/client.rs`).
//!
//! Invariants: a configuration that cannot work fails the start, naming the property; no
//! password or token appears in a `Debug` output, an error or a log line.
//! Tests: `tests/node_client.rs` (against the real binary's listeners).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use base64::Engine;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::{jaas, oauth, scram};
use crate::config::{listener_value, mechanism_value, security_protocol, Properties, SecurityProtocol};
use crate::security::stores::{self, keystore, truststore};

/// How this node logs in on a SASL listener.
#[derive(Clone)]
pub enum Login {
    Plain {
        user: String,
        password: String,
    },
    Scram {
        mechanism: scram::Mechanism,
        user: String,
        password: String,
    },
    /// Kafka's unsecured OAUTHBEARER login (development only): a token of these claims.
    OAuthUnsecured {
        subject: String,
        lifetime_s: u64,
    },
}

impl Login {
    /// The mechanism's name in SaslHandshake.
    pub fn mechanism(&self) -> &'static str {
        match self {
            Login::Plain { .. } => super::sasl::PLAIN,
            Login::Scram { mechanism, .. } => mechanism.name(),
            Login::OAuthUnsecured { .. } => oauth::MECHANISM,
        }
    }

    /// OAUTHBEARER's client-first message: `n,,` then `auth=Bearer <token>` between ^A's, the
    /// token an unsecured JWS (`{"alg":"none"}`, the claims, an empty signature).
    pub fn oauth_message(subject: &str, lifetime_s: u64, now_ms: i64) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let iat_s = now_ms as f64 / 1000.0;
        let claims = serde_json::json!({ "sub": subject, "iat": iat_s, "exp": iat_s + lifetime_s as f64 });
        let token = format!("{}.{}.", b64.encode(br#"{"alg":"none"}"#), b64.encode(claims.to_string()));
        format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Login::Plain { user, .. } => write!(f, "PLAIN as {user}"),
            Login::Scram { mechanism, user, .. } => write!(f, "{} as {user}", mechanism.name()),
            Login::OAuthUnsecured { subject, .. } => write!(f, "OAUTHBEARER (unsecured) as {subject}"),
        }
    }
}

/// What a connection to a listener needs: TLS, a SASL login, both or neither.
#[derive(Clone)]
pub struct ClientSecurity {
    pub listener: String,
    pub protocol: SecurityProtocol,
    tls: Option<Arc<ClientConfig>>,
    pub login: Option<Login>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("listener", &self.listener)
            .field("protocol", &self.protocol)
            .field("login", &self.login)
            .finish()
    }
}

impl ClientSecurity {
    /// PLAINTEXT: a bare TCP connection.
    pub fn plaintext() -> Arc<ClientSecurity> {
        Arc::new(ClientSecurity {
            listener: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            login: None,
        })
    }

    /// A client of `listener` whose SASL mechanism (when the listener is SASL) is named by
    /// `mechanism_key` (`sasl.mechanism.controller.protocol` or
    /// `sasl.mechanism.inter.broker.protocol`).
    pub fn for_listener(props: &Properties, listener: &str, mechanism_key: &str) -> anyhow::Result<Arc<Self>> {
        let protocol = security_protocol(props, listener);
        let tls = match protocol {
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                Some(client_config(props, listener).with_context(|| format!("connecting to listener {listener}"))?)
            }
            SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
        };
        let login = match protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => Some(login(props, listener, mechanism_key)?),
            SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
        };
        Ok(Arc::new(ClientSecurity { listener: listener.to_string(), protocol, tls, login }))
    }

    /// The TLS connector, for SSL and SASL_SSL.
    pub fn tls(&self) -> Option<tokio_rustls::TlsConnector> {
        self.tls.clone().map(tokio_rustls::TlsConnector::from)
    }
}

/// The login for `listener`: the mechanism `mechanism_key` names, the credentials of its JAAS line.
fn login(props: &Properties, listener: &str, mechanism_key: &str) -> anyhow::Result<Login> {
    let mechanism = props.get(mechanism_key).map_or("GSSAPI", |m| m.trim());
    let Some(jaas_text) = mechanism_value(props, listener, mechanism, "sasl.jaas.config").map(|(_, v)| v) else {
        let key = crate::config::listener_key(listener, &format!("{}.sasl.jaas.config", mechanism.to_lowercase()));
        bail!("listener {listener} is SASL and {mechanism_key}={mechanism}: set {key} with this node's own login");
    };
    let entry = jaas::parse_single(jaas_text).map_err(|e| anyhow!("{mechanism}'s sasl.jaas.config: {e}"))?;
    let option = |name: &str| entry.options.get(name).cloned();
    let credentials = || -> anyhow::Result<(String, String)> {
        match (option("username"), option("password")) {
            (Some(user), Some(password)) => Ok((user, password)),
            _ => bail!(
                "listener {listener}: {mechanism}'s sasl.jaas.config has no username and password options \
                 (this node's own login for {mechanism_key})"
            ),
        }
    };
    if mechanism == super::sasl::PLAIN {
        let (user, password) = credentials()?;
        return Ok(Login::Plain { user, password });
    }
    if let Some(m) = scram::Mechanism::from_name(mechanism) {
        let (user, password) = credentials()?;
        return Ok(Login::Scram { mechanism: m, user, password });
    }
    if mechanism == oauth::MECHANISM {
        if props.contains_key("sasl.oauthbearer.token.endpoint.url") {
            bail!("{mechanism_key}=OAUTHBEARER: Ketch's own logins use unsecured tokens only (no sasl.oauthbearer.token.endpoint.url)");
        }
        let subject = option("unsecuredLoginStringClaim_sub").ok_or_else(|| {
            anyhow!("listener {listener}: OAUTHBEARER's sasl.jaas.config needs unsecuredLoginStringClaim_sub (this node's own login)")
        })?;
        let lifetime_s = match option("unsecuredLoginLifetimeSeconds") {
            Some(v) => v.trim().parse().map_err(|_| anyhow!("unsecuredLoginLifetimeSeconds={v}: not a number"))?,
            None => 3600,
        };
        return Ok(Login::OAuthUnsecured { subject, lifetime_s });
    }
    bail!("{mechanism_key}={mechanism}: Ketch logs in with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
}

/// The TLS client configuration for `listener`.
fn client_config(props: &Properties, listener: &str) -> anyhow::Result<Arc<ClientConfig>> {
    let (provider, versions) = stores::crypto(props, listener)?;
    let mut roots = RootCertStore::empty();
    match truststore(props, listener)? {
        Some(trusted) => {
            for cert in trusted {
                roots.add(cert).context("ssl.truststore: a certificate is not usable as a trust anchor")?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build()?;
    let check_names = listener_value(props, listener, "ssl.endpoint.identification.algorithm")
        .is_none_or(|(_, v)| !v.trim().is_empty());
    let builder = ClientConfig::builder_with_provider(provider).with_protocol_versions(&versions)?;
    let builder = match check_names {
        true => builder.with_webpki_verifier(verifier),
        false => builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyName(verifier))),
    };
    let has_keystore = ["ssl.keystore.location", "ssl.keystore.key"]
        .iter()
        .any(|k| listener_value(props, listener, k).is_some_and(|(_, v)| !v.trim().is_empty()));
    let config = match has_keystore {
        true => {
            let (chain, key) = keystore(props, listener)?;
            builder
                .with_client_auth_cert(chain, key)
                .context("the keystore's key is unusable as a client certificate")?
        }
        false => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain is verified, the name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(NotValidForName | NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
