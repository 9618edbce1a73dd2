// KafkaJS driver for tests/integration/test_kafkajs.py.
//
// Usage: node driver.js '<json command>'   (kafkajs found through NODE_PATH)
// Prints one JSON line on stdout: {"ok": true, "result": ...} or
// {"ok": false, "error": {"name", "type", "message", "retriable"}}.
// KafkaJS's own log goes to stderr (level WARN unless cmd.logLevel says so).
// Every wait is bounded by cmd.timeoutMs (default 20 s); the whole process
// also exits after cmd.processTimeoutMs (default 45 s) whatever it is doing.
//
// Common command fields: op, brokers (list of host:port), clientId, sasl
// (KafkaJS's sasl object, e.g. {mechanism: "scram-sha-256", username, password}).
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel, CompressionTypes, CompressionCodecs, ConfigResourceTypes } = require('kafkajs')

const cmd = JSON.parse(process.argv[2])
const TIMEOUT_MS = cmd.timeoutMs || 20000

setTimeout(() => {
  finish({ ok: false, error: { name: 'DriverTimeout', message: `driver ran over ${cmd.processTimeoutMs || 45000} ms` } }, 3)
}, cmd.processTimeoutMs || 45000).unref()

function describeError (e) {
  return {
    name: e && e.name,
    type: e && e.type,
    message: e && e.message,
    retriable: e && e.retriable,
    cause: e && e.cause ? describeError(e.cause) : undefined,
    // KafkaJSAggregateError (createTopics), KafkaJSDeleteTopicRecordsError and
    // KafkaJSDeleteGroupsError carry per-item errors
    errors: e && Array.isArray(e.errors) ? e.errors.map(describeError) : undefined,
    partitions: e && Array.isArray(e.partitions) ? e.partitions.map((p) => ({ partition: p.partition, offset: p.offset, type: p.error && p.error.type })) : undefined,
    groups: e && Array.isArray(e.groups) ? e.groups.map((g) => ({ groupId: g.groupId, errorCode: g.errorCode, type: g.error && g.error.type })) : undefined
  }
}

function stderrLogger () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`[kafkajs ${label} ${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

function client (id) {
  return new Kafka({
    clientId: id || cmd.clientId || 'kafkapy-test',
    brokers: cmd.brokers,
    sasl: cmd.sasl,
    ssl: false,
    connectionTimeout: 5000,
    reauthenticationThreshold: cmd.reauthenticationThreshold || 10000,
    requestTimeout: 15000,
    retry: { retries: cmd.retries === undefined ? 5 : cmd.retries, initialRetryTime: 100, maxRetryTime: 2000 },
    logLevel: logLevel[cmd.logLevel || 'WARN'],
    logCreator: stderrLogger
  })
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function until (predicate, what, timeoutMs = TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(50)
  }
}

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD
}

function messages (spec) {
  // spec: {count, prefix, partition?, key?} -> KafkaJS messages with a header
  const list = []
  for (let i = 0; i < spec.count; i++) {
    const m = { key: spec.key !== undefined ? spec.key : `k${i}`, value: `${spec.prefix || 'v'}${i}`, headers: { seq: String(i) } }
    if (spec.partition !== undefined) m.partition = spec.partition
    list.push(m)
  }
  return list
}

function record (topic, partition, message) {
  return {
    topic,
    partition,
    offset: Number(message.offset),
    key: message.key === null ? null : message.key.toString(),
    value: message.value === null ? null : message.value.toString(),
    headers: Object.fromEntries(Object.entries(message.headers || {}).map(([k, v]) => [k, v && v.toString()]))
  }
}

function consumerConfig (groupId, extra = {}) {
  return {
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 200,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
    readUncommitted: cmd.readUncommitted === true,
    ...extra
  }
}

// -- operations ---------------------------------------------------------------

// produce: {topic, acks, compression, count, prefix, idempotent, sends}
// Sends `sends` (default 1) requests of `count` messages; the results of each.
async function produce () {
  const producer = client().producer({ idempotent: !!cmd.idempotent, maxInFlightRequests: cmd.idempotent ? 1 : undefined, allowAutoTopicCreation: cmd.autoCreate === true })
  await producer.connect()
  const results = []
  try {
    for (let s = 0; s < (cmd.sends || 1); s++) {
      results.push(await producer.send({
        topic: cmd.topic,
        acks: cmd.acks,
        compression: COMPRESSION[cmd.compression || 'none'],
        timeout: 10000,
        messages: messages({ count: cmd.count, prefix: `${cmd.prefix || 'v'}${s}-`, partition: cmd.partition })
      }))
    }
  } finally {
    await producer.disconnect()
  }
  // The codecs this kafkajs can use: the others' entries throw KafkaJSNotImplemented.
  const codecs = Object.keys(CompressionCodecs).map(Number).filter((t) => {
    try { CompressionCodecs[t](); return true } catch (e) { return false }
  })
  return { results, codecs }
}

// consume: {topic, groupId, expect, fromBeginning, readUncommitted, settleMs}
// Consumes in a group until `expect` records arrived (then waits settleMs more
// for any surplus), commits, leaves. Returns the records and the GROUP_JOIN events.
async function consume () {
  const consumer = client().consumer(consumerConfig(cmd.groupId))
  const got = []
  const joins = []
  consumer.on(consumer.events.GROUP_JOIN, (e) => joins.push(e.payload))
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [cmd.topic], fromBeginning: cmd.fromBeginning !== false })
    await consumer.run({ eachMessage: async ({ topic, partition, message }) => { got.push(record(topic, partition, message)) } })
    await until(() => got.length >= cmd.expect, `${cmd.expect} records (have ${got.length})`)
    if (cmd.settleMs) await sleep(cmd.settleMs)
  } finally {
    await consumer.disconnect()
  }
  return { records: got, joins }
}

// group: two members of one group over a topic with several partitions.
// A joins and consumes `initial` records already there; B joins and the group
// rebalances (both get a new assignment); then `more` records are produced
// and consumed across A and B; both leave (committing).
async function group () {
  const kafka = client()
  const members = {}
  const startMember = async (name) => {
    const consumer = kafka.consumer(consumerConfig(cmd.groupId))
    const m = { consumer, got: [], joins: [], commits: [] }
    consumer.on(consumer.events.GROUP_JOIN, (e) => m.joins.push({ at: m.got.length, memberId: e.payload.memberId, isLeader: e.payload.isLeader, assignment: e.payload.memberAssignment }))
    consumer.on(consumer.events.COMMIT_OFFSETS, (e) => m.commits.push(e.payload.topics))
    await consumer.connect()
    await consumer.subscribe({ topics: [cmd.topic], fromBeginning: true })
    await consumer.run({
      autoCommitInterval: 200,
      eachMessage: async ({ topic, partition, message }) => { m.got.push(record(topic, partition, message)) }
    })
    members[name] = m
    return m
  }
  const a = await startMember('a')
  try {
    await until(() => a.got.length >= cmd.initial, `A consuming ${cmd.initial} records`)
    const joinsBefore = a.joins.length
    const b = await startMember('b')
    await until(() => a.joins.length > joinsBefore && b.joins.length > 0, 'A and B both joined the new generation')
    // A second rebalance may follow quickly: wait until the two assignments
    // are disjoint and cover all partitions.
    const assigned = (m) => (m.joins.length ? (m.joins[m.joins.length - 1].assignment[cmd.topic] || []) : [])
    await until(() => {
      const pa = assigned(a); const pb = assigned(b)
      return pa.length + pb.length === cmd.partitions && new Set([...pa, ...pb]).size === cmd.partitions
    }, 'a disjoint, complete assignment')
    const producer = kafka.producer()
    await producer.connect()
    await producer.send({ topic: cmd.topic, acks: -1, messages: messages({ count: cmd.more, prefix: 'more-' }) })
    await producer.disconnect()
    const more = () => [...a.got, ...b.got].filter((r) => r.value.startsWith('more-'))
    await until(() => new Set(more().map((r) => r.value)).size >= cmd.more, `${cmd.more} new records across A and B`)
  } finally {
    await Promise.all(Object.values(members).map((m) => m.consumer.disconnect()))
  }
  const report = {}
  for (const [name, m] of Object.entries(members)) report[name] = { records: m.got, joins: m.joins, commits: m.commits }
  return report
}

// admin: {calls: [[method, argument, ...], ...]} run in order on one admin client;
// each result or error is reported (calls go on after an error).
async function admin () {
  const a = client().admin()
  await a.connect()
  const results = []
  try {
    for (const [method, arg, ...more] of cmd.calls) {
      try {
        let value
        if (method === 'describeConfigs') {
          value = await a.describeConfigs({ ...arg, resources: arg.resources.map((r) => ({ ...r, type: ConfigResourceTypes[r.type] })) })
        } else if (method === 'describeGroups') {
          value = await a.describeGroups(arg)
          for (const g of value.groups) for (const m of g.members) { delete m.memberMetadata; delete m.memberAssignment }
        } else {
          value = await a[method](arg, ...more)
        }
        results.push({ ok: true, value })
      } catch (e) {
        results.push({ ok: false, error: describeError(e) })
      }
    }
  } finally {
    await a.disconnect()
  }
  return results
}

// txn: {transactionalId, steps: [{sends: [{topic, count, prefix, partition}],
//        offsets: {consumerGroupId, topics}, end: "commit" | "abort"}]}
async function txn () {
  const producer = client().producer({ transactionalId: cmd.transactionalId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 30000 })
  await producer.connect()
  const steps = []
  try {
    for (const step of cmd.steps) {
      const t = await producer.transaction()
      const sent = []
      try {
        for (const s of step.sends || []) {
          sent.push(await t.send({ topic: s.topic, messages: messages(s) }))
        }
        if (step.offsets) await t.sendOffsets(step.offsets)
        if (step.end === 'abort') await t.abort(); else await t.commit()
        steps.push({ ok: true, sent })
      } catch (e) {
        steps.push({ ok: false, sent, error: describeError(e) })
        if (t.isActive()) await t.abort().catch(() => {})
      }
    }
  } finally {
    await producer.disconnect()
  }
  return steps
}

// fence: {topic, transactionalId}. A producer opens a transaction and sends;
// a second producer with the same transactional id initializes (Kafka aborts
// the open transaction and bumps the epoch); the first one's next send and
// its commit are refused; the second commits. What each step answered.
async function fence () {
  const kafka = client()
  const make = () => kafka.producer({ transactionalId: cmd.transactionalId, idempotent: true, maxInFlightRequests: 1 })
  const zombie = make()
  const fresh = make()
  const report = {}
  const attempt = async (name, fn) => {
    try { await fn(); report[name] = { ok: true } } catch (e) { report[name] = { ok: false, error: describeError(e) } }
  }
  await zombie.connect()
  await fresh.connect()
  try {
    const old = await zombie.transaction()
    await old.send({ topic: cmd.topic, messages: [{ value: 'zombie-open' }] })
    const t = await fresh.transaction() // InitProducerId: fences the zombie
    await attempt('zombieSend', () => old.send({ topic: cmd.topic, messages: [{ value: 'zombie-late' }] }))
    await attempt('zombieCommit', () => old.commit())
    await t.send({ topic: cmd.topic, messages: [{ value: 'fresh' }] })
    await attempt('freshCommit', () => t.commit())
  } finally {
    await fresh.disconnect()
    await zombie.disconnect().catch(() => {})
  }
  return report
}

// lso: {topic, transactionalId, maxWaitMs}. A read_committed consumer with
// a long maxWaitTimeInMs reads one plain record; a transaction opens and
// sends, plain records follow it; then the transaction commits. What the
// consumer had while the transaction was open, what it has after the
// commit, and how long after the commit the last record arrived.
async function lso () {
  const kafka = client()
  const txProducer = kafka.producer({ transactionalId: cmd.transactionalId, idempotent: true, maxInFlightRequests: 1 })
  const producer = kafka.producer()
  const consumer = kafka.consumer(consumerConfig(`${cmd.topic}-reader`, { maxWaitTimeInMs: cmd.maxWaitMs }))
  const got = []
  const values = () => got.map((g) => g.value)
  await Promise.all([txProducer.connect(), producer.connect(), consumer.connect()])
  try {
    await consumer.subscribe({ topics: [cmd.topic], fromBeginning: true })
    await consumer.run({ eachMessage: async ({ message }) => { got.push({ value: message.value.toString(), at: Date.now() }) } })
    await producer.send({ topic: cmd.topic, acks: -1, messages: [{ value: 'plain-0' }] })
    await until(() => got.length >= 1, 'the first plain record')
    const t = await txProducer.transaction()
    await t.send({ topic: cmd.topic, messages: [{ value: 'txn-1' }] })
    await producer.send({ topic: cmd.topic, acks: -1, messages: [{ value: 'plain-2' }, { value: 'plain-3' }] })
    await sleep(500)
    const whileOpen = values()
    const committedAt = Date.now()
    await t.commit()
    await until(() => got.length >= 4, 'the committed transaction and what followed it')
    const result = { whileOpen, afterCommit: values(), commitLatencyMs: got[3].at - committedAt }
    return result
  } finally {
    // The consumer's disconnect would wait out the fetch parked for
    // maxWaitMs: it is left to the process exit (the group is this op's own).
    consumer.disconnect().catch(() => {})
    await Promise.all([txProducer.disconnect(), producer.disconnect()])
  }
}

const OPS = { produce, consume, group, admin, txn, fence, lso }

// Exit once the answer is written: an op may leave a consumer's parked
// fetch behind (lso).
const finish = (answer, code) => process.stdout.write(JSON.stringify(answer) + '\n', () => process.exit(code))
OPS[cmd.op]()
  .then((result) => finish({ ok: true, result }, 0))
  .catch((e) => finish({ ok: false, error: describeError(e) }, 1))
