// Apache Kafka's own record batch code as an oracle for klog's codec (tests/test_records_java.py).
//
//   java -cp '<kafka libs>/*' tests/java/RecordBatchOracle.java <dir>
//
// Reads <dir>/records.txt (one record per line: timestamp, key, value, headers; tab separated;
// bytes in hex, "-" = null; headers "keyhex=valuehex" joined by ","), then
//  * writes <dir>/java-<codec>.bin: those records as one batch built by Kafka (every codec),
//    plus <dir>/java-control.bin: a COMMIT end-transaction marker;
//  * for every <dir>/klog-*.bin: validates each batch (ensureValid: CRC, sizes) and dumps it to
//    <dir>/klog-*.txt in the records.txt format, preceded by one line of batch fields.
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.*;

public class RecordBatchOracle {
    static byte[] unhex(String s) {
        if (s.equals("-")) return null;
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        StringBuilder sb = new StringBuilder();
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get() & 0xff));
        return sb.toString();
    }

    static String hex(byte[] b) {
        return b == null ? "-" : hex(ByteBuffer.wrap(b));
    }

    static Compression compression(String name) {
        switch (name) {
            case "none": return Compression.NONE;
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: throw new IllegalArgumentException(name);
        }
    }

    static void write(Path p, MemoryRecords records) throws Exception {
        ByteBuffer b = records.buffer().duplicate();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        Files.write(p, out);
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        List<SimpleRecord> records = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("records.txt"))) {
            String[] f = line.split("\t", -1);
            List<Header> headers = new ArrayList<>();
            if (!f[3].isEmpty()) {
                for (String h : f[3].split(",")) {
                    String[] kv = h.split("=", -1);
                    headers.add(new RecordHeader(new String(unhex(kv[0]), StandardCharsets.UTF_8), unhex(kv[1])));
                }
            }
            records.add(new SimpleRecord(Long.parseLong(f[0]), unhex(f[1]), unhex(f[2]), headers.toArray(new Header[0])));
        }
        SimpleRecord[] recs = records.toArray(new SimpleRecord[0]);
        for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
            // magic 2, base offset 500, CreateTime, producer 4242/7/100, leader epoch 3, transactional
            write(dir.resolve("java-" + codec + ".bin"), MemoryRecords.withRecords(
                RecordBatch.MAGIC_VALUE_V2, 500L, compression(codec), TimestampType.CREATE_TIME,
                4242L, (short) 7, 100, 3, true, recs));
        }
        write(dir.resolve("java-control.bin"), MemoryRecords.withEndTransactionMarker(
            900L, 1_700_000_000_000L, 3, 4242L, (short) 7, new EndTransactionMarker(ControlRecordType.COMMIT, 11)));

        try (DirectoryStream<Path> klog = Files.newDirectoryStream(dir, "klog-*.bin")) {
            for (Path p : klog) {
                StringBuilder out = new StringBuilder();
                MemoryRecords mr = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(p)));
                for (MutableRecordBatch batch : mr.batches()) {
                    batch.ensureValid();
                    out.append(String.format("batch\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%d%n", batch.baseOffset(),
                        batch.lastOffset(), batch.compressionType().name, batch.producerId(), batch.producerEpoch(),
                        batch.baseSequence(), batch.isTransactional(), batch.isControlBatch(), batch.partitionLeaderEpoch()));
                    for (org.apache.kafka.common.record.internal.Record r : batch) {
                        r.ensureValid();
                        List<String> hs = new ArrayList<>();
                        for (Header h : r.headers()) hs.add(hex(h.key().getBytes(StandardCharsets.UTF_8)) + "=" + hex(h.value()));
                        out.append(r.offset()).append('\t').append(r.timestamp()).append('\t').append(hex(r.key()))
                            .append('\t').append(hex(r.value())).append('\t').append(String.join(",", hs)).append('\n');
                    }
                }
                Files.writeString(dir.resolve(p.getFileName().toString().replace(".bin", ".txt")), out.toString());
            }
        }
    }
}
