//! Client quota entities and their quotas: what Kafka's controller decides for an
//! AlterClientQuotas (`ClientQuotaControlManager`) and what a DescribeClientQuotas filter matches
//! (`ClientQuotasImage.describe`), with Kafka's checks and error texts, over a plain map.
//!
//! An entity names one or two of `user`, `client-id` (or only `ip`); a name of None is that
//! type's default (`--entity-default`, `<default>` in Kafka's tools). Invariants: every stored
//! value passed `check_value` for its key (a LONG / INT key holds an integral value > 0); an entity
//! with no quota left is not kept.

use std::collections::BTreeMap;
use std::fmt::Write;

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Entity type -> name (None: the default entity of that type).
pub type Entity = BTreeMap<String, Option<String>>;

/// Every entity's quotas (key -> value).
pub type Quotas = BTreeMap<Entity, BTreeMap<String, f64>>;

/// A refusal: Kafka's INVALID_REQUEST with its message (the only error these checks give).
pub type Refusal = String;

/// One entry of an AlterClientQuotas: the entity and its operations, each a key with a new
/// value or None to remove it.
#[derive(Clone, Debug, PartialEq)]
pub struct Alteration {
    pub entity: Entity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// One set or removal to store, as a ClientQuotaRecord says it.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub entity: Entity,
    pub key: String,
    pub value: Option<f64>,
}

/// What an AlterClientQuotas decides: the changes to store (all or none, as Kafka's
/// `ControllerResult.atomicOf`) and every entity's outcome, in request order.
#[derive(Debug, Default)]
pub struct Decision {
    pub changes: Vec<Change>,
    pub outcomes: Vec<(Entity, Result<(), Refusal>)>,
}

/// Decides an AlterClientQuotas against the `current` quotas, as Kafka's controller: an entity
/// whose ops name a key twice, or that appears twice, is refused ("Ignoring duplicate entity");
/// each other entity is checked whole and its
/// changes kept only if every op passes; unchanged values and removals of absent keys write
/// nothing.
pub fn decide(current: &Quotas, alterations: &[Alteration]) -> Decision {
    let mut decision = Decision::default();
    let mut outcome_of: BTreeMap<Entity, usize> = BTreeMap::new();
    for alteration in alterations {
        let mut ops: BTreeMap<&str, Option<f64>> = BTreeMap::new();
        // (Kafka records "Duplicate quota key ..." here, then replaces it with the message below.)
        let mut duplicate_key = false;
        for (key, value) in &alteration.ops {
            duplicate_key |= ops.insert(key, *value).is_some();
        }
        let seen = outcome_of.get(&alteration.entity).copied();
        if seen.is_some() || duplicate_key {
            // Kafka keeps one outcome per entity: a second mention replaces the first's outcome
            // (while the first's changes stay decided, as in Kafka).
            let refusal = format!("Ignoring duplicate entity {}", display(&alteration.entity));
            match seen {
                Some(i) => decision.outcomes[i].1 = Err(refusal),
                None => {
                    outcome_of.insert(alteration.entity.clone(), decision.outcomes.len());
                    decision.outcomes.push((alteration.entity.clone(), Err(refusal)));
                }
            }
            continue;
        }
        outcome_of.insert(alteration.entity.clone(), decision.outcomes.len());
        let outcome = decide_entity(current.get(&alteration.entity), &alteration.entity, &ops);
        let outcome = outcome.map(|changes| decision.changes.extend(changes));
        decision.outcomes.push((alteration.entity.clone(), outcome));
    }
    decision
}

fn decide_entity(
    current: Option<&BTreeMap<String, f64>>,
    entity: &Entity,
    ops: &BTreeMap<&str, Option<f64>>,
) -> Result<Vec<Change>, Refusal> {
    check_entity(entity)?;
    let mut changes = Vec::new();
    for (&key, &value) in ops {
        let existing = current.and_then(|c| c.get(key)).copied();
        match value {
            None if existing.is_some() => changes.push(Change { entity: entity.clone(), key: key.into(), value }),
            None => {}
            Some(v) => {
                check_value(entity, key, v)?;
                if existing != Some(v) {
                    changes.push(Change { entity: entity.clone(), key: key.into(), value });
                }
            }
        }
    }
    Ok(changes)
}

/// Kafka's `validateEntity` and `configKeysForEntityType`: known types, no empty name, IP alone.
fn check_entity(entity: &Entity) -> Result<(), Refusal> {
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    for (kind, name) in entity {
        if ![USER, CLIENT_ID, IP].contains(&kind.as_str()) {
            return Err(format!("Unhandled client quota entity type: {kind}"));
        }
        if name.as_deref() == Some("") {
            return Err(format!("Empty {kind} not supported"));
        }
    }
    if entity.contains_key(IP) && entity.len() > 1 {
        // (Kafka's message lacks the space, too.)
        return Err("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into());
    }
    if let Some(Some(ip)) = entity.get(IP) {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(format!("{ip} is not a valid IP or resolvable host."));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum KeyType {
    Long,
    Int,
    Double,
}

fn key_type(entity: &Entity, key: &str) -> Option<KeyType> {
    match entity.contains_key(IP) {
        true => (key == CONNECTION_CREATION_RATE).then_some(KeyType::Int),
        false => match key {
            PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE => Some(KeyType::Long),
            REQUEST_PERCENTAGE | CONTROLLER_MUTATION_RATE => Some(KeyType::Double),
            _ => None,
        },
    }
}

/// Kafka's `validateQuotaKeyValue`.
fn check_value(entity: &Entity, key: &str, value: f64) -> Result<(), Refusal> {
    let Some(kind) = key_type(entity, key) else { return Err(format!("Invalid configuration key {key}")) };
    // (`!(value > 0.0)` also refuses NaN, which Kafka's `value <= 0.0` lets through to fail later.)
    if value.is_nan() || value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    let too_large = match kind {
        KeyType::Double => return Ok(()),
        KeyType::Int => (value > i32::MAX as f64).then_some("an INT"),
        KeyType::Long => (value > i64::MAX as f64).then_some("a LONG"),
    };
    if let Some(what) = too_large {
        return Err(format!("Proposed value for {key} is too large for {what}."));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

/// Applies stored changes (replaying ClientQuotaRecords).
pub fn apply(quotas: &mut Quotas, changes: impl IntoIterator<Item = Change>) {
    for Change { entity, key, value } in changes {
        match value {
            Some(v) => {
                quotas.entry(entity).or_default().insert(key, v);
            }
            None => {
                if let Some(values) = quotas.get_mut(&entity) {
                    values.remove(&key);
                    if values.is_empty() {
                        quotas.remove(&entity);
                    }
                }
            }
        }
    }
}

/// How a DescribeClientQuotas component matches an entity type.
#[derive(Clone, Debug, PartialEq)]
pub enum Match {
    /// MATCH_TYPE_EXACT (0): this name.
    Exact(String),
    /// MATCH_TYPE_DEFAULT (1): the default entity.
    Default,
    /// MATCH_TYPE_SPECIFIED (2): any entity with this type.
    Specified,
}

/// A DescribeClientQuotas request's components, (entity type, match type, match), checked
/// as Kafka's `ClientQuotasImage.describe`: Err((is UNSUPPORTED_VERSION, message)), else
/// INVALID_REQUEST.
pub fn filter(components: &[(String, i8, Option<String>)]) -> Result<Vec<(String, Match)>, (bool, String)> {
    let mut out: Vec<(String, Match)> = Vec::new();
    for (kind, match_type, name) in components {
        if kind.is_empty() {
            return Err((false, "Invalid empty entity type.".into()));
        }
        if out.iter().any(|(k, _)| k == kind) {
            return Err((false, format!("Entity type {kind} cannot appear more than once in the filter.")));
        }
        if ![IP, USER, CLIENT_ID].contains(&kind.as_str()) {
            return Err((true, format!("Unsupported entity type {kind}")));
        }
        let m = match (match_type, name) {
            (0, Some(name)) => Match::Exact(name.clone()),
            (0, None) => {
                return Err((false, "Request specified MATCH_TYPE_EXACT, but set match string to null.".into()))
            }
            (1, None) => Match::Default,
            (1, Some(_)) => {
                return Err((false, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.".into()))
            }
            (2, None) => Match::Specified,
            (2, Some(_)) => {
                return Err((
                    false,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.".into(),
                ))
            }
            (other, _) => return Err((false, format!("Unknown match type {other}"))),
        };
        out.push((kind.clone(), m));
    }
    let has = |k: &str| out.iter().any(|(kind, _)| kind == k);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err((
            false,
            "Invalid entity filter component combination. IP filter component should not be used with user or \
             clientId filter component."
                .into(),
        ));
    }
    Ok(out)
}

/// Whether `entity` matches a checked filter (`strict`: it has no other entity type).
pub fn matches(entity: &Entity, filter: &[(String, Match)], strict: bool) -> bool {
    if strict && entity.len() != filter.len() {
        return false;
    }
    filter.iter().all(|(kind, m)| match (entity.get(kind), m) {
        (None, _) => false,
        (Some(_), Match::Specified) => true,
        (Some(None), Match::Default) => true,
        (Some(Some(name)), Match::Exact(wanted)) => name == wanted,
        _ => false,
    })
}

/// An entity as Kafka's `ClientQuotaEntity.toString` prints it (a Java HashMap of these keys
/// iterates ip, client-id, user).
pub fn display(entity: &Entity) -> String {
    let mut out = String::from("ClientQuotaEntity(entries={");
    let ordered = [IP, CLIENT_ID, USER].into_iter().filter_map(|k| entity.get_key_value(k));
    let others = entity.iter().filter(|(k, _)| ![IP, CLIENT_ID, USER].contains(&k.as_str()));
    for (i, (kind, name)) in ordered.chain(others).enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(out, "{sep}{kind}={}", name.as_deref().unwrap_or("null"));
    }
    out.push_str("})");
    out
}

#[cfg(test)]
#[path = "entity_tests.rs"]
mod tests;
