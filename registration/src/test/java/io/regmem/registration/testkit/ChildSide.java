package io.regmem.registration.testkit;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The child's side of a {@link ChildJvm}: the commands its test writes on standard input, its device
 * options from an argument, and the {@code REGMEM} lines it says on standard output.
 */
public final class ChildSide {
    private ChildSide() {
    }

    /**
     * The lines of standard input, trimmed, as a daemon thread reads them; {@code END} once the input
     * ends (the test's {@link ChildJvm#finish()}, or its death).
     */
    public static ConcurrentLinkedQueue<String> commands() {
        ConcurrentLinkedQueue<String> commands = new ConcurrentLinkedQueue<>();
        Thread.ofPlatform().daemon().start(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                for (String line; (line = in.readLine()) != null; ) {
                    commands.add(line.trim());
                }
            } catch (IOException ignored) {
                // end of input either way
            }
            commands.add("END");
        });
        return commands;
    }

    /** Device options from {@code args[at]} ({@code k=v,k=v}); none if it is missing or empty. */
    public static Map<String, String> options(String[] args, int at) {
        Map<String, String> options = new HashMap<>();
        if (args.length > at && !args[at].isEmpty()) {
            for (String kv : args[at].split(",")) {
                options.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        return options;
    }

    /** Says {@code REGMEM what} on standard output, flushed (what {@link ChildJvm#expect} reads). */
    public static void say(String what) {
        System.out.println("REGMEM " + what);
        System.out.flush();
    }
}
