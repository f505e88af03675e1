/*
 * Interoperability harness: drives Hive 2.3's own ACID code (the hive-exec / hive-common jars shipped in the
 * pyspark wheel) so that the Python implementation can be checked against it.
 *
 * Written for this project's tests; no Hive source is copied here. It only calls Hive's public entry points:
 *   read   -> OrcInputFormat.getSplits + OrcInputFormat.getReader (row mode: OrcRawRecordMerger behind
 *             AcidInputFormat.RowReader, keys are RecordIdentifier) or VectorizedOrcAcidRowBatchReader (vectorized)
 *   write  -> OrcOutputFormat.getRecordUpdater (OrcRecordUpdater) with AcidOutputFormat.Options
 *   state  -> AcidUtils.getAcidState
 *   batch  -> any number of the above, described as a JSON array on stdin, in one JVM
 *
 * Every result is JSON on stdout, one object per line. Errors: message on stderr, exit status 1 (batch mode reports
 * per-job errors in the job's result line instead and only fails on malformed input).
 *
 * Hive 2.3 vocabulary: what Hive 3 calls a write id is a "transaction id" here, and the snapshot is a single
 * ValidReadTxnList (or ValidCompactorTxnList) applied to the ids found in the files and directory names. The class
 * path must put hive-common-2.3.10.jar before hive-storage-api (both define ValidReadTxnList; Hive 2.3 needs its own).
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.File;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.common.ValidCompactorTxnList;
import org.apache.hadoop.hive.common.ValidReadTxnList;
import org.apache.hadoop.hive.common.ValidTxnList;
import org.apache.hadoop.hive.ql.exec.vector.BytesColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DoubleColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.hadoop.hive.ql.io.AcidInputFormat;
import org.apache.hadoop.hive.ql.io.AcidOutputFormat;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.ql.io.RecordIdentifier;
import org.apache.hadoop.hive.ql.io.RecordUpdater;
import org.apache.hadoop.hive.ql.io.orc.OrcInputFormat;
import org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat;
import org.apache.hadoop.hive.ql.io.orc.OrcStruct;
import org.apache.hadoop.hive.ql.io.orc.VectorizedOrcAcidRowBatchReader;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorFactory;
import org.apache.hadoop.hive.serde2.objectinspector.PrimitiveObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.StructField;
import org.apache.hadoop.hive.serde2.objectinspector.StructObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.mapred.FileInputFormat;
import org.apache.hadoop.mapred.InputSplit;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.Reporter;

public final class HiveAcidHarness {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  /** Positions in the ACID event struct (operation, originalTransaction, bucket, rowId, currentTransaction, row). */
  private static final int EVENT_ORIGINAL_TXN = 1;
  private static final int EVENT_BUCKET = 2;
  private static final int EVENT_ROW_ID = 3;

  /** The real stdout; System.out is pointed at stderr so that library logging cannot corrupt the JSON. */
  private static PrintStream out;

  private HiveAcidHarness() {
  }

  // ------------------------------------------------------------------------------------------------ entry point

  public static void main(String[] args) {
    out = new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    int status = 0;
    try {
      run(args);
    } catch (UsageException e) {
      System.err.println("usage error: " + e.getMessage());
      System.err.println(USAGE);
      status = 2;
    } catch (Throwable t) {
      System.err.println("error: " + describe(t));
      t.printStackTrace(System.err);
      status = 1;
    }
    out.flush();
    System.exit(status);
  }

  private static final String USAGE = String.join("\n",
      "HiveAcidHarness read DIR [DIR...] --columns name:type,... [--mode row|vectorized] [validity]",
      "HiveAcidHarness write [SPEC.json|-]         (a JSON object or array of objects; '-' or nothing = stdin)",
      "HiveAcidHarness state DIR [validity]",
      "HiveAcidHarness batch                       (JSON array of jobs on stdin; one result line per job)",
      "validity: [--hwm N] [--min-open N] [--exceptions a,b,...] [--compactor]   (default: everything valid)");

  private static void run(String[] args) throws Exception {
    if (args.length == 0) {
      throw new UsageException("no command");
    }
    String command = args[0];
    List<String> rest = Arrays.asList(args).subList(1, args.length);
    switch (command) {
      case "read":
        for (JsonNode row : readCommand(parseOptions(rest))) {
          emit(row);
        }
        break;
      case "write": {
        JsonNode spec = readJsonInput(rest.isEmpty() ? "-" : rest.get(0));
        if (spec.isArray()) {
          for (JsonNode one : spec) {
            emit(write(one));
          }
        } else {
          emit(write(spec));
        }
        break;
      }
      case "state":
        emit(stateCommand(parseOptions(rest)));
        break;
      case "batch":
        batch(readJsonInput(rest.isEmpty() ? "-" : rest.get(0)));
        break;
      default:
        throw new UsageException("unknown command " + command);
    }
  }

  private static void emit(JsonNode node) throws Exception {
    out.println(JSON.writeValueAsString(node));
  }

  private static JsonNode readJsonInput(String source) throws Exception {
    if ("-".equals(source)) {
      InputStream in = System.in;
      return JSON.readTree(in);
    }
    return JSON.readTree(new File(source));
  }

  private static String describe(Throwable t) {
    StringBuilder text = new StringBuilder(t.getClass().getName() + ": " + t.getMessage());
    for (Throwable cause = t.getCause(); cause != null && cause != cause.getCause(); cause = cause.getCause()) {
      text.append(" <- ").append(cause.getClass().getName()).append(": ").append(cause.getMessage());
    }
    return text.toString();
  }

  /** Bad command line or job description. */
  private static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  // ------------------------------------------------------------------------------------------------ batch

  /**
   * Run a JSON array of jobs, each {"op": "read"|"write"|"state", ...same keys as the command line...}, printing one
   * line per job: {"job": i, "ok": true, "result": ...} or {"job": i, "ok": false, "error": "..."}.
   */
  private static void batch(JsonNode jobs) throws Exception {
    if (!jobs.isArray()) {
      throw new UsageException("batch input must be a JSON array of jobs");
    }
    int index = 0;
    for (JsonNode job : jobs) {
      ObjectNode line = NODES.objectNode();
      line.put("job", index++);
      try {
        String op = job.path("op").asText();
        JsonNode result;
        switch (op) {
          case "read":
            result = readCommand(optionsFromJson(job));
            break;
          case "write":
            result = write(job);
            break;
          case "state":
            result = stateCommand(optionsFromJson(job));
            break;
          default:
            throw new UsageException("job " + (index - 1) + ": unknown op '" + op + "'");
        }
        line.put("ok", true);
        line.set("result", result);
      } catch (Exception e) {
        line.put("ok", false);
        line.put("error", describe(e));
      }
      emit(line);
    }
  }

  // ------------------------------------------------------------------------------------------------ options

  /** Parsed read/state options. */
  private static final class Options {
    final List<String> dirs = new ArrayList<>();
    List<Column> columns = new ArrayList<>();
    String mode = "row";
    Long hwm;
    Long minOpen;
    long[] exceptions = new long[0];
    boolean compactor;
  }

  private static Options parseOptions(List<String> args) throws UsageException {
    Options options = new Options();
    for (int i = 0; i < args.size(); i++) {
      String arg = args.get(i);
      if (!arg.startsWith("--")) {
        options.dirs.add(arg);
        continue;
      }
      if ("--compactor".equals(arg)) {
        options.compactor = true;
        continue;
      }
      if (i + 1 >= args.size()) {
        throw new UsageException(arg + " needs a value");
      }
      String value = args.get(++i);
      switch (arg) {
        case "--columns":
          options.columns = parseColumns(value);
          break;
        case "--mode":
          options.mode = value;
          break;
        case "--hwm":
          options.hwm = parseLong(value, arg);
          break;
        case "--min-open":
          options.minOpen = parseLong(value, arg);
          break;
        case "--exceptions":
          options.exceptions = parseLongs(value, arg);
          break;
        default:
          throw new UsageException("unknown option " + arg);
      }
    }
    return options;
  }

  private static Options optionsFromJson(JsonNode job) throws UsageException {
    Options options = new Options();
    JsonNode dirs = job.path("dirs");
    if (dirs.isArray()) {
      for (JsonNode dir : dirs) {
        options.dirs.add(dir.asText());
      }
    }
    if (job.hasNonNull("dir")) {
      options.dirs.add(job.get("dir").asText());
    }
    if (job.has("columns")) {
      options.columns = columnsFromJson(job.get("columns"));
    }
    if (job.hasNonNull("mode")) {
      options.mode = job.get("mode").asText();
    }
    if (job.hasNonNull("hwm")) {
      options.hwm = job.get("hwm").asLong();
    }
    if (job.hasNonNull("min_open")) {
      options.minOpen = job.get("min_open").asLong();
    }
    JsonNode exceptions = job.path("exceptions");
    if (exceptions.isArray()) {
      options.exceptions = new long[exceptions.size()];
      for (int i = 0; i < exceptions.size(); i++) {
        options.exceptions[i] = exceptions.get(i).asLong();
      }
    }
    options.compactor = job.path("compactor").asBoolean(false);
    return options;
  }

  private static long parseLong(String text, String what) throws UsageException {
    try {
      return Long.parseLong(text.trim());
    } catch (NumberFormatException e) {
      throw new UsageException(what + ": '" + text + "' is not a number");
    }
  }

  private static long[] parseLongs(String text, String what) throws UsageException {
    if (text.trim().isEmpty()) {
      return new long[0];
    }
    String[] parts = text.split(",");
    long[] values = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      values[i] = parseLong(parts[i], what);
    }
    return values;
  }

  /**
   * The snapshot Hive 2.3 reads with. Exceptions are open or aborted ids (Hive 2.3 does not tell them apart);
   * min-open is the smallest open id, which only matters for choosing a base (ValidReadTxnList.isValidBase).
   */
  private static ValidTxnList validTxnList(Options options) {
    long[] exceptions = options.exceptions.clone();
    Arrays.sort(exceptions);
    long hwm = options.hwm == null ? Long.MAX_VALUE : options.hwm;
    if (options.compactor) {
      return new ValidCompactorTxnList(exceptions, hwm);
    }
    long minOpen = options.minOpen == null ? Long.MAX_VALUE : options.minOpen;
    return new ValidReadTxnList(exceptions, hwm, minOpen);
  }

  // ------------------------------------------------------------------------------------------------ columns

  /** A table column and its Hive primitive type name. */
  private static final class Column {
    final String name;
    final String type;

    Column(String name, String type) {
      this.name = name;
      this.type = type.toLowerCase();
    }
  }

  private static final List<String> SUPPORTED_TYPES =
      Arrays.asList("tinyint", "smallint", "int", "bigint", "float", "double", "boolean", "string");

  private static List<Column> parseColumns(String spec) throws UsageException {
    List<Column> columns = new ArrayList<>();
    for (String part : spec.split(",")) {
      int colon = part.indexOf(':');
      if (colon <= 0) {
        throw new UsageException("column '" + part + "' must be name:type");
      }
      columns.add(checkedColumn(part.substring(0, colon).trim(), part.substring(colon + 1).trim()));
    }
    return columns;
  }

  /** Accepts [["id","int"], ...], [{"name": "id", "type": "int"}, ...] or "id:int,name:string". */
  private static List<Column> columnsFromJson(JsonNode node) throws UsageException {
    if (node.isTextual()) {
      return parseColumns(node.asText());
    }
    List<Column> columns = new ArrayList<>();
    for (JsonNode column : node) {
      if (column.isArray()) {
        columns.add(checkedColumn(column.get(0).asText(), column.get(1).asText()));
      } else {
        columns.add(checkedColumn(column.path("name").asText(), column.path("type").asText()));
      }
    }
    return columns;
  }

  private static Column checkedColumn(String name, String type) throws UsageException {
    Column column = new Column(name, type);
    if (name.isEmpty() || !SUPPORTED_TYPES.contains(column.type)) {
      throw new UsageException("column " + name + ": type '" + type + "' is not one of " + SUPPORTED_TYPES);
    }
    return column;
  }

  private static String columnNames(List<Column> columns) {
    List<String> names = new ArrayList<>();
    for (Column column : columns) {
      names.add(column.name);
    }
    return String.join(",", names);
  }

  private static String columnTypes(List<Column> columns) {
    List<String> types = new ArrayList<>();
    for (Column column : columns) {
      types.add(column.type);
    }
    return String.join(":", types);
  }

  // ------------------------------------------------------------------------------------------------ configuration

  /**
   * A job configuration for a full-ACID table in split-update layout, as HiveInputFormat would set it up: table
   * properties copied into the conf, the table scan marked transactional, the operational properties (1 =
   * split_update) that Hive 2.3's readers and OrcRecordUpdater consult, and the table schema.
   */
  private static JobConf tableConf(List<Column> columns) {
    JobConf conf = new JobConf();
    conf.set("fs.defaultFS", "file:///");
    conf.set("transactional", "true");
    conf.set("transactional_properties", "default");
    conf.setInt("hive.txn.operational.properties", 1);
    conf.setBoolean("hive.transactional.table.scan", true);
    conf.setBoolean("hive.vectorized.execution.enabled", false);
    conf.set("orc.compress", "ZLIB");
    conf.set("hive.exec.orc.default.compress", "ZLIB");
    if (!columns.isEmpty()) {
      conf.set("columns", columnNames(columns));
      conf.set("columns.types", columnTypes(columns));
      conf.set("schema.evolution.columns", columnNames(columns));
      conf.set("schema.evolution.columns.types", columnTypes(columns));
    }
    conf.setBoolean("hive.io.file.read.all.columns", true);
    // File ids exist only on HDFS; asking for them on the local file system just logs an error.
    conf.setBoolean("hive.orc.splits.include.fileid", false);
    return conf;
  }

  // ------------------------------------------------------------------------------------------------ read

  private static ArrayNode readCommand(Options options) throws Exception {
    if (options.dirs.isEmpty()) {
      throw new UsageException("read needs at least one directory");
    }
    if (options.columns.isEmpty()) {
      throw new UsageException("read needs --columns");
    }
    if (!"row".equals(options.mode) && !"vectorized".equals(options.mode)) {
      throw new UsageException("--mode must be row or vectorized, not " + options.mode);
    }
    ArrayNode rows = NODES.arrayNode();
    for (String dir : options.dirs) {
      readDirectory(new Path(new File(dir).getAbsoluteFile().toURI()), options, rows);
    }
    return rows;
  }

  private static void readDirectory(Path dir, Options options, ArrayNode rows) throws Exception {
    JobConf conf = tableConf(options.columns);
    conf.set(ValidTxnList.VALID_TXNS_KEY, validTxnList(options).writeToString());
    FileInputFormat.setInputPaths(conf, dir);
    OrcInputFormat inputFormat = new OrcInputFormat();
    InputSplit[] splits = inputFormat.getSplits(conf, 1);
    for (InputSplit split : splits) {
      if ("row".equals(options.mode)) {
        readSplitByRows(inputFormat, split, conf, options.columns, rows);
      } else {
        readSplitVectorized(split, conf, options.columns, rows);
      }
    }
  }

  /** Row mode: AcidInputFormat.RowReader (an OrcRawRecordMerger underneath); the key is the row's ROW__ID. */
  private static void readSplitByRows(OrcInputFormat inputFormat, InputSplit split, JobConf conf,
                                      List<Column> columns, ArrayNode rows) throws Exception {
    AcidInputFormat.RowReader<OrcStruct> reader =
        inputFormat.getReader(split, new AcidInputFormat.Options(conf).reporter(Reporter.NULL));
    try {
      StructObjectInspector inspector = (StructObjectInspector) reader.getObjectInspector();
      List<? extends StructField> fields = inspector.getAllStructFieldRefs();
      RecordIdentifier key = reader.createKey();
      OrcStruct value = reader.createValue();
      while (reader.next(key, value)) {
        ObjectNode row = rowIdNode(key.getTransactionId(), key.getBucketId(), key.getRowId());
        for (int i = 0; i < columns.size(); i++) {
          StructField field = fields.get(i);
          Object data = inspector.getStructFieldData(value, field);
          Object javaValue = data == null ? null
              : ((PrimitiveObjectInspector) field.getFieldObjectInspector()).getPrimitiveJavaObject(data);
          putValue(row, columns.get(i).name, javaValue);
        }
        rows.add(row);
      }
    } finally {
      reader.close();
    }
  }

  /**
   * Vectorized mode: VectorizedOrcAcidRowBatchReader. Hive 2.3's reader hands out only the user columns; the
   * ROW__ID of each surviving row is taken from the reader's internal event batch (same row positions), which is
   * read by reflection because Hive 2.3 offers no accessor for it.
   */
  private static void readSplitVectorized(InputSplit split, JobConf conf, List<Column> columns, ArrayNode rows)
      throws Exception {
    VectorizedOrcAcidRowBatchReader reader = new VectorizedOrcAcidRowBatchReader(split, conf, Reporter.NULL);
    Field baseField = VectorizedOrcAcidRowBatchReader.class.getDeclaredField("vectorizedRowBatchBase");
    baseField.setAccessible(true);
    try {
      VectorizedRowBatch batch = new VectorizedRowBatch(columns.size());
      batch.setPartitionInfo(columns.size(), 0);
      while (reader.next(NullWritable.get(), batch)) {
        VectorizedRowBatch events = (VectorizedRowBatch) baseField.get(reader);
        for (int j = 0; j < batch.size; j++) {
          int index = batch.selectedInUse ? batch.selected[j] : j;
          ObjectNode row = rowIdNode(
              longAt(events.cols[EVENT_ORIGINAL_TXN], index),
              (int) longAt(events.cols[EVENT_BUCKET], index),
              longAt(events.cols[EVENT_ROW_ID], index));
          for (int c = 0; c < columns.size(); c++) {
            putValue(row, columns.get(c).name, vectorValue(batch.cols[c], index, columns.get(c).type));
          }
          rows.add(row);
        }
      }
    } finally {
      reader.close();
    }
  }

  private static long longAt(ColumnVector vector, int index) {
    return ((LongColumnVector) vector).vector[vector.isRepeating ? 0 : index];
  }

  private static Object vectorValue(ColumnVector vector, int index, String type) {
    int at = vector.isRepeating ? 0 : index;
    if (!vector.noNulls && vector.isNull[at]) {
      return null;
    }
    if (vector instanceof LongColumnVector) {
      long value = ((LongColumnVector) vector).vector[at];
      return "boolean".equals(type) ? (Object) (value != 0) : (Object) value;
    }
    if (vector instanceof DoubleColumnVector) {
      return ((DoubleColumnVector) vector).vector[at];
    }
    if (vector instanceof BytesColumnVector) {
      BytesColumnVector bytes = (BytesColumnVector) vector;
      return new String(bytes.vector[at], bytes.start[at], bytes.length[at], StandardCharsets.UTF_8);
    }
    throw new IllegalStateException("unsupported column vector " + vector.getClass().getName());
  }

  private static ObjectNode rowIdNode(long writeId, int bucketId, long rowId) {
    ObjectNode rowId_ = NODES.objectNode();
    rowId_.put("writeid", writeId);
    rowId_.put("bucketid", bucketId);
    rowId_.put("rowid", rowId);
    ObjectNode row = NODES.objectNode();
    row.set("row__id", rowId_);
    return row;
  }

  private static void putValue(ObjectNode row, String name, Object value) {
    if (value == null) {
      row.putNull(name);
    } else if (value instanceof Boolean) {
      row.put(name, (Boolean) value);
    } else if (value instanceof Float) {
      row.put(name, ((Float) value).doubleValue());
    } else if (value instanceof Double) {
      row.put(name, (Double) value);
    } else if (value instanceof Number) {
      row.put(name, ((Number) value).longValue());
    } else {
      row.put(name, value.toString());
    }
  }

  // ------------------------------------------------------------------------------------------------ write

  /** A ROW__ID given in a write spec, ordered as Hive's RecordIdentifier (write id, bucket property, row id). */
  private static final class RowIdSpec {
    final long writeId;
    final int bucketId;
    final long rowId;
    final List<Object> newRow;   // null for a delete, the new values for an update

    RowIdSpec(JsonNode node, List<Object> newRow) {
      this.writeId = node.path("writeid").asLong();
      this.bucketId = node.path("bucketid").asInt();
      this.rowId = node.path("rowid").asLong();
      this.newRow = newRow;
    }

    List<Object> asStruct() {
      return Arrays.asList((Object) writeId, (Object) bucketId, (Object) rowId);
    }
  }

  private static final Comparator<RowIdSpec> ROW_ID_ORDER = Comparator
      .comparingLong((RowIdSpec r) -> r.writeId)
      .thenComparingInt(r -> r.bucketId)
      .thenComparingLong(r -> r.rowId);

  /**
   * Write one transaction's events for one bucket through OrcRecordUpdater, as a Hive 2.3 INSERT / UPDATE / DELETE
   * task would: insert events go to delta_W_W_SSSS/bucket_N, deletes (and the delete half of updates) to
   * delete_delta_W_W_SSSS/bucket_N. Deletes and updates are sorted by ROW__ID first, as Hive's plan sorts them.
   *
   * Spec keys: partition_dir, columns, write_id (or min_write_id + max_write_id), bucket, statement_id (-1 = no
   * suffix), inserts [[v, ...]], deletes [{writeid, bucketid, rowid}], updates [{row_id: {...}, row: [v, ...]}],
   * internal_names (default true: ORC field names _col0, _col1, ... as Hive's own INSERTs write them).
   *
   * Hive 2.3 stores the plain bucket number (BucketCodec V0) in every event it writes, including delete events:
   * the bucket of a deleted ROW__ID given here is not copied into the delete event.
   */
  private static JsonNode write(JsonNode spec) throws Exception {
    String dirText = spec.path("partition_dir").asText(spec.path("dir").asText(""));
    if (dirText.isEmpty()) {
      throw new UsageException("write spec needs partition_dir");
    }
    List<Column> columns = columnsFromJson(spec.path("columns"));
    if (columns.isEmpty()) {
      throw new UsageException("write spec needs columns");
    }
    long writeId = spec.path("write_id").asLong(-1);
    long minWriteId = spec.path("min_write_id").asLong(writeId);
    long maxWriteId = spec.path("max_write_id").asLong(writeId);
    if (minWriteId < 0 || maxWriteId < minWriteId) {
      throw new UsageException("write spec needs write_id (or min_write_id <= max_write_id)");
    }
    int bucket = spec.path("bucket").asInt(0);
    int statementId = spec.path("statement_id").asInt(0);

    List<RowIdSpec> changes = new ArrayList<>();
    for (JsonNode delete : spec.path("deletes")) {
      changes.add(new RowIdSpec(delete, null));
    }
    for (JsonNode update : spec.path("updates")) {
      changes.add(new RowIdSpec(update.path("row_id"), toJavaRow(update.path("row"), columns)));
    }
    changes.sort(ROW_ID_ORDER);

    Path partition = new Path(new File(dirText).getAbsoluteFile().toURI());
    JobConf conf = tableConf(columns);
    FileSystem fs = partition.getFileSystem(conf);
    fs.mkdirs(partition);

    Properties tableProperties = new Properties();
    tableProperties.setProperty("transactional", "true");
    tableProperties.setProperty("transactional_properties", "default");
    tableProperties.setProperty("orc.compress", "ZLIB");
    tableProperties.setProperty("columns", columnNames(columns));
    tableProperties.setProperty("columns.types", columnTypes(columns));

    AcidOutputFormat.Options options = new AcidOutputFormat.Options(conf)
        .filesystem(fs)
        .inspector(rowInspector(columns, spec.path("internal_names").asBoolean(true)))
        .tableProperties(tableProperties)
        .reporter(Reporter.NULL)
        .writingBase(false)
        .minimumTransactionId(minWriteId)
        .maximumTransactionId(maxWriteId)
        .bucket(bucket)
        .statementId(statementId)
        .recordIdColumn(0)
        .finalDestination(partition);
    RecordUpdater updater = new OrcOutputFormat().getRecordUpdater(partition, options);
    long currentTxn = maxWriteId;
    for (JsonNode insert : spec.path("inserts")) {
      updater.insert(currentTxn, withRowId(null, toJavaRow(insert, columns)));
    }
    for (RowIdSpec change : changes) {
      if (change.newRow == null) {
        List<Object> empty = new ArrayList<>(Collections.nCopies(columns.size(), (Object) null));
        updater.delete(currentTxn, withRowId(change.asStruct(), empty));
      } else {
        updater.update(currentTxn, withRowId(change.asStruct(), change.newRow));
      }
    }
    updater.close(false);

    ObjectNode result = NODES.objectNode();
    ArrayNode files = result.putArray("files");
    String insertDelta = statementId == -1 ? AcidUtils.deltaSubdir(minWriteId, maxWriteId)
        : AcidUtils.deltaSubdir(minWriteId, maxWriteId, statementId);
    for (String subdir : new String[] {insertDelta, "delete_" + insertDelta}) {
      Path file = AcidUtils.createBucketFile(new Path(partition, subdir), bucket);
      if (fs.exists(file)) {
        files.add(subdir + "/" + file.getName());
      }
    }
    return result;
  }

  /**
   * Struct inspector over (ROW__ID, table columns...) rows given as Lists of plain Java values. With
   * internalNames the row struct's fields are called _col0, _col1, ... as in files written by Hive's
   * FileSinkOperator (readers match them to the table's columns by position).
   */
  private static StructObjectInspector rowInspector(List<Column> columns, boolean internalNames) {
    List<String> names = new ArrayList<>();
    List<ObjectInspector> inspectors = new ArrayList<>();
    names.add("ROW__ID");
    inspectors.add(RecordIdentifier.StructInfo.oi);
    for (int i = 0; i < columns.size(); i++) {
      names.add(internalNames ? "_col" + i : columns.get(i).name);
      inspectors.add(javaInspector(columns.get(i).type));
    }
    return ObjectInspectorFactory.getStandardStructObjectInspector(names, inspectors);
  }

  private static ObjectInspector javaInspector(String type) {
    switch (type) {
      case "tinyint":
        return PrimitiveObjectInspectorFactory.javaByteObjectInspector;
      case "smallint":
        return PrimitiveObjectInspectorFactory.javaShortObjectInspector;
      case "int":
        return PrimitiveObjectInspectorFactory.javaIntObjectInspector;
      case "bigint":
        return PrimitiveObjectInspectorFactory.javaLongObjectInspector;
      case "float":
        return PrimitiveObjectInspectorFactory.javaFloatObjectInspector;
      case "double":
        return PrimitiveObjectInspectorFactory.javaDoubleObjectInspector;
      case "boolean":
        return PrimitiveObjectInspectorFactory.javaBooleanObjectInspector;
      case "string":
        return PrimitiveObjectInspectorFactory.javaStringObjectInspector;
      default:
        throw new IllegalArgumentException("unsupported type " + type);
    }
  }

  private static List<Object> toJavaRow(JsonNode values, List<Column> columns) throws UsageException {
    if (!values.isArray() || values.size() != columns.size()) {
      throw new UsageException("row " + values + " must be an array of " + columns.size() + " values");
    }
    List<Object> row = new ArrayList<>();
    for (int i = 0; i < columns.size(); i++) {
      JsonNode value = values.get(i);
      row.add(value.isNull() ? null : toJava(value, columns.get(i).type));
    }
    return row;
  }

  private static Object toJava(JsonNode value, String type) {
    switch (type) {
      case "tinyint":
        return (byte) value.asInt();
      case "smallint":
        return (short) value.asInt();
      case "int":
        return value.asInt();
      case "bigint":
        return value.asLong();
      case "float":
        return (float) value.asDouble();
      case "double":
        return value.asDouble();
      case "boolean":
        return value.asBoolean();
      default:
        return value.asText();
    }
  }

  private static List<Object> withRowId(List<Object> rowId, List<Object> values) {
    List<Object> row = new ArrayList<>();
    row.add(rowId);
    row.addAll(values);
    return row;
  }

  // ------------------------------------------------------------------------------------------------ state

  /** AcidUtils.getAcidState; names are relative to the partition directory. */
  private static JsonNode stateCommand(Options options) throws Exception {
    if (options.dirs.size() != 1) {
      throw new UsageException("state needs exactly one directory");
    }
    Path dir = new Path(new File(options.dirs.get(0)).getAbsoluteFile().toURI());
    JobConf conf = tableConf(Collections.emptyList());
    FileSystem fs = dir.getFileSystem(conf);
    URI root = fs.makeQualified(dir).toUri();
    AcidUtils.Directory state = AcidUtils.getAcidState(dir, conf, validTxnList(options));

    ObjectNode result = NODES.objectNode();
    if (state.getBaseDirectory() == null) {
      result.putNull("base");
    } else {
      result.put("base", relative(root, fs.makeQualified(state.getBaseDirectory())));
    }
    ArrayNode deltas = result.putArray("deltas");
    for (AcidUtils.ParsedDelta delta : state.getCurrentDirectories()) {
      deltas.add(relative(root, fs.makeQualified(delta.getPath())));
    }
    List<String> obsolete = new ArrayList<>();
    for (FileStatus status : state.getObsolete()) {
      obsolete.add(relative(root, fs.makeQualified(status.getPath())));
    }
    Collections.sort(obsolete);
    ArrayNode obsoleteNode = result.putArray("obsolete");
    obsolete.forEach(obsoleteNode::add);
    List<String> original = new ArrayList<>();
    for (org.apache.hadoop.hive.shims.HadoopShims.HdfsFileStatusWithId file : state.getOriginalFiles()) {
      original.add(relative(root, fs.makeQualified(file.getFileStatus().getPath())));
    }
    Collections.sort(original);
    ArrayNode originalNode = result.putArray("original");
    original.forEach(originalNode::add);
    return result;
  }

  private static String relative(URI root, Path path) {
    String rootText = root.getPath().endsWith("/") ? root.getPath() : root.getPath() + "/";
    String text = path.toUri().getPath();
    return text.startsWith(rootText) ? text.substring(rootText.length()) : text;
  }
}
