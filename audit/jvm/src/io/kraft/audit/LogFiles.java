package io.kraft.audit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The bytes of one segment or snapshot file, on whichever machine the task runs. A URI
 * (`file:/`, `hdfs://`, `s3a://`: anything with a scheme followed by `:/`, the rule of
 * audit/fs.py) is read through Hadoop's FileSystem with the session's Hadoop configuration,
 * so any file system Spark can read works. A plain path is a local file (the driver made it
 * absolute) and is memory-mapped: a bare path must never fall to `fs.defaultFS`, which may
 * be HDFS on a cluster.
 */
final class LogFiles {
    private static final Pattern URI =
        Pattern.compile("^[A-Za-z][A-Za-z0-9+.-]+:/.*", Pattern.DOTALL);

    private LogFiles() {
    }

    static boolean isUri(String path) {
        return URI.matcher(path).matches();
    }

    static ByteBuffer read(String path, Configuration conf) {
        return isUri(path) ? readHadoop(path, conf) : map(path);
    }

    static ByteBuffer map(String path) {
        try (FileChannel channel = FileChannel.open(java.nio.file.Path.of(path),
                StandardOpenOption.READ)) {
            long size = channel.size();
            if (size == 0) {
                return ByteBuffer.allocate(0);
            }
            MappedByteBuffer mapped = channel.map(FileChannel.MapMode.READ_ONLY, 0, size);
            return mapped;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The whole file into the heap (one file per task at a time; segments are < 2 GiB). */
    static ByteBuffer readHadoop(String uri, Configuration conf) {
        Path path = new Path(uri);
        try {
            FileSystem fs = path.getFileSystem(conf);
            long size = fs.getFileStatus(path).getLen();
            if (size > Integer.MAX_VALUE - 8) {
                throw new IOException(uri + " is " + size + " bytes: files over 2 GiB are "
                    + "read only from local paths");
            }
            byte[] data = new byte[(int) size];
            try (FSDataInputStream in = fs.open(path)) {
                in.readFully(data);
            }
            return ByteBuffer.wrap(data);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
