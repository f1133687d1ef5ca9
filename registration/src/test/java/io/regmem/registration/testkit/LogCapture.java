package io.regmem.registration.testkit;

import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * What a logger (System.Logger's JUL backend) is given while it is open: {@code try (LogCapture log =
 * new LogCapture("io.regmem.registration.shm")) { ...; log.text() }}. Thread-safe.
 */
public final class LogCapture implements AutoCloseable {
    private final Logger logger;
    private final List<LogRecord> records = new ArrayList<>();
    private final Handler handler = new Handler() {
        @Override
        public void publish(LogRecord r) {
            synchronized (records) {
                records.add(r);
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    };

    /** Starts capturing what the logger {@code name} is given. */
    public LogCapture(String name) {
        logger = Logger.getLogger(name);
        logger.addHandler(handler);
    }

    /** Every message so far, one a line. */
    public String text() {
        StringBuilder b = new StringBuilder();
        synchronized (records) {
            for (LogRecord r : records) {
                b.append(r.getMessage()).append('\n');
            }
        }
        return b.toString();
    }

    /** The messages so far logged at {@code level}. */
    public List<String> messages(Level level) {
        List<String> out = new ArrayList<>();
        synchronized (records) {
            for (LogRecord r : records) {
                if (r.getLevel() == level) {
                    out.add(r.getMessage());
                }
            }
        }
        return out;
    }

    /** Stops capturing. */
    @Override
    public void close() {
        logger.removeHandler(handler);
    }
}
