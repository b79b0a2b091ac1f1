//go:build tools

// Package franzgo pins franz-go's kgo package, whose own test binary (go test -c
// github.com/twmb/franz-go/pkg/kgo) tests/test_transactions_franz_go.py builds and runs
// (its TestTxnEtl) against klog and against Apache Kafka.
package franzgo

import _ "github.com/twmb/franz-go/pkg/kgo"
