package io.kraft.audit;

import java.io.Serializable;

/**
 * One file to read, as audit/source.py plans it: the node, the file, and for a segment the
 * offset range [start, end) (end -1 = to the end) and whether to give one row per data batch.
 * Written by the Python side as tab-separated fields, the path last.
 */
record FileTask(int nodeId, String kind, long baseOffset, int snapshotEpoch, long start,
                long end, boolean batchesOnly, String path) implements Serializable {

    static FileTask parse(String line) {
        String[] f = line.split("\t", 8);
        return new FileTask(Integer.parseInt(f[0]), f[1], Long.parseLong(f[2]),
            Integer.parseInt(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]),
            f[6].equals("1"), f[7]);
    }

    boolean snapshot() {
        return kind.equals("snapshot");
    }
}
