package io.kraft.audit;

import java.util.Arrays;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;

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
        JavaRDD<Row> rows = context.parallelize(lines, Math.max(1, lines.size()))
            .flatMap(line -> new RowIterator(new FileRows(FileTask.parse(line))));
        return spark.createDataFrame(rows, schema);
    }

    /** Object[] rows as Spark Rows (int[] lists as the Integer arrays Spark expects). */
    private record RowIterator(FileRows rows) implements java.util.Iterator<Row> {
        @Override
        public boolean hasNext() {
            return rows.hasNext();
        }

        @Override
        public Row next() {
            Object[] values = rows.next();
            for (int i = 0; i < values.length; i++) {
                if (values[i] instanceof int[] ints) {
                    values[i] = Arrays.stream(ints).boxed().toArray(Integer[]::new);
                }
            }
            return RowFactory.create(values);
        }
    }
}
