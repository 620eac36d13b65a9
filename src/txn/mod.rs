//! Producer ids and transactions: the producer id allocator (idempotent and transactional
//! producers) and the transaction coordinator with its `__transaction_state` topic.

pub mod coordinator;
pub mod markers;
pub mod ownership;
pub mod peers;
pub mod producer_ids;
pub mod records;
pub mod transitions;
