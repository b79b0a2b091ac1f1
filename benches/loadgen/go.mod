module klog.dev/benches/loadgen

go 1.22
