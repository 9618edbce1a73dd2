"""The elected controller: Kafka's KafkaController in ZooKeeper mode.

The controller (Kafka's onControllerFailover and ControllerEventManager):
elected, it reads the cluster from ZooKeeper (live brokers, topics, their
assignments and partition states, deletions), opens a channel to every live
broker (``controller_channel``), and carries out
``ControllerState.on_controller_failover``: elections where needed, then
UpdateMetadata with every partition to every live broker and LeaderAndIsr to
each for its replicas. Then one thread handles events in order from one
queue, fed by ZooKeeper watches: broker changes (failed, started, bounced:
the registration's czxid changed), new topics and partitions, topic
deletions, ISR change notifications, StopReplica answers, requests through
the door (controlled shutdown, leader elections) and, with
``auto.leader.rebalance.enable``, the auto leader rebalance 5 s after the
election and every ``leader.imbalance.check.interval.seconds``. Each event's
effects are carried out in order: partition-state writes first (fenced by
``/controller_epoch``'s version; a write that lost its znode version to a
leader's ISR change is re-read and decided again), then the requests.

Watch events are coalesced (a kind already queued is not queued again: each
handler re-reads what it needs), so the queue stays bounded by the number of
event kinds and topics plus the StopReplica answers of requests sent.

Runs inside the broker's controller child (``server/controller_process.py``),
which elects it, hands it the ZooKeeper client and the inter-broker security,
and stops it when it resigns.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid

from kafkapy.controller.channel_manager import ControllerChannelManager
from kafkapy.metadata.zk import data as zk_data
from kafkapy.metadata.zk.client import ZkError
from kafkapy.metadata.zk.controller import PREFERRED_REPLICA_ELECTION_PATH, REASSIGN_PARTITIONS_PATH
from kafkapy.protocol.errors import ErrorCode

log = logging.getLogger("kafkapy.controller")
# Kafka's controller.socket.timeout.ms default (not a kafkapy config yet).
CONTROLLER_SOCKET_TIMEOUT_MS = 30000
# How often an event that met a ZooKeeper connection error is tried again.
_EVENT_RETRIES = 20
_EVENT_RETRY_S = 0.5
# Kafka's first auto leader rebalance check after a failover.
_FIRST_REBALANCE_S = 5.0
NONE = 0


class Controller:
    """One elected term: the event thread, the channels, the ZooKeeper side."""

    def __init__(self, config, broker_id: int, client, epoch: int, epoch_zk_version: int, image=None,
                 security=None):
        from kafkapy.controller.state import ControllerState
        from kafkapy.metadata.zk.controller import ZkController

        self.config = config
        self.broker_id = broker_id
        self.epoch = epoch
        self.image = image
        self.zk = ZkController(client, epoch_zk_version)
        # security: the inter-broker listener's TLS/SASL (ClientSecurity), None for PLAINTEXT.
        self.channel = ControllerChannelManager(broker_id, config.inter_broker_listener_name,
                                                CONTROLLER_SOCKET_TIMEOUT_MS, security)
        self.state = ControllerState(epoch, set(), unclean_election=self._unclean_election)
        # {(topic, partition): ISR} before an election that may be unclean (a topic with
        # unclean.leader.election.enable, or an admin UNCLEAN election), so ``_execute``
        # can log each leader elected from outside its ISR (and {topic: True} for the
        # topics already noted); cleared after each event.
        self._isr_before_unclean: dict = {}
        self.live: dict = {}  # broker id -> LiveBroker (registration and broker epoch)
        self.events: queue.Queue = queue.Queue()
        self._queued: set = set()  # coalesced watch events waiting in the queue
        self._queued_lock = threading.Lock()
        self.active = True
        self._watching = False
        self.moved = threading.Event()
        self.thread = threading.Thread(target=self._run, name="controller-events", daemon=True)
        # Kafka schedules the first auto leader rebalance 5 s after failover, then
        # every leader.imbalance.check.interval.seconds.
        self.rebalance_every_s = (config["leader.imbalance.check.interval.seconds"]
                                  if config["auto.leader.rebalance.enable"] else None)
        self.next_rebalance = time.monotonic() + _FIRST_REBALANCE_S
        self._zk_reassignment_seen = None  # czxid of the /admin/reassign_partitions acted on

    def start(self) -> "Controller":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.active = False
        self.events.put(None)
        if self.thread is not threading.current_thread():
            self.thread.join(10)
        self.channel.shutdown()
        # Kafka's preempt: requests still queued answer that the controller moved
        while True:  # bounded: nothing is queued once inactive (``ask`` checks first)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                break
            if event is not None and event[0] == "request":
                event[1].put(("not_controller",))

    # -- the event queue -------------------------------------------------------------------
    def _enqueue(self, event: tuple) -> None:
        """Queue a watch event unless the same one is already waiting (kazoo's thread)."""
        if not self.active:
            return
        with self._queued_lock:
            if event in self._queued:
                return
            self._queued.add(event)
        self.events.put(event)

    def ask(self, message: tuple):
        """A handler worker's request through the door (ControlledShutdown,
        ElectLeaders), run as an event in order with the others; its answer, or
        ("timeout",) if none came within the message's own timeout (the last item,
        in ms)."""
        box = _Answer(message)
        self.events.put(("request", box))
        if not self.active:  # stopped meanwhile: ``stop`` may have drained the queue already
            return ("not_controller",)
        return box.wait(message[-1] / 1000)

    def _next_event(self):
        if self.rebalance_every_s is None:
            return self.events.get()
        try:
            return self.events.get(timeout=max(0.0, self.next_rebalance - time.monotonic()))
        except queue.Empty:
            self.next_rebalance = time.monotonic() + self.rebalance_every_s
            return ("auto_leader_rebalance",)

    def _run(self) -> None:
        from kafkapy.metadata.zk.controller import ControllerMoved

        pending = [("startup",)]
        while self.active:
            event = pending.pop(0) if pending else self._next_event()
            if event is None or not self.active:
                return
            with self._queued_lock:
                self._queued.discard(event)
            self._isr_before_unclean.clear()
            for attempt in range(_EVENT_RETRIES):
                try:
                    getattr(self, "_on_" + event[0])(*event[1:])
                    break
                except ControllerMoved as exc:
                    log.warning("controller %d (epoch %d) was deposed: %s", self.broker_id, self.epoch, exc)
                    self.active = False
                    self.moved.set()
                    if event[0] == "request":  # Kafka's preempt: ControllerMovedException
                        event[1].put(("not_controller",))
                    return
                except ZkError as exc:
                    if attempt == _EVENT_RETRIES - 1:
                        log.error("controller event %s failed %d times (%s); dropped", event[0],
                                  _EVENT_RETRIES, type(exc).__name__)
                        break
                    log.warning("controller event %s met %s; trying again", event[0], type(exc).__name__)
                    time.sleep(_EVENT_RETRY_S)
                    if not self.active:
                        return
                except Exception:
                    log.exception("controller event %s failed", event[0])
                    break
            if event[0] == "request":
                event[1].put(("failed",))  # nothing if it was answered

    def _active(self) -> bool:
        return self.active

    # -- events ----------------------------------------------------------------------------
    def _on_startup(self) -> None:
        """Kafka's onControllerFailover."""
        zk = self.zk
        if not self._watching:  # once, also when the event is tried again
            self._watch()
            self._watching = True
        self.live = zk.live_brokers()
        for live in self.live.values():
            self.channel.add_broker(live.info)
        self.state.live_brokers = set(self.live)
        self._add_topics(zk.topic_names(), announce=False)
        marked = self._marked_for_deletion()
        effects = self.state.on_controller_failover(marked)
        log.info("controller %d (epoch %d) started: %d live brokers, %d partitions", self.broker_id, self.epoch,
                 len(self.live), len(self.state.assignments))
        self._execute(effects)
        self._resume_reassignments_at_failover()

    def _watch(self) -> None:
        zk = self.zk
        zk.watch_children(zk_data.BROKER_IDS_PATH, lambda _c: self._enqueue(("broker_change",)), self._active)
        zk.watch_children(zk_data.TOPICS_PATH, lambda _c: self._enqueue(("topic_change",)), self._active)
        zk.watch_children(zk_data.DELETE_TOPICS_PATH, lambda _c: self._enqueue(("topic_deletion",)),
                          self._active)
        zk.watch_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH, lambda _c: self._enqueue(("isr_change",)),
                          self._active)
        zk.watch_exists(PREFERRED_REPLICA_ELECTION_PATH, lambda: self._enqueue(("preferred_replica_election",)),
                        self._active)
        zk.watch_children(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH, lambda _c: self._enqueue(("log_dir_event",)),
                          self._active)
        zk.watch_creation(REASSIGN_PARTITIONS_PATH, lambda: self._enqueue(("zk_reassignment",)), self._active)

    def _on_broker_change(self) -> None:
        """Kafka's BrokerChange: failed, started and bounced brokers."""
        now = self.zk.live_brokers()
        dead = sorted(set(self.live) - set(now))
        new = sorted(set(now) - set(self.live))
        bounced = sorted(b for b in set(now) & set(self.live) if now[b].broker_epoch != self.live[b].broker_epoch)
        if not (dead or new or bounced):
            return
        log.info("brokers: new %s, dead %s, bounced %s", new, dead, bounced)
        for broker_id in dead + bounced:
            self.channel.remove_broker(broker_id)
        self.live = now
        for broker_id in new + bounced:
            self.channel.add_broker(now[broker_id].info)
        if dead or bounced:
            self._execute(self.state.on_brokers_failed(dead + bounced))
        if new or bounced:
            self._execute(self.state.on_brokers_started(new + bounced))
            self._resume_reassignments(new + bounced)

    def _on_topic_change(self) -> None:
        names = set(self.zk.topic_names())
        known = {t for t, _ in self.state.assignments} | set(self.state.topic_ids)
        self._add_topics(sorted(names - known), announce=True)

    def _on_topic_data(self, topic: str) -> None:
        """A topic znode changed: partitions added (Kafka's PartitionModifications)."""
        self._add_topics([topic], announce=True)

    def _add_topics(self, names, announce: bool) -> None:
        """Read topics (new ones get a data watch); their unknown partitions are new:
        at failover (``announce`` False) only recorded with their states, later
        elected (``on_new_partitions``)."""
        state = self.state
        found = self.zk.read_topics(names)
        added = {}
        for name, (topic, version) in found.items():
            if name not in state.topic_ids and not any(t == name for t, _ in state.assignments):
                self.zk.watch_data(zk_data.topic_path(name),
                                   lambda n=name: self._enqueue(("topic_data", n)), self._active)
            topic_id = topic.topic_id
            if topic_id is None:
                # an older tool's topic znode: Kafka's controller gives it an id
                topic_id = uuid.uuid4()
                if not self.zk.set_topic_id(name, topic, version, topic_id):
                    self._enqueue(("topic_data", name))  # it moved: read it again
                    continue
                log.info("topic %s had no topic id: gave it %s", name, topic_id)
            state.topic_ids[name] = topic_id
            for p, replicas in topic.partitions.items():
                if (name, p) not in state.assignments and name not in state.deleting:
                    added[(name, p)] = tuple(replicas)
                    if topic.adding_replicas.get(p) or topic.removing_replicas.get(p):  # a reassignment runs
                        state.reassigning[(name, p)] = (tuple(topic.adding_replicas.get(p, ())),
                                                        tuple(topic.removing_replicas.get(p, ())))
        if not added:
            return
        if not announce:
            state.assignments.update(added)
            for tp, s in self.zk.read_partition_states(added).items():
                if s is not None:
                    state.states[tp] = s
            return
        log.info("new partitions: %s", sorted(added))
        self._execute(state.on_new_partitions(added))

    def _marked_for_deletion(self) -> list:
        marked = self.zk.topics_marked_for_deletion()
        if marked and not self.config["delete.topic.enable"]:
            # Kafka: deletion disabled, the markers are removed and nothing else happens
            log.info("delete.topic.enable is false: removing the deletion markers of %s", marked)
            self.zk.client.delete_quietly([zk_data.delete_topic_path(t) for t in marked])
            return []
        return marked

    def _on_topic_deletion(self) -> None:
        marked = [t for t in self._marked_for_deletion() if t not in self.state.deleting]
        # Kafka's markTopicIneligibleForDeletion: a topic being reassigned is deleted once
        # its reassignments end (_reassignment_step queues this event again)
        held = {tp[0] for tp in self.state.reassigning if tp in self.state.assignments}
        if set(marked) & held:
            log.info("deletion of %s waits for their reassignments", sorted(set(marked) & held))
            marked = [t for t in marked if t not in held]
        if marked:
            log.info("deleting topics %s", marked)
            self._execute(self.state.on_topics_deleted(marked))

    def _on_isr_change(self) -> None:
        """Kafka's IsrChangeNotification: re-read the named partitions' states,
        UpdateMetadata to every live broker, delete the notifications."""
        children, partitions = self.zk.isr_change_notifications()
        if not children:
            return
        known = {tp: self.state.assignments[tp] for tp in partitions if tp in self.state.assignments}
        if known:
            self._execute(self.state.on_isr_changed(self.zk.read_partition_states(known)))
            self._maybe_complete_reassignments(known)
        self.zk.delete_isr_change_notifications(children)

    def _on_preferred_replica_election(self) -> None:
        """``/admin/preferred_replica_election`` (Kafka's ZkTriggered
        ReplicaLeaderElection): a preferred election of the partitions it names
        (unknown ones skipped), then the znode goes."""
        partitions = self.zk.preferred_replica_election()
        if partitions is None:
            return
        results, effects = self.state.on_replica_election(partitions, preferred=True, admin=False)
        self._execute(effects)
        for (topic, p), (error, leader) in sorted(results.items()):
            if error == NONE:
                log.info("partition %s-%d completed preferred replica leader election; new leader %d", topic, p,
                         leader)
            elif error != ErrorCode.ELECTION_NOT_NEEDED:
                log.warning("preferred replica leader election of %s-%d failed: %s", topic, p,
                            ErrorCode(error).name)
        self.zk.delete_preferred_replica_election()

    def _on_log_dir_event(self) -> None:
        """Kafka's LogDirEventNotification: LeaderAndIsr for all the replicas of
        the brokers named (their answers say which are offline:
        ``_on_leader_and_isr_response``), then the notifications go."""
        children, brokers = self.zk.log_dir_event_notifications()
        if not children:
            return
        try:
            log.info("Handling log directory failure for brokers %s", ",".join(map(str, sorted(brokers))))
            self._execute(self.state.on_broker_log_dir_failure(brokers))
        finally:
            self.zk.delete_log_dir_event_notifications(children)

    def _leader_and_isr_answered(self, broker_id: int):
        """The LeaderAndIsr answer callback (the channel's sender thread): errors
        logged; partition answers KAFKA_STORAGE_ERROR, or NONE from a broker
        with replicas known offline, become an event."""
        def answered(response):
            if response.error_code != NONE:
                log.warning("LeaderAndIsr to broker %d answered error %d", broker_id, response.error_code)
                return
            errors = tuple((t.topic_id, e.partition_index, e.error_code) for t in response.topics
                           for e in t.partition_errors)  # hashable: events are de-duplicated
            if any(code == ErrorCode.KAFKA_STORAGE_ERROR for *_, code in errors) or \
                    broker_id in self.state.offline_replicas:
                self.events.put(("leader_and_isr_response", broker_id, errors))
        return answered

    def _on_leader_and_isr_response(self, broker_id: int, errors) -> None:
        names = {topic_id: name for name, topic_id in self.state.topic_ids.items()}
        offline, online = [], []
        for topic_id, p, code in errors:
            name = names.get(topic_id)
            if name is not None and code in (ErrorCode.KAFKA_STORAGE_ERROR, NONE):
                (offline if code == ErrorCode.KAFKA_STORAGE_ERROR else online).append((name, p))
        if offline:
            log.info("Mark replicas %s on broker %d as offline",
                     ",".join(f"{t}-{p}" for t, p in sorted(offline)), broker_id)
        self._execute(self.state.on_leader_and_isr_response(broker_id, offline, online))

    def _on_stop_replica_response(self, broker_id: int, response) -> None:
        """Kafka's TopicDeletionStopReplicaResponseReceived: the replicas deleted
        without error count; a failed one keeps its topic's deletion held."""
        errors = response.partition_errors if response.error_code == NONE else ()
        ok = [(e.topic_name, e.partition_index) for e in errors if e.error_code == NONE]
        if response.error_code != NONE or len(ok) != len(errors):
            log.warning("StopReplica(delete) on broker %d failed: error %d, partitions %s", broker_id,
                        response.error_code, [(e.topic_name, e.partition_index, e.error_code) for e in errors
                                              if e.error_code != NONE])
        self._execute(self.state.on_replicas_deleted(broker_id, ok))

    def _on_request(self, box) -> None:
        """A request through the door: ``("controlled_shutdown", broker id, broker
        epoch, timeout ms)`` or ``("elect_leaders", preferred, partitions or None,
        timeout ms)``."""
        message = box.message
        box.put(getattr(self, "_request_" + message[0])(*message[1:-1]))

    def _request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple:
        """Kafka's processControlledShutdown: ``(error code, [(topic, partition)] still led)``."""
        from kafkapy.protocol.errors import ErrorCode

        live = self.live.get(broker_id)
        if broker_epoch != -1 and live is not None and broker_epoch < live.broker_epoch:
            log.info("controlled shutdown of broker %d at the old broker epoch %d (now %d)", broker_id,
                     broker_epoch, live.broker_epoch)
            return int(ErrorCode.STALE_BROKER_EPOCH), []
        log.info("shutting down broker %d", broker_id)
        error, effects = self.state.on_controlled_shutdown(broker_id)
        self._execute(effects)
        return int(error), [list(tp) for tp in self.state.partitions_led_by(broker_id)]

    def _request_elect_leaders(self, preferred: bool, partitions) -> list:
        """Kafka's processReplicaLeaderElection (AdminClientTriggered):
        ``[(topic, partition, error code, new leader or -1)]``."""
        wanted = None if partitions is None else [tuple(tp) for tp in partitions]
        log.info("replica leader election (%s) for %s", "PREFERRED" if preferred else "UNCLEAN",
                 "all partitions" if wanted is None else f"{len(wanted)} partitions")
        if not preferred:
            self._remember_isrs(lambda tp: wanted is None or tp in wanted)
        results, effects = self.state.on_replica_election(wanted, preferred, admin=True)
        self._execute(effects)
        return [(t, p, int(error), -1 if leader is None else leader)
                for (t, p), (error, leader) in sorted(results.items())]

    # -- partition reassignment (controller/reassignment.py) ----------------------------------
    def _request_alter_reassignments(self, entries) -> list:
        """Kafka's processApiPartitionReassignment: ``entries`` ``[(topic, partition,
        replicas or None)]`` -> ``[(topic, partition, error code, message or None)]``."""
        state = self.state
        results, wanted = {}, {}
        for topic, p, replicas in entries:
            tp = (topic, p)
            replicas = None if replicas is None else tuple(replicas)
            refused = None if replicas is None else state.validate_reassignment(tp, replicas)
            if refused is not None:
                results[tp] = refused
                continue
            new = state.build_reassignment(tp, replicas)
            if new is None:
                results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            else:
                wanted[tp] = new
        # the latest reassignment wins over one written to /admin/reassign_partitions
        if wanted:
            self.zk.remove_from_zk_reassignment(tuple((t, p, None) for t, p in wanted))
        results.update(self._trigger_reassignments(wanted))
        return [(t, p, int(code), message) for (t, p), (code, message) in sorted(results.items())]

    def _request_list_reassignments(self, partitions) -> list:
        """Kafka's processListPartitionReassignments: ``[(topic, partition, replicas,
        adding, removing)]`` of the partitions asked (None: all) being reassigned."""
        wanted = None if partitions is None else [tuple(tp) for tp in partitions]
        return [(t, p, list(rs), list(ar), list(rr))
                for (t, p), (rs, ar, rr) in sorted(self.state.list_reassignments(wanted).items())]

    def _on_zk_reassignment(self) -> None:
        """Kafka's processZkPartitionReassignment: the partitions of a newly created
        ``/admin/reassign_partitions``; those refused leave the znode."""
        self._zk_reassignment()

    def _zk_reassignment(self) -> set:
        read = self.zk.partition_reassignment(with_czxid=True)
        if read is None:
            return set()
        entries, czxid = read
        if czxid == self._zk_reassignment_seen:
            return set()  # this znode was acted on already (its creation event came after failover)
        self._zk_reassignment_seen = czxid
        wanted, failed = {}, {}
        for tp, replicas in sorted(entries.items()):
            # Kafka runs no validateReplicas on this path; a list no broker could
            # hold (empty, duplicates, negative ids) is refused here all the same
            if not replicas or len(set(replicas)) != len(replicas) or min(replicas) < 0:
                failed[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, None)
            else:
                wanted[tp] = self.state.build_reassignment(tp, replicas)
        results = self._trigger_reassignments(wanted)
        failed.update({tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE})
        if failed:
            log.warning("reassignment through ZooKeeper failed: %s",
                        {f"{t}-{p}": ErrorCode(code).name for (t, p), (code, _m) in sorted(failed.items())})
            self.zk.remove_from_zk_reassignment(tuple((t, p, None) for t, p in failed))
        return {tp for tp, r in results.items() if r[0] == ErrorCode.NONE}

    def _trigger_reassignments(self, wanted: dict) -> dict:
        """Kafka's maybeTriggerPartitionReassignment: ``{tp: (RS, AR, RR)}`` ->
        ``{tp: (error code, message or None)}``."""
        results = {}
        for tp, new in sorted(wanted.items()):
            refused = self.state.reassignment_refused(tp)
            if refused is not None:
                results[tp] = (refused, "The partition does not exist.")
                continue
            log.info("reassigning %s-%d: replicas %s, adding %s, removing %s", tp[0], tp[1], *map(list, new))
            self._execute(self.state.update_current_reassignment(tp, new))
            self._reassignment_step(tp)
            results[tp] = (ErrorCode.NONE, None)
        return results

    def _reassignment_step(self, tp) -> None:
        """Step A or B for ``tp`` (``ControllerState.reassignment_step``); a state write
        that lost its version to a leader's ISR change is re-read and the step decided
        again (at most 3 times; the next ISR notification tries again anyway)."""
        for _attempt in range(3):
            chunks = self.state.reassignment_step(tp)
            if not chunks:
                return
            if tp not in self._execute(chunks[0]):
                for chunk in chunks[1:]:
                    self._execute(chunk)
                if len(chunks) > 1:
                    log.info("reassignment of %s-%d completed: replicas %s", tp[0], tp[1],
                             list(self.state.assignments.get(tp, ())))
                    self._enqueue(("topic_deletion",))  # a deletion it held may go on (Kafka's resumeDeletion)
                return
            if tp not in self.state.assignments:
                return
            if len(chunks) > 1:  # phase B was undone in memory: put the reassignment back from ZooKeeper
                self._reread_reassignment(tp)
        log.warning("reassignment step of %s-%d keeps losing its partition state version", *tp)

    def _reread_reassignment(self, tp) -> None:
        found = self.zk.read_topics([tp[0]]).get(tp[0])
        if found is None:
            return
        topic = found[0]
        if tp[1] in topic.partitions:
            self.state.assignments[tp] = tuple(topic.partitions[tp[1]])
            adding, removing = topic.adding_replicas.get(tp[1], ()), topic.removing_replicas.get(tp[1], ())
            if adding or removing:
                self.state.reassigning[tp] = (tuple(adding), tuple(removing))
        state = self.zk.read_partition_states({tp: self.state.assignments[tp]}).get(tp)
        if state is not None:
            self.state.states[tp] = state

    def _maybe_complete_reassignments(self, partitions) -> None:
        """Kafka's maybeCompleteReassignment after ISR changes: phase B for the
        reassigning partitions whose targets are all in the ISR now."""
        for tp in sorted(set(partitions) & set(self.state.reassigning)):
            if self.state.reassignment_complete(tp):
                log.info("target replicas %s of %s-%d are all in the ISR", list(self.state.target_replicas(tp)),
                         tp[0], tp[1])
                self._reassignment_step(tp)

    def _resume_reassignments(self, started=None, skip=()) -> None:
        """Kafka's maybeResumeReassignments (onPartitionReassignment with the current
        assignment): at failover all, when brokers start those whose targets have them."""
        for tp in self.state.reassignments_to_resume(started):
            if tp not in skip:
                log.info("resuming the reassignment of %s-%d", *tp)
                self._reassignment_step(tp)

    def _resume_reassignments_at_failover(self) -> None:
        """Kafka's initializePartitionReassignments: ``/admin/reassign_partitions``
        first, then the API reassignments it did not supplant."""
        self._resume_reassignments(skip=self._zk_reassignment())

    def _execute_reassignment_effect(self, effect) -> None:
        from kafkapy.controller.effects import RemoveZkReassignment, WriteTopicAssignment

        if isinstance(effect, WriteTopicAssignment):
            self.zk.write_topic_assignment(effect)
        elif isinstance(effect, RemoveZkReassignment):
            self.zk.remove_from_zk_reassignment(effect.entries)
        else:
            raise TypeError(f"unknown controller effect {effect!r}")

    def _on_auto_leader_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance, every
        leader.imbalance.check.interval.seconds."""
        effects = self.state.on_auto_leader_rebalance(self.config["leader.imbalance.per.broker.percentage"])
        if effects:
            moved = sorted({(e.topic, e.partition) for e in effects if hasattr(e, "topic") and hasattr(e, "state")})
            log.info("auto leader rebalance: preferred replicas elected for %s", moved)
            self._execute(effects)

    # -- effects ---------------------------------------------------------------------------
    def _execute(self, effects, depth: int = 0) -> None:
        """Carry out ``effects`` in order: the state writes, then the requests; the
        partitions whose write lost its version are left out of the requests,
        re-read and decided again (a bounded number of rounds)."""
        from kafkapy.controller.effects import (
            DeleteTopic,
            SendLeaderAndIsr,
            SendStopReplica,
            SendUpdateMetadata,
            WritePartitionState,
        )

        writes = [e for e in effects if isinstance(e, WritePartitionState)]
        lost = self.zk.write_partition_states(writes)
        self._log_unclean_elections(writes, lost, depth)
        for effect in effects:
            if isinstance(effect, SendLeaderAndIsr):
                parts = [p for p in effect.partitions if (p[0], p[1]) not in lost]
                if parts:
                    self._send_leader_and_isr(effect.broker_id, parts)
            elif isinstance(effect, SendUpdateMetadata):
                parts = [p for p in effect.partitions if (p[0], p[1]) not in lost]
                if parts or not effect.partitions:
                    for broker_id in effect.broker_ids:
                        self._send_update_metadata(broker_id, parts)
            elif isinstance(effect, SendStopReplica):
                self._send_stop_replica(effect.broker_id, effect.partitions, effect.delete)
            elif isinstance(effect, DeleteTopic):
                self.zk.delete_topic(effect.topic)
                log.info("topic %s deleted", effect.topic)
            elif not isinstance(effect, WritePartitionState):
                self._execute_reassignment_effect(effect)
        if lost:
            if depth >= 3:
                log.error("partition state writes keep losing their versions: %s", sorted(lost))
                return lost
            assignments = {tp: self.state.assignments[tp] for tp in lost if tp in self.state.assignments}
            self._execute(self.state.on_conflicts(self.zk.read_partition_states(assignments)), depth + 1)
        return lost

    def _broker_epoch(self, broker_id: int) -> int:
        live = self.live.get(broker_id)
        return live.broker_epoch if live is not None else -1

    def _send_leader_and_isr(self, broker_id: int, partitions) -> None:
        from kafkapy.controller.channel_manager import LEADER_AND_ISR, endpoint_for

        topics: dict = {}
        leaders = set()
        for topic, p, state, is_new in partitions:
            adding, removing = self.state.reassigning.get((topic, p), ((), ()))  # a reassignment in progress
            topics.setdefault(topic, []).append({
                "partition_index": p, "controller_epoch": self.epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": tuple(state.isr),
                "partition_epoch": state.partition_epoch, "replicas": tuple(state.replicas), "is_new": is_new,
                "adding_replicas": tuple(adding), "removing_replicas": tuple(removing)})
            leaders.add(state.leader)
        live_leaders = []
        for leader in sorted(leaders):
            live = self.live.get(leader)
            address = endpoint_for(live.info, self.channel.listener_name) if live is not None else None
            if address is not None:
                live_leaders.append({"broker_id": leader, "host_name": address[0], "port": address[1]})
        values = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                  "broker_epoch": self._broker_epoch(broker_id), "type": 0,
                  "topic_states": [{"topic_name": t, "topic_id": self.state.topic_ids.get(t), "partition_states": ps}
                                   for t, ps in topics.items()],
                  "live_leaders": live_leaders}
        self.channel.send(broker_id, LEADER_AND_ISR, values, self._leader_and_isr_answered(broker_id))

    def _send_update_metadata(self, broker_id: int, partitions) -> None:
        from kafkapy.controller.channel_manager import UPDATE_METADATA

        live = set(self.live)
        topics: dict = {}
        for topic, p, state in partitions:
            topics.setdefault(topic, []).append({
                "partition_index": p, "controller_epoch": self.epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": tuple(state.isr), "zk_version": state.partition_epoch,
                "replicas": tuple(state.replicas),
                "offline_replicas": tuple(r for r in state.replicas if r not in live
                                          or (topic, p) in self.state.offline_replicas.get(r, ()))})
        brokers = []
        for broker_id_, b in sorted(self.live.items()):
            info = b.info
            brokers.append({"id": broker_id_, "rack": info.rack, "endpoints": [
                {"port": ep.port, "host": ep.host, "listener": ep.listener_name,
                 "security_protocol": _SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0)}
                for ep in info.endpoints]})
        values = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                  "broker_epoch": self._broker_epoch(broker_id),
                  "topic_states": [{"topic_name": t, "topic_id": self.state.topic_ids.get(t), "partition_states": ps}
                                   for t, ps in topics.items()],
                  "live_brokers": brokers}
        self.channel.send(broker_id, UPDATE_METADATA, values, self._log_errors("UpdateMetadata", broker_id))

    def _send_stop_replica(self, broker_id: int, partitions, delete: bool) -> None:
        from kafkapy.controller.channel_manager import STOP_REPLICA

        topics: dict = {}
        for topic, p in partitions:
            # Kafka's EpochDuringDelete (-2) with a deletion, else NoEpoch (-1): always accepted
            topics.setdefault(topic, []).append({"partition_index": p, "leader_epoch": -2 if delete else -1,
                                                 "delete_partition": delete})
        values = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                  "broker_epoch": self._broker_epoch(broker_id),
                  "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in topics.items()]}

        def answered(response):
            if delete:
                self.events.put(("stop_replica_response", broker_id, response))
        self.channel.send(broker_id, STOP_REPLICA, values, answered)

    @staticmethod
    def _log_errors(what: str, broker_id: int):
        def answered(response):
            if response.error_code != NONE:
                log.warning("%s to broker %d answered error %d", what, broker_id, response.error_code)
        return answered

    def _unclean_election(self, topic: str) -> bool:
        """The topic's ``unclean.leader.election.enable`` (its override in the image, else the broker's)."""
        value = None
        if self.image is not None:
            info = self.image.current().topics.get(topic)
            if info is not None:
                value = info.configs.get("unclean.leader.election.enable")
        if value is None:
            allowed = bool(self.config["unclean.leader.election.enable"])
        else:
            allowed = str(value).strip().lower() == "true"
        if allowed and topic not in self._isr_before_unclean:
            self._isr_before_unclean[topic] = True  # the topic's partitions noted once per event
            self._remember_isrs(lambda tp: tp[0] == topic)
        return allowed

    def _remember_isrs(self, which) -> None:
        """Note the ISR of the partitions ``which(tp)`` picks, before an election that may be unclean."""
        for tp, state in self.state.states.items():
            if which(tp):
                self._isr_before_unclean.setdefault(tp, tuple(state.isr))

    def _log_unclean_elections(self, writes, lost, depth: int) -> None:
        """Kafka counts an unclean election (UncleanLeaderElectionsPerSec) and says it
        may lose data; each written leader from outside the ISR it had is logged."""
        for w in writes:
            before = self._isr_before_unclean.get((w.topic, w.partition))
            if (before is not None and (w.topic, w.partition) not in lost and w.state.leader >= 0
                    and w.state.leader not in before):
                log.warning("unclean leader election for %s-%d: broker %d elected leader (epoch %d) from outside "
                            "the ISR %s, none of which is alive; potential data loss (records only the ISR had "
                            "are gone)", w.topic, w.partition, w.state.leader, w.state.leader_epoch, list(before))
        if depth == 0:
            self._isr_before_unclean.clear()


_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class _Answer:
    """One door request's answer, handed from the event thread to the door's thread."""

    def __init__(self, message: tuple):
        self.message = message
        self._ready = threading.Event()
        self._value = None

    def put(self, value) -> None:
        if not self._ready.is_set():
            self._value = value
            self._ready.set()

    def wait(self, timeout_s: float):
        return self._value if self._ready.wait(timeout_s) else ("timeout",)
