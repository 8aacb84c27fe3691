package io.kraft.audit;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;
import scala.Tuple2;

/**
 * The entry point Python calls through py4j (audit/jvm.py): the rows of the kraft-metadata
 * data source, decoded on the JVM. One Spark partition per file, as the Python source has.
 */
public final class KraftAudit {
    private KraftAudit() {
    }

    /**
     * @param tasks one FileTask per line (audit/jvm.py writes them)
     * @param ddl   the schema, audit.decode.SPARK_DDL
     */
    public static Dataset<Row> read(SparkSession spark, String tasks, String ddl) {
        StructType schema = Columns.schema(ddl);
        List<String> lines = tasks.isEmpty() ? List.of() : Arrays.asList(tasks.split("\n"));
        JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
        Broadcast<SerializableConfiguration> conf = hadoopConf(spark);
        JavaRDD<InternalRow> rows = context.parallelize(lines, Math.max(1, lines.size()))
            .flatMap(line -> new InternalRows(new FileRows(FileTask.parse(line),
                conf.value().value())));
        // Internal rows skip the per-row conversion of external Rows (createDataFrame's cost).
        return ((org.apache.spark.sql.classic.SparkSession) spark)
            .internalCreateDataFrame(rows.rdd(), schema, false);
    }

    /**
     * The partition replay (PartitionReplay) in `shards` tasks, each reading every file of
     * the canonical copy in order and replaying the partitions it owns.
     *
     * @param tasks   FileTasks in offset order: the seeding snapshot first, then segments
     * @param history ClusterHistory as JSON
     * @param outDdl  audit.replay.OUT_DDL
     */
    public static Dataset<Row> replay(SparkSession spark, String tasks, String history,
                                      boolean complete, int shards, String outDdl) {
        List<FileTask> files = new ArrayList<>();
        for (String line : tasks.isEmpty() ? new String[0] : tasks.split("\n")) {
            files.add(FileTask.parse(line));
        }
        ClusterHistory parsed = ClusterHistory.parse(history);
        List<Integer> ids = new ArrayList<>();
        for (int i = 0; i < shards; i++) {
            ids.add(i);
        }
        JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
        Broadcast<SerializableConfiguration> conf = hadoopConf(spark);
        JavaRDD<InternalRow> rows = context.parallelize(ids, shards).flatMap(
            shard -> new ReplayShard(files, shard, shards, parsed, complete,
                conf.value().value()));
        return ((org.apache.spark.sql.classic.SparkSession) spark)
            .internalCreateDataFrame(rows.rdd(), StructType.fromDDL(outDdl), false);
    }

    /**
     * The rows the driver needs out of a record-level read (those of the given record types
     * and those with an error), and the number of rows the read has: one pass.
     */
    public static DriverRows driverRows(SparkSession spark, String tasks, String ddl,
                                        String recordTypes) {
        StructType schema = Columns.schema(ddl);
        Set<String> keep = new HashSet<>(Arrays.asList(recordTypes.split(",")));
        List<String> lines = tasks.isEmpty() ? List.of() : Arrays.asList(tasks.split("\n"));
        JavaSparkContext context = JavaSparkContext.fromSparkContext(spark.sparkContext());
        Broadcast<SerializableConfiguration> conf = hadoopConf(spark);
        List<Tuple2<Long, List<Object[]>>> parts = context
            .parallelize(lines, Math.max(1, lines.size()))
            .map(line -> {
                FileRows rows = new FileRows(FileTask.parse(line), conf.value().value());
                long count = 0;
                List<Object[]> kept = new ArrayList<>();
                while (rows.hasNext()) {
                    Object[] row = rows.next();
                    count++;
                    if (row[Columns.ERROR] != null || keep.contains(row[Columns.RECORD_TYPE])) {
                        kept.add(row);
                    }
                }
                return new Tuple2<>(count, kept);
            }).collect();
        long count = 0;
        List<InternalRow> kept = new ArrayList<>();
        for (Tuple2<Long, List<Object[]>> part : parts) {
            count += part._1();
            new InternalRows(part._2().iterator()).forEachRemaining(kept::add);
        }
        Dataset<Row> frame = ((org.apache.spark.sql.classic.SparkSession) spark)
            .internalCreateDataFrame(context.parallelize(kept, 1).rdd(), schema, false);
        return new DriverRows(count, frame);
    }

    /**
     * The session's Hadoop configuration (spark.hadoop.* included) for the tasks: with it
     * they open URIs (LogFiles) with the file systems and credentials the driver has.
     */
    static Broadcast<SerializableConfiguration> hadoopConf(SparkSession spark) {
        return SerializableConfiguration.broadcast(spark.sparkContext(),
            ((org.apache.spark.sql.classic.SparkSession) spark).sessionState().newHadoopConf());
    }

    /** What driverRows gives Python. */
    public static final class DriverRows {
        private final long count;
        private final Dataset<Row> rows;

        DriverRows(long count, Dataset<Row> rows) {
            this.count = count;
            this.rows = rows;
        }

        public long count() {
            return count;
        }

        public Dataset<Row> rows() {
            return rows;
        }
    }
}
