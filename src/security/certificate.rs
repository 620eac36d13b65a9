//! X.509 certificates read as Java reads them: the subject as RFC 2253 (`X500Principal.getName()`,
//! the name `ssl.principal.mapping.rules` apply to) and the subject alternative names (what
//! Kafka compares when a keystore is replaced). A minimal DER walk, bounded by its input: a
//! malformed certificate gives `None`, never a panic.

/// One DER element: (tag, content, rest).
pub fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subject of an X.509 certificate (DER) as RFC 2253.
pub fn subject_rfc2253(cert: &[u8]) -> Option<String> {
    let (_, cert, _) = der(cert)?;
    let (_, mut tbs, _) = der(cert)?;
    let mut element = der(tbs)?;
    if element.0 == 0xa0 {
        tbs = element.2; // explicit version
        element = der(tbs)?;
    }
    // serial, signature, issuer, validity, then the subject
    for _ in 0..4 {
        element = der(element.2)?;
    }
    let (_, mut rdns, _) = element;
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (_, mut set, rest) = der(rdns)?;
        rdns = rest;
        let mut avas = Vec::new();
        while !set.is_empty() {
            let (_, ava, rest) = der(set)?;
            set = rest;
            let (_, oid, value) = der(ava)?;
            let (vtag, vcontent, _) = der(value)?;
            let name = attribute_name(oid);
            let text = match vtag {
                0x0c | 0x13 | 0x16 | 0x14 | 0x1a => Some(String::from_utf8_lossy(vcontent).into_owned()),
                _ => None,
            };
            avas.push(match (text, name.1) {
                (Some(t), true) => format!("{}={}", name.0, escape(&t)),
                _ => format!("{}=#{}", name.0, value.iter().map(|b| format!("{b:02x}")).collect::<String>()),
            });
        }
        parts.push(avas.join("+"));
    }
    parts.reverse();
    Some(parts.join(","))
}

/// The RFC 2253 keyword of an attribute type, and whether its value is shown as a string (Java
/// shows the values of types it has no keyword for as `#` + hex of their DER).
fn attribute_name(oid: &[u8]) -> (String, bool) {
    let keyword = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "STREET",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        _ => return (dotted(oid), false),
    };
    (keyword.to_string(), true)
}

fn dotted(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc = 0u64;
    for &b in oid {
        acc = (acc << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
        }
    }
    arcs.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::new();
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subject alternative names of a certificate (DER): each GeneralName as its DER bytes,
/// sorted; empty when it has none. `None` when the certificate does not parse.
pub fn subject_alt_names(cert: &[u8]) -> Option<Vec<Vec<u8>>> {
    const SAN_OID: &[u8] = &[0x55, 0x1d, 0x11]; // 2.5.29.17
    let (_, cert, _) = der(cert)?;
    let (_, tbs, _) = der(cert)?;
    let mut rest = tbs;
    let mut names = Vec::new();
    while !rest.is_empty() {
        let (tag, content, next) = der(rest)?;
        rest = next;
        if tag != 0xa3 {
            continue; // version, serial, ..., subjectPublicKeyInfo, unique ids
        }
        let (_, mut extensions, _) = der(content)?;
        while !extensions.is_empty() {
            let (_, extension, next) = der(extensions)?;
            extensions = next;
            let (_, oid, mut fields) = der(extension)?;
            if oid != SAN_OID {
                continue;
            }
            let mut value = None;
            while !fields.is_empty() {
                let (tag, content, next) = der(fields)?;
                fields = next;
                if tag == 0x04 {
                    value = Some(content); // the OCTET STRING after an optional `critical`
                }
            }
            let (_, mut general_names, _) = der(value?)?;
            while !general_names.is_empty() {
                let (_, _, next) = der(general_names)?;
                names.push(general_names[..general_names.len() - next.len()].to_vec());
                general_names = next;
            }
        }
    }
    names.sort();
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_alternative_names() {
        assert_eq!(dotted(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]), "1.2.840.113549.1.9.1");
        let mut params = rcgen::CertificateParams::new(vec!["b.example".into(), "a.example".into()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "broker");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(subject_rfc2253(cert.der()).unwrap(), "CN=broker");
        let sans = subject_alt_names(cert.der()).unwrap();
        assert_eq!(sans.len(), 2);
        let one = rcgen::CertificateParams::new(vec!["a.example".into()]).unwrap().self_signed(&key).unwrap();
        let fewer = subject_alt_names(one.der()).unwrap();
        assert!(fewer.iter().all(|n| sans.contains(n)) && !sans.iter().all(|n| fewer.contains(n)));
        assert_eq!(subject_rfc2253(&cert.der()[..40]), None);
        assert_eq!(subject_alt_names(b"\x30\x82"), None);
    }
}
