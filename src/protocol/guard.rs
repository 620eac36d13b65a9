//! TEMPORARY STUB: replaced by the schema-driven guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError { Truncated }
impl std::fmt::Display for GuardError { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { write!(f, "{self:?}") } }
impl std::error::Error for GuardError {}
pub fn check_request(_frame: &[u8]) -> Result<(), GuardError> { Ok(()) }
