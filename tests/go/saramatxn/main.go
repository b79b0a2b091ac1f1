// Sarama's transactional producer for klog's tests, the same scenario as tests/js/txn_producer.js: <transactions>
// transactions of <per-txn> records "<n>-<i>" over partitions 0 and 1 of <topic>; every third (n % 3 == 2) is aborted,
// the others committed, each with AddOffsetsToTxn(<group>, offset n). Then a zombie: producer A opens a transaction
// and writes "zombie-0", producer B with the same transactional id starts (fencing A and aborting its transaction),
// A's commit must fail, B commits "b-0". One JSON line per outcome on stdout.
// Usage: saramatxn <brokers> <topic> <transactional-id> <group> <transactions> <per-txn>
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
)

func emit(event map[string]any) {
	line, _ := json.Marshal(event)
	fmt.Println(string(line))
}

func fail(what string, err error) {
	emit(map[string]any{"error": what + ": " + err.Error()})
	os.Exit(1)
}

func newProducer(brokers []string, tid string) sarama.SyncProducer {
	config := sarama.NewConfig()
	config.Version = sarama.V4_3_1_0
	config.ClientID = "klog-sarama-txn"
	config.Producer.Idempotent = true
	config.Producer.Transaction.ID = tid
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Return.Successes = true
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Net.MaxOpenRequests = 1
	producer, err := sarama.NewSyncProducer(brokers, config)
	if err != nil {
		fail("new producer", err)
	}
	return producer
}

func main() {
	brokers, topic, tid, group := strings.Split(os.Args[1], ","), os.Args[2], os.Args[3], os.Args[4]
	transactions, _ := strconv.Atoi(os.Args[5])
	perTxn, _ := strconv.Atoi(os.Args[6])
	a := newProducer(brokers, tid)
	for n := 0; n < transactions; n++ {
		if err := a.BeginTxn(); err != nil {
			fail("begin", err)
		}
		for i := 0; i < perTxn; i++ {
			msg := &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Value: sarama.StringEncoder(fmt.Sprintf("%d-%d", n, i))}
			if _, _, err := a.SendMessage(msg); err != nil {
				fail("send", err)
			}
		}
		offsets := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: int64(n)}}}
		if err := a.AddOffsetsToTxn(offsets, group); err != nil {
			fail("add offsets", err)
		}
		if n%3 == 2 {
			if err := a.AbortTxn(); err != nil {
				fail("abort", err)
			}
			emit(map[string]any{"txn": n, "outcome": "aborted"})
		} else {
			if err := a.CommitTxn(); err != nil {
				fail("commit", err)
			}
			emit(map[string]any{"txn": n, "outcome": "committed"})
		}
	}
	if err := a.BeginTxn(); err != nil {
		fail("zombie begin", err)
	}
	if _, _, err := a.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder("zombie-0")}); err != nil {
		fail("zombie send", err)
	}
	b := newProducer(brokers, tid)
	if err := a.CommitTxn(); err != nil {
		emit(map[string]any{"zombie": "fenced", "error": err.Error()})
	} else {
		emit(map[string]any{"zombie": "committed"})
	}
	if err := b.BeginTxn(); err != nil {
		fail("successor begin", err)
	}
	if _, _, err := b.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 1, Value: sarama.StringEncoder("b-0")}); err != nil {
		fail("successor send", err)
	}
	if err := b.CommitTxn(); err != nil {
		fail("successor commit", err)
	}
	emit(map[string]any{"successor": "committed"})
	_ = b.Close()
	_ = a.Close()
}
