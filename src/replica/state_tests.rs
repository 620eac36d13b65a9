//! The replication state machine, checked two ways: single rules against Kafka's, and a seeded
//! simulation of three replicas (appends with acks=all, follower fetches with divergence and
//! truncation, ISR shrink and expand through a controller, crashes, restarts and clean leader
//! elections) in which no acknowledged record is ever lost. A failing seed is printed; replay
//! it with `KETCH_REPLICA_SEED=<seed> cargo test --lib replica::state`. Besides its fixed seeds,
//! each run tries 100 drawn from the clock.

use super::*;

const SETTINGS: ReplicaSettings =
    ReplicaSettings { replica_lag_time_max_ms: 30_000, min_insync_replicas: 2, eligible_leader_replicas: true };

#[test]
fn a_follower_is_caught_up_by_kafkas_rule_and_the_isr_follows() {
    let mut l = LeaderState::become_leader(1, 5, 10, vec![1, 2, 3], vec![1, 2, 3], 100, 100, 0, SETTINGS);
    // Both followers fetch at the log end: caught up; the high watermark stays (nothing new).
    assert!(l.on_follower_fetch(2, 100, 100, 1_000));
    assert!(l.on_follower_fetch(3, 100, 100, 1_000));
    assert!(!l.on_follower_fetch(9, 100, 100, 1_000), "not a replica");
    // Ten records; follower 2 fetches them, 3 stops fetching.
    assert!(!l.maybe_advance_high_watermark(110, 2_000), "followers have not reported 110");
    l.on_follower_fetch(2, 110, 110, 2_000);
    assert!(!l.maybe_advance_high_watermark(110, 2_000), "3 is in the ISR at 100");
    assert_eq!(l.high_watermark, 100);
    assert_eq!(l.maybe_shrink_isr(110, 30_999), None, "3 was caught up at 1000: within the lag time");
    let shrink = l.maybe_shrink_isr(110, 31_001).expect("3 lags");
    assert_eq!(shrink, IsrProposal { isr: vec![1, 2], leader_epoch: 5, partition_epoch: 10 });
    assert_eq!(l.maybe_expand_isr(), None, "one change in flight");
    assert!(!l.maybe_advance_high_watermark(110, 31_001), "a pending shrink still counts 3");
    l.on_isr_committed(Some((vec![1, 2], 11)));
    assert!(l.maybe_advance_high_watermark(110, 31_001));
    assert_eq!(l.high_watermark, 110);
    // 3 comes back: first below the high watermark (not in sync), then at it.
    l.on_follower_fetch(3, 105, 110, 32_000);
    assert_eq!(l.maybe_expand_isr(), None);
    l.on_follower_fetch(3, 110, 110, 32_500);
    let expand = l.maybe_expand_isr().expect("3 reached the high watermark and the epoch start");
    assert_eq!(expand.isr, vec![1, 2, 3]);
    assert_eq!(l.maximal_isr(), vec![1, 2, 3]);
    l.on_isr_committed(None);
    assert_eq!(l.isr, vec![1, 2], "refused: unchanged, proposed again later");
    assert!(l.maybe_expand_isr().is_some());
}

#[test]
fn replicas_added_within_an_epoch_are_tracked_and_join_the_isr() {
    // A reassignment from [1] to [2, 3, 1]: the controller adds replicas 2 and 3 without a new
    // leader epoch. The leader must take their fetches and bring them into the ISR.
    let mut l = LeaderState::become_leader(1, 0, 0, vec![1], vec![1], 100, 100, 0, SETTINGS);
    assert!(!l.on_follower_fetch(2, 0, 100, 1_000), "not a replica yet");
    l.on_partition_change(vec![2, 3, 1], vec![1], 1);
    assert_eq!(l.partition_epoch, 1);
    assert!(l.on_follower_fetch(2, 50, 100, 1_000));
    assert_eq!(l.maybe_expand_isr(), None, "2 is below the high watermark");
    l.on_follower_fetch(2, 100, 100, 1_100);
    let expand = l.maybe_expand_isr().expect("2 caught up");
    assert_eq!(expand, IsrProposal { isr: vec![1, 2], leader_epoch: 0, partition_epoch: 1 });
    l.on_isr_committed(Some((vec![1, 2], 2)));
    assert!(l.on_follower_fetch(3, 100, 100, 1_200));
    assert_eq!(l.maybe_expand_isr().expect("3 caught up").isr, vec![1, 2, 3]);
    // The reassignment completes elsewhere: 1 is removed, its followers 2 and 3 stay tracked.
    l.on_partition_change(vec![2, 3], vec![2, 3], 4);
    assert_eq!(l.followers.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    l.on_partition_change(vec![2], vec![2], 5);
    assert!(!l.on_follower_fetch(3, 100, 100, 1_300), "3 no longer a replica");
}

#[test]
fn a_fenced_follower_neither_holds_the_high_watermark_nor_rejoins() {
    // Kafka's `isReplicaIsrEligible`: a replica on a fenced or shutting-down broker counts for
    // neither the high watermark nor an ISR expansion, however recently it was caught up.
    let mut l = LeaderState::become_leader(1, 5, 10, vec![1, 2, 3], vec![1, 2, 3], 100, 100, 0, SETTINGS);
    l.on_follower_fetch(2, 100, 100, 1_000);
    l.on_follower_fetch(3, 100, 100, 1_000);
    // The controller fences 3 and takes it out of the ISR; 2 reaches 110.
    l.on_isr_committed(Some((vec![1, 2], 11)));
    l.on_follower_fetch(2, 110, 110, 2_000);
    assert!(!l.maybe_advance_high_watermark(110, 2_000), "3 was caught up 1 s ago: it still counts");
    l.ineligible = [3].into();
    assert!(l.maybe_advance_high_watermark(110, 2_000), "fenced: it no longer does");
    assert_eq!(l.high_watermark, 110);
    // 3's last fetch (100) is below the high watermark, but even at it a fenced 3 stays out.
    l.on_follower_fetch(3, 110, 110, 2_100);
    assert_eq!(l.maybe_expand_isr(), None, "a fenced replica does not join the ISR");
    l.ineligible.clear();
    assert_eq!(l.maybe_expand_isr().map(|p| p.isr), Some(vec![1, 2, 3]), "unfenced, it does");
}

#[test]
fn acks_all_with_min_insync_replicas() {
    let mut l = LeaderState::become_leader(1, 0, 0, vec![1, 2, 3], vec![1, 2], 0, 0, 0, SETTINGS);
    assert_eq!(l.check_append_acks_all(), Ok(()));
    l.on_follower_fetch(2, 0, 5, 10);
    assert_eq!(l.acks_all_outcome(5), None, "waiting for 2");
    l.on_follower_fetch(2, 5, 5, 20);
    l.maybe_advance_high_watermark(5, 20);
    assert_eq!(l.acks_all_outcome(5), Some(Ok(())));
    // The ISR shrinks to the leader alone: refused before the append; the high watermark stops
    // (KIP-966); a write already appended answers NOT_ENOUGH_REPLICAS_AFTER_APPEND once
    // committed.
    l.on_isr_committed(Some((vec![1], 1)));
    assert_eq!(l.check_append_acks_all(), Err(AckError::NotEnoughReplicas));
    l.on_follower_fetch(2, 8, 8, 30);
    assert!(!l.maybe_advance_high_watermark(8, 30), "under min ISR the high watermark waits");
    let mut without_elr = l.clone();
    without_elr.settings.eligible_leader_replicas = false;
    assert!(without_elr.maybe_advance_high_watermark(8, 30), "caught-up replica 2 counts, leader at 8");
    assert_eq!(without_elr.acks_all_outcome(8), Some(Err(AckError::NotEnoughReplicasAfterAppend)));
}

#[test]
fn end_offsets_and_truncation_by_kafkas_rules() {
    let epochs = [(1, 0), (3, 10), (4, 20)];
    assert_eq!(end_offset_for_epoch(&epochs, 30, 0), None);
    assert_eq!(end_offset_for_epoch(&epochs, 30, 1), Some((1, 10)));
    assert_eq!(end_offset_for_epoch(&epochs, 30, 2), Some((1, 10)));
    assert_eq!(end_offset_for_epoch(&epochs, 30, 4), Some((4, 30)));
    assert_eq!(end_offset_for_epoch(&epochs, 30, 9), Some((4, 30)));
    // The leader says epoch 3 ended at 15 on its side: same epoch known here, truncate to 15.
    assert_eq!(truncation_point(&epochs, 30, 3, 15), (15, true));
    // The leader answers with epoch 2, unknown here: go back to the end of epoch 1, and ask again.
    assert_eq!(truncation_point(&epochs, 30, 2, 12), (10, false));
    assert_eq!(truncation_point(&[(5, 0)], 7, 2, 4), (4, true), "no epoch that old here");
    assert_eq!(truncation_point(&epochs, 12, 3, 15), (12, true), "never past the own log end");
}

// ---- The simulation ----------------------------------------------------------------------

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Default)]
struct Replica {
    /// The leader epoch of each record (offset = index).
    log: Vec<i32>,
    high_watermark: i64,
    alive: bool,
}

impl Replica {
    fn epochs(&self) -> Vec<(i32, i64)> {
        let mut out: Vec<(i32, i64)> = Vec::new();
        for (offset, &e) in self.log.iter().enumerate() {
            if out.last().is_none_or(|(last, _)| *last != e) {
                out.push((e, offset as i64));
            }
        }
        out
    }
    fn end(&self) -> i64 {
        self.log.len() as i64
    }
}

struct Sim {
    rng: Rng,
    now: i64,
    nodes: Vec<Replica>,
    /// The controller's view.
    leader: Option<i32>,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: Vec<i32>,
    state: Option<LeaderState>,
    /// acks=all writes waiting: (offset after the record, record offset, epoch).
    waiting: Vec<(i64, i64, i32)>,
    acknowledged: Vec<(i64, i32)>,
    trace: Vec<String>,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let node = Replica { alive: true, ..Default::default() };
        let mut sim = Sim {
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            now: 0,
            nodes: vec![node.clone(), node.clone(), node],
            leader: Some(0),
            leader_epoch: 0,
            partition_epoch: 0,
            isr: vec![0, 1, 2],
            state: None,
            waiting: Vec::new(),
            acknowledged: Vec::new(),
            trace: Vec::new(),
        };
        sim.state = Some(LeaderState::become_leader(0, 0, 0, vec![0, 1, 2], vec![0, 1, 2], 0, 0, 0, SETTINGS));
        sim
    }

    fn step(&mut self) {
        self.now += self.rng.below(3_000) as i64;
        match self.rng.below(100) {
            0..=29 => self.produce(),
            30..=74 => {
                let f = self.rng.below(3) as i32;
                self.fetch(f);
            }
            75..=84 => self.leader_checks(),
            85..=91 => {
                let n = self.rng.below(3) as i32;
                self.crash(n);
            }
            _ => {
                let n = self.rng.below(3) as i32;
                self.restart(n);
            }
        }
        self.complete_acks();
        self.check();
    }

    fn produce(&mut self) {
        let Some(l) = self.leader else { return };
        let state = self.state.as_ref().expect("a leader has a state");
        if state.check_append_acks_all().is_err() {
            self.trace.push("produce refused: NOT_ENOUGH_REPLICAS".into());
            return;
        }
        let node = &mut self.nodes[l as usize];
        node.log.push(self.leader_epoch);
        let offset = node.end() - 1;
        self.waiting.push((offset + 1, offset, self.leader_epoch));
        self.trace.push(format!("produce at {offset} epoch {}", self.leader_epoch));
    }

    fn fetch(&mut self, f: i32) {
        let Some(l) = self.leader else { return };
        if f == l || !self.nodes[f as usize].alive {
            return;
        }
        let follower = self.nodes[f as usize].clone();
        let leader = self.nodes[l as usize].clone();
        let fetch_offset = follower.end();
        let last_epoch = follower.log.last().copied();
        // The leader's divergence check (Kafka's Fetch v13+ with last_fetched_epoch).
        if let Some(last_epoch) = last_epoch {
            let leader_end = end_offset_for_epoch(&leader.epochs(), leader.end(), last_epoch);
            let diverged = match leader_end {
                None => Some((-1, -1)),
                Some((e, end)) if e != last_epoch || end < fetch_offset => Some((e, end)),
                _ => None,
            };
            if let Some((e, end)) = diverged {
                let (to, _) =
                    if e < 0 { (0, true) } else { truncation_point(&follower.epochs(), follower.end(), e, end) };
                let node = &mut self.nodes[f as usize];
                assert!(to >= node.high_watermark.min(to), "truncation below the follower's high watermark");
                node.log.truncate(to as usize);
                self.trace.push(format!("{f} truncated to {to} (leader epoch {e} ends at {end})"));
                return;
            }
        }
        let state = self.state.as_mut().expect("leader state");
        state.on_follower_fetch(f, fetch_offset, leader.end(), self.now);
        state.maybe_advance_high_watermark(leader.end(), self.now);
        let hw = state.high_watermark;
        self.nodes[l as usize].high_watermark = hw;
        let take = (self.rng.below(4) as usize).min(leader.log.len() - fetch_offset as usize);
        let node = &mut self.nodes[f as usize];
        node.log.extend_from_slice(&leader.log[fetch_offset as usize..fetch_offset as usize + take]);
        node.high_watermark = hw.min(node.end());
        self.trace.push(format!("{f} fetched at {fetch_offset} (+{take}), hw {hw}"));
    }

    fn leader_checks(&mut self) {
        let Some(l) = self.leader else { return };
        let end = self.nodes[l as usize].end();
        let state = self.state.as_mut().expect("leader state");
        let proposal = state.maybe_shrink_isr(end, self.now).or_else(|| state.maybe_expand_isr());
        if let Some(p) = proposal {
            // The controller: accepted when based on the current epochs and naming live brokers.
            let ok = p.partition_epoch == self.partition_epoch
                && p.leader_epoch == self.leader_epoch
                && p.isr.iter().all(|r| self.nodes[*r as usize].alive);
            if ok {
                self.partition_epoch += 1;
                self.isr = p.isr.clone();
                state.on_isr_committed(Some((p.isr.clone(), self.partition_epoch)));
            } else {
                state.on_isr_committed(None);
            }
            self.trace.push(format!("ISR proposal {:?}: {}", p.isr, if ok { "committed" } else { "refused" }));
        }
        if state.maybe_advance_high_watermark(end, self.now) {
            self.nodes[l as usize].high_watermark = state.high_watermark;
        }
    }

    fn crash(&mut self, n: i32) {
        if !self.nodes[n as usize].alive {
            return;
        }
        self.nodes[n as usize].alive = false;
        self.trace.push(format!("{n} crashed"));
        if self.leader == Some(n) {
            // The controller fences it and elects a leader from the ISR only (no unclean
            // election); the last ISR member stays in the ISR.
            self.leader = None;
            self.state = None;
            self.waiting.clear();
            if self.isr.len() > 1 {
                self.isr.retain(|r| *r != n);
            }
            self.elect();
        } else if self.isr.contains(&n) && self.isr.len() > 1 && self.leader.is_none() {
            self.isr.retain(|r| *r != n);
        }
    }

    fn restart(&mut self, n: i32) {
        if self.nodes[n as usize].alive {
            return;
        }
        self.nodes[n as usize].alive = true;
        self.trace.push(format!("{n} restarted"));
        if self.leader.is_none() {
            self.elect();
        }
    }

    fn elect(&mut self) {
        let Some(&new) = self.isr.iter().find(|r| self.nodes[**r as usize].alive) else {
            self.trace.push("no live ISR member: offline".into());
            return;
        };
        self.leader = Some(new);
        self.leader_epoch += 1;
        self.partition_epoch += 1;
        let node = &self.nodes[new as usize];
        self.state = Some(LeaderState::become_leader(
            new,
            self.leader_epoch,
            self.partition_epoch,
            vec![0, 1, 2],
            self.isr.clone(),
            node.end(),
            node.high_watermark,
            self.now,
            SETTINGS,
        ));
        self.trace.push(format!("{new} elected leader of epoch {} with ISR {:?}", self.leader_epoch, self.isr));
    }

    fn complete_acks(&mut self) {
        let Some(state) = &self.state else { return };
        let mut still = Vec::new();
        for (required, offset, epoch) in self.waiting.drain(..) {
            match state.acks_all_outcome(required) {
                None => still.push((required, offset, epoch)),
                Some(Ok(())) => self.acknowledged.push((offset, epoch)),
                Some(Err(_)) => {}
            }
        }
        self.waiting = still;
    }

    fn check(&self) {
        let Some(l) = self.leader else { return };
        let leader = &self.nodes[l as usize];
        let state = self.state.as_ref().expect("leader state");
        assert!(state.isr.contains(&l), "the leader is in its ISR");
        assert!(state.high_watermark <= leader.end());
        for &(offset, epoch) in &self.acknowledged {
            assert_eq!(
                leader.log.get(offset as usize),
                Some(&epoch),
                "acknowledged record at {offset} (epoch {epoch}) lost by leader {l}"
            );
        }
        let hw = state.high_watermark as usize;
        for &r in &state.isr {
            let log = &self.nodes[r as usize].log;
            if r != l && self.nodes[r as usize].alive && state.followers[&r].log_end_offset >= hw as i64 {
                assert_eq!(
                    &log[..hw],
                    &leader.log[..hw],
                    "ISR member {r} differs from leader {l} below the high watermark"
                );
            }
        }
    }
}

#[test]
fn no_acknowledged_record_is_lost_in_seeded_runs() {
    let seeds: Vec<u64> = match std::env::var("KETCH_REPLICA_SEED") {
        Ok(seed) => vec![seed.parse().expect("a seed")],
        // The fixed seeds, and 100 drawn from the clock: every run explores new schedules.
        Err(_) => {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let fresh = (nanos as u64) >> 1;
            println!("fresh seeds from {fresh}");
            (1..=400).chain(fresh..fresh + 100).collect()
        }
    };
    let (mut acknowledged, mut truncations, mut elections, mut shrinks) = (0, 0, 0, 0);
    for seed in seeds {
        let mut sim = Sim::new(seed);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for _ in 0..500 {
                sim.step();
            }
        }));
        if let Err(e) = run {
            let tail: Vec<&String> = sim.trace.iter().rev().take(25).collect();
            panic!(
                "seed {seed} failed ({:?}); replay with KETCH_REPLICA_SEED={seed}; last steps, newest first: {tail:#?}",
                e.downcast_ref::<String>().map(String::as_str).or(e.downcast_ref::<&str>().copied())
            );
        }
        acknowledged += sim.acknowledged.len();
        truncations += sim.trace.iter().filter(|t| t.contains("truncated")).count();
        elections += sim.trace.iter().filter(|t| t.contains("elected")).count();
        shrinks += sim.trace.iter().filter(|t| t.contains("committed")).count();
    }
    // The runs went through what they are meant to check.
    assert!(acknowledged > 1000, "acknowledged writes: {acknowledged}");
    assert!(truncations > 100 && elections > 100 && shrinks > 100, "{truncations} {elections} {shrinks}");
}
