package io.regmem.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/** {@code regmem demo --jfr FILE}: a JFR recording of regmem's events, counted by type at the end. */
public final class FlightRecording {
    /** Every regmem event (all off unless a recording enables them). */
    public static final List<String> EVENTS = List.of("io.regmem.ChunkMap", "io.regmem.ChunkUnmap", "io.regmem.ChunkTrim",
            "io.regmem.PoolExhausted",
            "io.regmem.LeakReport", "io.regmem.Registration", "io.regmem.Deregistration", "io.regmem.CacheMiss",
            "io.regmem.CacheEviction", "io.regmem.CacheInvalidation", "io.regmem.QpError", "io.regmem.QpFlush",
            "io.regmem.Connection");

    private final Recording recording;
    private final Path file;

    private FlightRecording(Recording recording, Path file) {
        this.recording = recording;
        this.file = file;
    }

    public static FlightRecording start(Path file) {
        Recording r = new Recording();
        r.setName("regmem demo");
        for (String name : EVENTS) {
            r.enable(name).withThreshold(Duration.ZERO);
        }
        r.start();
        return new FlightRecording(r, file);
    }

    /** Stops, writes the file and prints how many events of each type it holds. */
    public void stopAndSummarize(PrintStream out) throws IOException {
        recording.stop();
        recording.dump(file);
        recording.close();
        Map<String, Integer> counts = new TreeMap<>();
        for (RecordedEvent e : RecordingFile.readAllEvents(file)) {
            counts.merge(e.getEventType().getName(), 1, Integer::sum);
        }
        out.printf(Locale.ROOT, "%nJFR: %,d regmem events in %s (read them with: jfr print --categories regmem %s)%n",
                counts.values().stream().mapToInt(Integer::intValue).sum(), file, file);
        counts.forEach((name, n) -> out.printf(Locale.ROOT, "  %-28s %,10d%n", name, n));
    }
}
