//! `ssl.principal.mapping.rules`: how an SSL client's certificate subject becomes its principal's
//! name, as Kafka's `SslPrincipalMapper`.
//!
//! The value is a comma-separated list of rules, tried in order on the subject (RFC 2253, as
//! `tls::principal` writes it); the first that applies names the principal:
//! - `DEFAULT`: the subject itself (Kafka's default value);
//! - `RULE:<pattern>/<replacement>/[L|U]`: when the pattern matches the whole subject, every match
//!   of it is replaced by the replacement (`$1`... for groups, as Java's `replaceAll`; a group
//!   number past the pattern's groups is literal text, as Kafka does), then lowered (`L`) or
//!   uppercased (`U`). A pattern may hold commas; `\/` and `\\` escape.
//!
//! When no rule applies the client cannot be named, and Kafka refuses the connection: so does
//! Ketch. Patterns are Rust `regex` syntax, which is Java's for what such rules use (classes,
//! groups, anchors, lazy and greedy repeats); a pattern that does not compile (back-references,
//! look-around) fails the start naming the rule.
//!
//! Invariants: parsing never panics; a rule is applied in time linear in the subject (no
//! backtracking regex engine).

use anyhow::{anyhow, bail};
use regex::Regex;

/// One parsed rule.
#[derive(Debug)]
enum Rule {
    Default,
    Replace { whole: Regex, pattern: Regex, replacement: String, case: Case },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A listener's parsed `ssl.principal.mapping.rules`.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        PrincipalMapper { rules: vec![Rule::Default] }
    }
}

/// Splits the value into rules: commas end a rule except inside a RULE's pattern or replacement
/// (Kafka's splitter lets `RULE:` sections run to their closing slashes).
fn split(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = value.trim();
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(body) = rest.strip_prefix("RULE:") {
            // pattern / replacement / flags: the first two sections end at unescaped slashes.
            let mut end = 0;
            let mut slashes = 0;
            let bytes = body.as_bytes();
            while end < bytes.len() && slashes < 2 {
                match bytes[end] {
                    b'\\' => end += 2,
                    b'/' => {
                        slashes += 1;
                        end += 1
                    }
                    _ => end += 1,
                }
            }
            if slashes < 2 {
                return Err(format!("Invalid rule: RULE:{body}"));
            }
            let end = end.min(bytes.len());
            // Flags, then anything up to the next comma (Kafka ignores it).
            let tail_end = body[end..].find(',').map(|i| end + i).unwrap_or(body.len());
            out.push(format!("RULE:{}", body[..tail_end].trim_end()));
            rest = body[tail_end..].strip_prefix(',').unwrap_or(&body[tail_end..]);
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            out.push(rest[..end].trim().to_string());
            rest = rest[end..].strip_prefix(',').unwrap_or("");
        }
    }
    Ok(out)
}

/// Java's replacement text (`$n`, `${name}`, `\x`) as `regex`'s, for a pattern of `groups`
/// capture groups; a `$n` past them stays literal (Kafka's `escapeLiteralBackReferences`).
fn replacement(java: &str, groups: usize) -> String {
    let chars: Vec<char> = java.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                match chars[i + 1] {
                    '$' => out.push_str("$$"),
                    c => out.push(c),
                }
                i += 2;
            }
            '$' if chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) => {
                let mut n = chars[i + 1].to_digit(10).expect("a digit") as usize;
                let mut j = i + 2;
                if n > groups {
                    out.push_str("$$");
                    i += 1;
                    continue;
                }
                while let Some(d) = chars.get(j).and_then(|c| c.to_digit(10)) {
                    let next = n * 10 + d as usize;
                    if next > groups {
                        break;
                    }
                    n = next;
                    j += 1;
                }
                out.push_str(&format!("${{{n}}}"));
                i = j;
            }
            '$' if chars.get(i + 1) == Some(&'{') => {
                let close = chars[i..].iter().position(|c| *c == '}').map(|p| i + p);
                match close {
                    Some(close) => {
                        out.extend(&chars[i..=close]);
                        i = close + 1;
                    }
                    None => {
                        out.push_str("$$");
                        i += 1;
                    }
                }
            }
            '$' => {
                out.push_str("$$");
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

impl PrincipalMapper {
    /// Parses a value of `ssl.principal.mapping.rules`.
    pub fn parse(value: &str) -> anyhow::Result<PrincipalMapper> {
        let mut rules = Vec::new();
        for text in split(value).map_err(|e| anyhow!(e))? {
            if text.is_empty() {
                continue; // empty rules are ignored
            }
            if text == "DEFAULT" {
                rules.push(Rule::Default);
                continue;
            }
            let Some(body) = text.strip_prefix("RULE:") else { bail!("Invalid rule: {text}") };
            let mut sections = Vec::new();
            let mut current = String::new();
            let mut chars = body.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' if sections.len() < 2 => {
                        let next = chars.next().unwrap_or('\\');
                        // `\/` is a slash; other escapes stay for the regex / replacement.
                        if next != '/' {
                            current.push('\\');
                        }
                        current.push(next);
                    }
                    '/' if sections.len() < 2 => sections.push(std::mem::take(&mut current)),
                    c => current.push(c),
                }
            }
            let flags = current.trim();
            let case = match flags.chars().next() {
                Some('L') => Case::Lower,
                Some('U') => Case::Upper,
                _ => Case::Keep,
            };
            let [pattern, java_replacement] =
                <[String; 2]>::try_from(sections).map_err(|_| anyhow!("Invalid rule: {text}"))?;
            let compiled =
                Regex::new(&pattern).map_err(|e| anyhow!("rule {text}: the pattern does not compile: {e}"))?;
            let whole = Regex::new(&format!("^(?:{pattern})$")).expect("compiles as its part did");
            let replacement = replacement(&java_replacement, compiled.captures_len() - 1);
            rules.push(Rule::Replace { whole, pattern: compiled, replacement, case });
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal's name for the certificate subject `dn`, or None when no rule applies.
    pub fn name(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_string()),
            Rule::Replace { whole, pattern, replacement, case } => {
                if !whole.is_match(dn) {
                    return None;
                }
                let out = pattern.replace_all(dn, replacement.as_str()).into_owned();
                Some(match case {
                    Case::Keep => out,
                    Case::Lower => out.to_lowercase(),
                    Case::Upper => out.to_uppercase(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    //! Cases from Kafka's documentation of `ssl.principal.mapping.rules`.
    use super::*;

    fn map(rules: &str, dn: &str) -> Option<String> {
        PrincipalMapper::parse(rules).unwrap().name(dn)
    }

    #[test]
    fn kafka_documented_rules() {
        let rules = r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT";
        assert_eq!(
            map(rules, "CN=kafka-broker,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown").as_deref(),
            Some("kafka-broker")
        );
        assert_eq!(
            map(rules, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US").as_deref(),
            Some("duke@javasoft")
        );
        assert_eq!(map(rules, "OU=x,cn=Svc.Account,O=y").as_deref(), Some("svc.account"));
        assert_eq!(map(rules, "O=nothing").as_deref(), Some("O=nothing"));
        assert_eq!(map("RULE:^CN=([^,]+)$/$1/U", "CN=alice").as_deref(), Some("ALICE"));
        // No DEFAULT: a subject no rule matches gets no name.
        assert_eq!(map("RULE:^CN=([^,]+)$/$1/", "CN=a,O=b"), None);
        // A group past the pattern's is literal; \/ is a slash; $12 with one group is $1 then 2.
        assert_eq!(map(r"RULE:^CN=(.*)$/$1@$2/", "CN=x").as_deref(), Some("x@$2"));
        assert_eq!(map(r"RULE:^CN=(.*)$/$12/", "CN=x").as_deref(), Some("x2"));
        assert_eq!(map(r"RULE:^CN=a\/b$/slash/", "CN=a/b").as_deref(), Some("slash"));
        assert_eq!(map("", "CN=x"), None);
        assert_eq!(map(" DEFAULT ", "CN=x").as_deref(), Some("CN=x"));
        assert!(PrincipalMapper::parse("RULE:^CN=(.*)$").is_err());
        assert!(PrincipalMapper::parse("BOGUS").is_err());
        assert!(PrincipalMapper::parse(r"RULE:(a)\1/x/").is_err());
    }
}
