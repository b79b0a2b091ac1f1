"""The ``klog_cluster`` pytest fixture as an application's test suite would use it: the marker sizes the cluster, a
topic created through one node is led across all of them, and the waits follow a paused (SIGSTOP) node's partition
going offline (one replica: no other ISR member to lead) and coming back when it resumes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(240)


@pytest.mark.klog_cluster(size=5)
def test_a_five_node_cluster_from_the_marker_and_a_paused_leader(klog_cluster) -> None:
    assert klog_cluster.node_ids == [1, 2, 3, 4, 5]
    assert klog_cluster.live_brokers(5) == {1, 2, 3, 4, 5}
    assert klog_cluster.create_topic("orders", 5, via=5) == (0, None)
    leaders = klog_cluster.wait_for_topic("orders", 5)
    assert sorted(leaders.values()) == [1, 2, 3, 4, 5]
    for partition, leader in leaders.items():
        assert klog_cluster.wait_for_leader("orders", partition) == leader
        klog_cluster.wait_for_isr("orders", partition, {leader})
    victim = leaders[0]
    klog_cluster.pause(victim)
    assert victim not in klog_cluster.live_nodes()
    klog_cluster.wait_for_brokers([i for i in klog_cluster.node_ids if i != victim])
    assert all(klog_cluster.leaders(i, "orders")[0] == -1 for i in klog_cluster.live_nodes())
    klog_cluster.resume(victim)
    klog_cluster.wait_for_brokers()
    assert klog_cluster.wait_for_leader("orders", 0) == victim
    klog_cluster.wait_for_isr("orders", 0, {victim})
