"""The one table of metrics the broker processes write (no prometheus_client import).

Each row: attribute on ``exporter.Metrics``, kind, Prometheus name (without
``_total``/``_bucket`` suffixes), help text naming Kafka's JMX metric, label
names, and for gauges the multiprocess aggregation mode. README.md beside
this file maps every row to Kafka's MBean.
"""

from __future__ import annotations

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

REQ = ("request",)

PROCESS_METRICS = (
    ("bytes_in", COUNTER, "kafka_server_brokertopicmetrics_bytes_in",
     "Bytes appended to the log (BytesInPerSec)", ("topic",), None),
    ("bytes_out", COUNTER, "kafka_server_brokertopicmetrics_bytes_out",
     "Record bytes in fetch responses (BytesOutPerSec)", ("topic",), None),
    ("fetch_message_conversions", COUNTER, "kafka_server_brokertopicmetrics_fetch_message_conversions",
     "Records down-converted for Fetch v0-v3 (FetchMessageConversionsPerSec)", ("topic",), None),
    ("message_conversions_time", HISTOGRAM, "kafka_network_requestmetrics_message_conversions_time_seconds",
     "Time spent converting record formats (MessageConversionsTimeMs)", REQ, None),
    ("messages_in", COUNTER, "kafka_server_brokertopicmetrics_messages_in",
     "Records appended to the log (MessagesInPerSec)", ("topic",), None),
    ("requests", COUNTER, "kafka_network_requestmetrics_requests",
     "Requests answered (RequestsPerSec)", REQ, None),
    ("errors", COUNTER, "kafka_network_requestmetrics_errors",
     "Error codes in responses, NONE included (ErrorsPerSec)", ("request", "error"), None),
    ("total_time", HISTOGRAM, "kafka_network_requestmetrics_total_time_seconds",
     "Request received to response sent (TotalTimeMs)", REQ, None),
    ("request_queue_time", HISTOGRAM, "kafka_network_requestmetrics_request_queue_time_seconds",
     "Time in the request queue (RequestQueueTimeMs)", REQ, None),
    ("local_time", HISTOGRAM, "kafka_network_requestmetrics_local_time_seconds",
     "Time in the handler (LocalTimeMs)", REQ, None),
    ("response_send_time", HISTOGRAM, "kafka_network_requestmetrics_response_send_time_seconds",
     "Response at the processor to fully sent (ResponseSendTimeMs)", REQ, None),
    ("flush_time", HISTOGRAM, "kafka_log_logflushstats_log_flush_time_seconds",
     "Log flush time; the rate of _count is the flush rate (LogFlushRateAndTimeMs)", (), None),
    ("cleaner_max_dirty_percent", GAUGE, "kafka_log_logcleanermanager_max_dirty_percent",
     "Dirty ratio (%) of the dirtiest compacted log at the last cleaner pass (max-dirty-percent)", (), "livemax"),
    ("cleaner_max_clean_time", GAUGE, "kafka_log_logcleaner_max_clean_time_secs",
     "Longest cleaning of one log in the last cleaner pass, seconds (max-clean-time-secs)", (), "livemax"),
    ("cleaner_recopy_percent", GAUGE, "kafka_log_logcleaner_cleaner_recopy_percent",
     "Bytes written over bytes read (%) by the last log cleaning (cleaner-recopy-percent)", (), "livemax"),
    ("processor_idle", GAUGE, "kafka_network_socketserver_network_processor_idle_ratio",
     "Fraction of time a network processor waits in select (IdlePercent)", ("network_processor",), "livemax"),
    ("handler_idle", GAUGE, "kafka_server_kafkarequesthandlerpool_request_handler_idle_ratio",
     "Fraction of time a request handler waits for requests (RequestHandlerAvgIdlePercent)", ("handler",), "livemax"),
    ("connection_count", GAUGE, "kafka_server_socketservermetrics_connection_count",
     "Open connections (connection-count)", ("listener", "network_processor"), "livesum"),
    ("connection_creation", COUNTER, "kafka_server_socketservermetrics_connection_creation",
     "Connections accepted (connection-creation-total)", ("listener",), None),
    ("num_groups", GAUGE, "kafka_coordinator_group_groupmetadatamanager_num_groups",
     "Consumer groups by state (NumGroups<State>)", ("state",), "livesum"),
    ("isr_shrinks", COUNTER, "kafka_server_replicamanager_isr_shrinks",
     "ISR shrinks of partitions led here (IsrShrinksPerSec)", (), None),
    ("isr_expands", COUNTER, "kafka_server_replicamanager_isr_expands",
     "ISR expansions of partitions led here (IsrExpandsPerSec)", (), None),
    ("replica_max_lag", GAUGE, "kafka_server_replicafetchermanager_max_lag",
     "Records the most lagging partition this broker follows is behind its leader's high watermark "
     "(ReplicaFetcherManager MaxLag)", (), "livemax"),
)

# Series the supervisor computes at scrape time (gauges, no per-process files).
SCRAPE_TIME_METRICS = (
    "kafka_server_app_info",
    "kafka_network_requestchannel_request_queue_size",
    "kafka_server_replicamanager_partition_count",
    "kafka_server_replicamanager_leader_count",
    "kafka_server_replicamanager_under_replicated_partitions",
    "kafka_server_replicamanager_under_min_isr_partition_count",
    "kafka_controller_kafkacontroller_offline_partitions_count",
    "kafka_controller_kafkacontroller_active_controller_count",
    "kafka_log_logmanager_offline_log_directory_count",
    "kafka_log_logmanager_log_directory_offline",
    "kafka_log_log_size",
    "kafka_log_log_num_log_segments",
    "kafka_log_log_log_end_offset",
    "kafka_log_log_log_start_offset",
)


def exposed_sample_names() -> set[str]:
    """Every sample name /metrics can show."""
    names = set(SCRAPE_TIME_METRICS)
    for _attr, kind, name, _doc, _labels, _mode in PROCESS_METRICS:
        if kind == COUNTER:
            names.add(name + "_total")
        elif kind == HISTOGRAM:
            names.update((name + "_bucket", name + "_sum", name + "_count"))
        else:
            names.add(name)
    return names
