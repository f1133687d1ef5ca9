package io.regmem.registration.testkit;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Formatter;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.opentest4j.TestAbortedException;

/**
 * Log lines in the build only where a test failed: while a test class runs, what reaches the root
 * logger (System.Logger's JUL backend: regmem's warnings, Netty's leak reports) is kept instead of
 * printed; when one of the class's tests fails (a skip is not a failure), what was kept until then is printed to standard error
 * under the test's name, and at the class's end the console handlers are back. Lines a test provokes
 * on purpose (a hostile peer's connection ended, a fault injected) stay out of the build log; lines
 * around a failure are still there to read. Registered for every Jupiter test of a module whose
 * {@code junit-platform.properties} enables extension autodetection (this test-jar's service file).
 */
public final class QuietLogs implements BeforeAllCallback, AfterEachCallback, AfterAllCallback {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(QuietLogs.class);
    /** The most lines kept (the oldest go first): a test that logs in a loop does not fill the heap. */
    static final int MAX_LINES = 2_000;

    /** Keeps formatted records, the last {@link #MAX_LINES}. */
    private static final class Kept extends Handler {
        private final Formatter format = new SimpleFormatter();
        private final List<String> lines = new ArrayList<>();
        private int dropped;

        @Override
        public void publish(LogRecord r) {
            if (!isLoggable(r)) {
                return;
            }
            String line = format.format(r);
            synchronized (lines) {
                if (lines.size() == MAX_LINES) {
                    lines.removeFirst();
                    dropped++;
                }
                lines.add(line);
            }
        }

        void printTo(PrintStream out, String title) {
            synchronized (lines) {
                if (lines.isEmpty() && dropped == 0) {
                    return;
                }
                out.println("---- log lines of " + title + (dropped > 0 ? " (the first " + dropped + " dropped)" : "") + " ----");
                for (String l : lines) {
                    out.print(l);
                }
                out.println("---- end of the log lines ----");
                lines.clear();
                dropped = 0;
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    }

    /** The root logger's console handlers while a class runs, and what is kept meanwhile. */
    private record Swap(Handler[] console, Kept kept) {
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        Logger root = Logger.getLogger("");
        Handler[] console = root.getHandlers();
        Kept kept = new Kept();
        for (Handler h : console) {
            root.removeHandler(h);
        }
        root.addHandler(kept);
        context.getStore(NS).put(Swap.class, new Swap(console, kept));
    }

    @Override
    public void afterEach(ExtensionContext context) {
        Swap s = swap(context);
        if (s != null && failed(context)) {
            s.kept().printTo(System.err, context.getDisplayName() + " (failed)");
        }
    }

    @Override
    public void afterAll(ExtensionContext context) {
        Swap s = swap(context);
        if (s == null) {
            return;
        }
        Logger root = Logger.getLogger("");
        root.removeHandler(s.kept());
        for (Handler h : s.console()) {
            root.addHandler(h);
        }
        if (failed(context)) {
            s.kept().printTo(System.err, context.getDisplayName() + " (failed)");
        }
    }

    /** True if the test or class failed: an exception other than a skip (an assumption that did not hold). */
    private static boolean failed(ExtensionContext context) {
        return context.getExecutionException().filter(e -> !(e instanceof TestAbortedException)).isPresent();
    }

    private static Swap swap(ExtensionContext context) {
        return context.getRoot() == context ? null : context.getStore(NS).get(Swap.class, Swap.class);
    }
}
