// kafkajs's transactional producer for klog's tests: <transactions> transactions of <per-txn> records "<n>-<i>" over
// partitions 0 and 1 of <topic>; every third (n % 3 == 2) is aborted, the others committed, each with
// sendOffsets(<group>, offset n) inside it. Then a zombie: producer A opens a transaction and writes "zombie-0",
// producer B with the same transactional id starts (fencing A and aborting its transaction), A's commit must fail,
// B commits "b-0". One JSON line per outcome on stdout.
// Usage: node txn_producer.js <brokers> <topic> <transactional-id> <group> <transactions> <per-txn>
const { Kafka, logLevel } = require('kafkajs')

const [brokers, topic, transactionalId, group, transactions, perTxn] = process.argv.slice(2)
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n')
const kafka = new Kafka({ clientId: 'klog-kafkajs-txn', brokers: brokers.split(','), logLevel: logLevel.NOTHING })
const newProducer = () => kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })

async function main () {
  const a = newProducer()
  await a.connect()
  for (let n = 0; n < Number(transactions); n++) {
    const txn = await a.transaction()
    const messages = []
    for (let i = 0; i < Number(perTxn); i++) messages.push({ partition: i % 2, value: `${n}-${i}` })
    await txn.send({ topic, messages })
    await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: String(n) }] }] })
    if (n % 3 === 2) {
      await txn.abort()
      emit({ txn: n, outcome: 'aborted' })
    } else {
      await txn.commit()
      emit({ txn: n, outcome: 'committed' })
    }
  }
  const zombie = await a.transaction()
  await zombie.send({ topic, messages: [{ partition: 0, value: 'zombie-0' }] })
  const b = newProducer()
  await b.connect()
  // kafkajs's InitProducerId with the transactional id comes with its first transaction(), not connect()
  const txn = await b.transaction()
  try {
    await zombie.commit()
    emit({ zombie: 'committed' })
  } catch (err) {
    emit({ zombie: 'fenced', error: err.type || err.name })
  }
  await txn.send({ topic, messages: [{ partition: 1, value: 'b-0' }] })
  await txn.commit()
  emit({ successor: 'committed' })
  await b.disconnect()
  await a.disconnect().catch(() => {})
}

main().then(() => process.exit(0), (err) => {
  emit({ error: String(err && err.stack) })
  process.exit(1)
})
