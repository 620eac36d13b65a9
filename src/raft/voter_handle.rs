//! The voter's request API (`VoterHandle`, for the controller's handlers and the controller):
//! Kafka 4.1's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot turned into the
//! driver's events and back, the observers the leader has seen fetch, and proposals. Each
//! request waits for the driver thread's answer; nothing here touches the core or the log.

use super::*;

impl VoterHandle {
    async fn ask(&self, from: NodeId, message: Message<Batch>, max_wait_ms: i32) -> Option<Reply> {
        let (reply, answer) = oneshot::channel();
        self.events.send(Event::Request { from, message, max_wait_ms, reply }).ok()?;
        answer.await.ok()
    }

    /// The leader and its endpoint, when both are known.
    fn leader_endpoint(&self) -> Option<(NodeId, Endpoint)> {
        let leader = self.status.borrow().leader?;
        self.voter_endpoint(leader).map(|e| (leader, e))
    }

    /// Voter `id`'s endpoint on the controller listener, as last known (configuration or log).
    pub fn voter_endpoint(&self, id: NodeId) -> Option<Endpoint> {
        endpoint_on(self.known.read().unwrap_or_else(|p| p.into_inner()).get(&id)?, self.settings.listener())
    }

    /// Voter `id`'s directory id, as last known (nil: unknown, a static quorum's voter).
    pub fn voter_directory_id(&self, id: NodeId) -> uuid::Uuid {
        let known = self.known.read().unwrap_or_else(|p| p.into_inner());
        known.get(&id).map_or(uuid::Uuid::nil(), |v| v.directory_id)
    }

    /// The voters in force and their endpoints (those known).
    pub fn voter_endpoints(&self) -> BTreeMap<NodeId, Endpoint> {
        let voters = self.status.borrow().voters.clone();
        // (Not an observer's bootstrap servers, under ids below 0.)
        voters.into_iter().filter(|id| *id >= 0).filter_map(|id| Some((id, self.voter_endpoint(id)?))).collect()
    }

    /// Asks the leader to change the voters (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter);
    /// answered once the change is committed, or refused with Kafka's error.
    /// A voter to add is first checked as the leader would now, then asked for its ApiVersions
    /// (Kafka's order: a duplicate voter is refused before anyone tries to reach it).
    pub async fn change_voters(&self, change: VoterChange) -> ChangeOutcome {
        let gone = || (ResponseError::UnknownServerError, "the metadata log's voter has stopped".to_string());
        if let VoterChange::Add(voter) = &change {
            let (reply, answer) = oneshot::channel();
            self.events.send(Event::CheckVoterChange { change: change.clone(), reply }).map_err(|_| gone())?;
            answer.await.map_err(|_| gone())??;
            super::changes::probe_new_voter(&self.settings, voter).await?;
        }
        let (reply, answer) = oneshot::channel();
        self.events.send(Event::ChangeVoters { change, reply }).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    pub async fn vote(&self, request: &VoteRequest) -> VoteResponse {
        match wire::vote_in(request, &self.settings.cluster_id) {
            Err(error) => wire::vote_out(None, 0, Some(error)),
            Ok((from, message)) => match self.ask(from, message, 0).await {
                Some(reply) => wire::vote_out(reply.message.as_ref(), reply.epoch, None),
                None => wire::vote_out(None, 0, Some(ResponseError::UnknownServerError)),
            },
        }
    }

    pub async fn begin_quorum_epoch(&self, request: &BeginQuorumEpochRequest) -> BeginQuorumEpochResponse {
        match wire::begin_in(request, &self.settings.cluster_id) {
            Err(error) => wire::begin_out(0, None, Some(error)),
            Ok((from, message)) => match self.ask(from, message, 0).await {
                Some(reply) => wire::begin_out(reply.epoch, reply.leader, None),
                None => wire::begin_out(0, None, Some(ResponseError::UnknownServerError)),
            },
        }
    }

    pub async fn end_quorum_epoch(&self, request: &EndQuorumEpochRequest) -> EndQuorumEpochResponse {
        use kafka_protocol::messages::end_quorum_epoch_response as r;
        let answer = match wire::end_in(request, &self.settings.cluster_id) {
            Err(error) => return EndQuorumEpochResponse::default().with_error_code(error.code()),
            Ok((from, message)) => self.ask(from, message, 0).await,
        };
        let Some(reply) = answer else {
            return EndQuorumEpochResponse::default().with_error_code(ResponseError::UnknownServerError.code());
        };
        let partition = r::PartitionData::default()
            .with_leader_id(reply.leader.unwrap_or(-1).into())
            .with_leader_epoch(reply.epoch);
        let topic = r::TopicData::default()
            .with_topic_name(kafka_protocol::messages::TopicName(super::super::METADATA_TOPIC_NAME.into()))
            .with_partitions(vec![partition]);
        EndQuorumEpochResponse::default().with_topics(vec![topic])
    }

    /// A Fetch of the metadata log by a voter or an observer.
    pub async fn fetch(&self, request: &FetchRequest) -> FetchResponse {
        match wire::fetch_in(request, &self.settings.cluster_id) {
            Err(error) => wire::fetch_out(Err(error), Bytes::new(), 0, None),
            Ok((from, message, max_wait_ms)) => {
                let asked = message.epoch();
                let voter = self.status.borrow().voters.contains(&from);
                if let (Message::Fetch { fetch_offset, .. }, false) = (&message, voter) {
                    self.observed(from, request, *fetch_offset as i64);
                }
                match self.ask(from, message, max_wait_ms.clamp(0, 60_000)).await {
                    Some(Reply { message: Some(m), records, .. }) => {
                        wire::fetch_out(Ok(&m), records, asked, self.leader_endpoint().as_ref().map(|(id, e)| (*id, e)))
                    }
                    _ => wire::fetch_out(Err(ResponseError::UnknownServerError), Bytes::new(), asked, None),
                }
            }
        }
    }

    pub fn settings(&self) -> &VoterSettings {
        &self.settings
    }

    /// A FetchSnapshot of this voter's snapshots (answered only while it leads).
    pub async fn fetch_snapshot(
        &self,
        request: &kafka_protocol::messages::FetchSnapshotRequest,
    ) -> kafka_protocol::messages::FetchSnapshotResponse {
        let status = self.status.borrow().clone();
        if status.leader == Some(self.settings.node_id) {
            // (For check-quorum: a voter downloading the snapshot is as good as fetching.)
            let from = request.replica_id.0;
            let _ = self.events.send(Event::SnapshotRead { from });
        }
        let (request, dir, settings) = (request.clone(), self.dir.clone(), self.settings.clone());
        let answer = tokio::task::spawn_blocking(move || {
            let view = snapshot_wire::LeaderView {
                cluster_id: &settings.cluster_id,
                epoch: status.epoch,
                leader: status.leader,
                leading: status.leader == Some(settings.node_id),
            };
            snapshot_wire::serve(&request, &view, &dir)
        });
        answer.await.unwrap_or_else(|_| {
            kafka_protocol::messages::FetchSnapshotResponse::default()
                .with_error_code(ResponseError::UnknownServerError.code())
        })
    }

    /// The voters' progress while this voter leads (empty otherwise).
    pub fn progress(&self) -> Vec<VoterProgress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records observer `id`'s fetch from `fetch_offset` (kept only while this voter leads).
    fn observed(&self, id: NodeId, request: &FetchRequest, fetch_offset: i64) {
        let status = self.status.borrow().clone();
        let mut observers = self.observers.lock().unwrap_or_else(|p| p.into_inner());
        if status.leader != Some(self.settings.node_id) || id < 0 {
            observers.clear();
            return;
        }
        let now_ms = crate::log::now_ms();
        let directory_id = request
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| p.replica_directory_id)
            .unwrap_or_default();
        let state = observers.entry(id).or_insert(ObserverState {
            directory_id,
            log_end_offset: -1,
            last_fetch_ms: now_ms,
            last_caught_up_ms: -1,
        });
        state.directory_id = directory_id;
        state.log_end_offset = fetch_offset;
        state.last_fetch_ms = now_ms;
        if fetch_offset >= status.end as i64 {
            state.last_caught_up_ms = now_ms;
        }
    }

    /// Observers as they last fetched from this voter as leader.
    pub fn observers(&self) -> BTreeMap<NodeId, ObserverState> {
        self.observers.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops the driver (its log is closed; requests after this get no answer).
    pub fn stop(&self) {
        let _ = self.events.send(Event::Stop);
    }

    /// Appends `records` as one batch once this voter leads and is caught up; returns the end
    /// offset of the batch once it is committed (and applied by `on_commit`).
    pub async fn propose(&self, records: Vec<MetadataRecord>) -> anyhow::Result<u64> {
        let (reply, answer) = oneshot::channel();
        self.submit(records, Box::new(move |outcome| drop(reply.send(outcome))))?;
        answer.await.map_err(|_| stopped())?
    }

    /// `propose`, blocking this thread (the controller decides changes on a blocking section).
    pub fn propose_blocking(&self, records: Vec<MetadataRecord>) -> anyhow::Result<u64> {
        let (reply, answer) = mpsc::channel();
        self.submit(records, Box::new(move |outcome| drop(reply.send(outcome))))?;
        answer.recv().map_err(|_| stopped())?
    }

    fn submit(&self, records: Vec<MetadataRecord>, reply: ProposalReply) -> anyhow::Result<()> {
        self.events.send(Event::Propose { records, reply }).map_err(|_| stopped())
    }
}
