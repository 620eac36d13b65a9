//! JAAS configuration text as Kafka brokers take it in `sasl.jaas.config` properties
//! (`listener.name.<listener>.<mechanism>.sasl.jaas.config`):
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
//! ```
//!
//! Owns the parsing only (Kafka's `JaasConfig`, a `StreamTokenizer` grammar): a login module
//! class, a control flag (required, requisite, sufficient, optional), options `key=value` with
//! the value quoted (`"..."` or `'...'`, backslash escapes) or bare, a `;` ending each module;
//! `//` and `/* */` comments. Invariants: a malformed text is an error naming what is wrong,
//! never a panic; a `sasl.jaas.config` property holds exactly one login module, as Kafka requires.

use std::collections::BTreeMap;

/// One login module entry. Its `Debug` shows the options' names, not their values (passwords,
/// PLAIN users' passwords: Kafka takes a whole `sasl.jaas.config` for a password).
#[derive(Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for LoginModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginModule")
            .field("class", &self.class)
            .field("flag", &self.flag)
            .field("options", &super::redact::Keys(&self.options))
            .finish()
    }
}

/// A token of the JAAS text (no `Debug`: a word or a quoted string may be a password).
#[derive(Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Eq,
    Semi,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            loop {
                if i + 1 >= chars.len() {
                    return Err("unterminated /* comment".into());
                }
                if chars[i] == '*' && chars[i + 1] == '/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
        } else if c == '=' {
            out.push(Token::Eq);
            i += 1;
        } else if c == ';' {
            out.push(Token::Semi);
            i += 1;
        } else if c == '"' || c == '\'' {
            let quote = c;
            let mut value = String::new();
            i += 1;
            loop {
                let Some(&ch) = chars.get(i) else { return Err(format!("unterminated quoted value {quote}{value}")) };
                i += 1;
                if ch == quote {
                    break;
                }
                if ch == '\\' {
                    let Some(&next) = chars.get(i) else { return Err("unterminated escape".into()) };
                    i += 1;
                    value.push(match next {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                } else {
                    value.push(ch);
                }
            }
            out.push(Token::Quoted(value));
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() && !matches!(chars[i], '=' | ';' | '"' | '\'') {
                i += 1;
            }
            out.push(Token::Word(chars[start..i].iter().collect()));
        }
    }
    Ok(out)
}

/// Parses every login module of `text`.
pub fn parse(text: &str) -> Result<Vec<LoginModule>, String> {
    let tokens = tokenize(text)?;
    let mut modules = Vec::new();
    let mut it = tokens.into_iter().peekable();
    while let Some(token) = it.next() {
        let Token::Word(class) = token else { return Err("login module class name expected".into()) };
        let flag = match it.next() {
            Some(Token::Word(f))
                if ["required", "requisite", "sufficient", "optional"].contains(&f.to_lowercase().as_str()) =>
            {
                f.to_lowercase()
            }
            Some(Token::Word(f)) => return Err(format!("Invalid login module control flag '{f}' in JAAS config")),
            _ => return Err(format!("login module control flag not specified in JAAS config for {class}")),
        };
        let mut options = BTreeMap::new();
        loop {
            match it.next() {
                Some(Token::Semi) => break,
                Some(Token::Word(key)) => {
                    if it.next() != Some(Token::Eq) {
                        return Err(format!("Value not specified for key '{key}' in JAAS config"));
                    }
                    let value = match it.next() {
                        Some(Token::Word(v)) | Some(Token::Quoted(v)) => v,
                        _ => return Err(format!("Value not specified for key '{key}' in JAAS config")),
                    };
                    options.insert(key, value);
                }
                None => return Err("JAAS config entry not terminated by semi-colon".into()),
                Some(_) => return Err(format!("option name expected in JAAS config for {class}")),
            }
        }
        modules.push(LoginModule { class, flag, options });
    }
    Ok(modules)
}

/// A `sasl.jaas.config` value: exactly one login module (Kafka's rule for the property).
pub fn parse_single(text: &str) -> Result<LoginModule, String> {
    let mut modules = parse(text)?;
    if modules.len() != 1 {
        return Err(format!("JAAS config property contains {} login modules, should be 1 module", modules.len()));
    }
    Ok(modules.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_login_module_with_users() {
        let m = parse_single(
            "org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=\"admin\" password='admin-secret' /* broker */\n  user_admin=\"admin-secret\" // the admin\n  user_alice=\"a \\\"quoted\\\" secret\" user_bob=bob-secret;",
        )
        .unwrap();
        assert_eq!(m.class, "org.apache.kafka.common.security.plain.PlainLoginModule");
        assert_eq!(m.flag, "required");
        assert_eq!(m.options["user_alice"], "a \"quoted\" secret");
        assert_eq!(m.options["user_bob"], "bob-secret");
        assert_eq!(m.options["password"], "admin-secret");
        assert_eq!(m.options.len(), 5);
        let scram = parse_single("org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED;").unwrap();
        assert!(scram.options.is_empty());
        assert_eq!(scram.flag, "required");
    }

    #[test]
    fn malformed_texts_are_errors() {
        for bad in [
            "",
            "Module required user_a=\"x\"",
            "Module required user_a=;",
            "Module required user_a;",
            "Module mandatory;",
            "Module;",
            "Module required user_a=\"unterminated;",
            "A required; B required;",
            "Module required /* open;",
            "= required;",
        ] {
            assert!(parse_single(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(parse("A required; B optional x=1;").unwrap().len(), 2);
    }
}
