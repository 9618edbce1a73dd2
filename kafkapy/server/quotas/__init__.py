"""Client quotas and connection limits (Kafka's ClientQuotaManager,
ControllerMutationQuotaManager and ConnectionQuotas); docs/architecture.md,
"Quotas and connection limits".

* ``entities`` — Kafka's quota keys and entity rules: AlterClientQuotas /
  DescribeClientQuotas validation and matching over the metadata model's
  user/client entity configs (``metadata.model``).
* ``table`` — ``QuotaTable``: the per-broker accounting every handler
  worker shares (a ``MAP_SHARED`` memfd made before the supervisor forks):
  Kafka's sampled rate (``quota.window.num`` windows of
  ``quota.window.size.seconds``) per quota sensor.
* ``manager`` — ``QuotaManager`` (one per worker process): resolves the quota
  of a (user, client-id) as Kafka does, records produce bytes, fetch bytes,
  handler time and partition mutations, and returns throttle times.
* ``throttle`` — the THROTTLED message a worker sends a processor instead of
  a plain response: mute after sending (KIP-219) or delay the response.
* ``connections`` — ``ConnectionQuotas``: connection counts per IP and per
  listener shared by the acceptor and the processors.
"""
