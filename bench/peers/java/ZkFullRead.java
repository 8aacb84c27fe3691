// A new ZooKeeper-mode controller's read with ZooKeeper's own Java client, the same work as
// bench/peers/zk.py's kazoo reader: connect, list /brokers/topics, read every topic znode
// (the assignment), then every partition's state znode, async getData pipelined with at most
// WINDOW requests outstanding; each state is parsed and its leader checked.
// Usage: java -cp <build>:/usr/share/java/zookeeper.jar ZkFullRead HOST:PORT WINDOW
// Prints one JSON line: {"read_ms":..,"connect_ms":..,"partitions":..,"with_leader":..,"topics":..}
// Built and run by bench/peers/zk_java.py (javac at run time, against Debian's jars).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public final class ZkFullRead {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** getData of every path, at most `window` in flight; data[i] is paths[i]'s content. */
    private static byte[][] readAll(ZooKeeper zk, List<String> paths, int window)
            throws InterruptedException {
        byte[][] data = new byte[paths.size()][];
        Semaphore slots = new Semaphore(window);
        CountDownLatch done = new CountDownLatch(paths.size());
        AtomicReference<String> failure = new AtomicReference<>();
        for (int i = 0; i < paths.size(); i++) {
            slots.acquire();
            final int index = i;
            zk.getData(paths.get(i), false, (rc, path, ctx, bytes, stat) -> {
                if (rc == KeeperException.Code.OK.intValue()) {
                    data[index] = bytes;
                } else {
                    failure.compareAndSet(null, path + ": " + KeeperException.Code.get(rc));
                }
                slots.release();
                done.countDown();
            }, null);
        }
        done.await();
        if (failure.get() != null) {
            throw new IllegalStateException("getData failed: " + failure.get());
        }
        return data;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: ZkFullRead HOST:PORT WINDOW");
            System.exit(2);
        }
        int window = Integer.parseInt(args[1]);
        long started = System.nanoTime();
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 30_000, event -> {
            if (event.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        try {
            if (!connected.await(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not connected within 60 s");
            }
            long connectedAt = System.nanoTime();
            List<String> topics = zk.getChildren("/brokers/topics", false);
            List<String> topicPaths = new ArrayList<>();
            for (String topic : topics) {
                topicPaths.add("/brokers/topics/" + topic);
            }
            byte[][] assignments = readAll(zk, topicPaths, window);
            List<String> statePaths = new ArrayList<>();
            for (int t = 0; t < topics.size(); t++) {
                Iterator<String> partitions = JSON.readTree(assignments[t]).get("partitions")
                        .fieldNames();
                while (partitions.hasNext()) {
                    statePaths.add(topicPaths.get(t) + "/partitions/" + partitions.next()
                            + "/state");
                }
            }
            byte[][] states = readAll(zk, statePaths, window);
            AtomicInteger withLeader = new AtomicInteger();
            for (byte[] state : states) {
                JsonNode node = JSON.readTree(state);
                if (node.get("leader").asInt() >= 0) {
                    withLeader.incrementAndGet();
                }
            }
            long finished = System.nanoTime();
            System.out.printf("{\"read_ms\": %.3f, \"connect_ms\": %.3f, \"partitions\": %d, "
                    + "\"with_leader\": %d, \"topics\": %d}%n",
                    (finished - started) / 1e6, (connectedAt - started) / 1e6,
                    statePaths.size(), withLeader.get(), topics.size());
        } finally {
            zk.close();
        }
    }
}
