//! Producer ids and, later, the transaction coordinator (issue 4). Today: the producer id
//! allocator behind InitProducerId for idempotent (non-transactional) producers.

pub mod producer_ids;
