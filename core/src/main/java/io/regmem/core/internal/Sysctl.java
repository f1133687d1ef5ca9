package io.regmem.core.internal;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Reads a kernel setting under {@code /proc/sys}. Not with {@code Files.readString}: a sysctl file
 * says its size is 0, and the JDK then reads it in pieces, of which the kernel answers only the first
 * (a read at an offset past 0 of many of these files gives nothing): "20" came back as "2". A buffered
 * reader asks for its whole buffer in one read, which the kernel answers whole.
 */
public final class Sysctl {
    private Sysctl() {
    }

    /**
     * The first line of {@code /proc/sys/}{@code name} (for example {@code net/ipv4/igmp_max_memberships}), stripped.
     *
     * @throws IOException if it cannot be read ({@link java.nio.file.NoSuchFileException} if the kernel has no such setting)
     */
    public static String read(String name) throws IOException {
        try (BufferedReader r = Files.newBufferedReader(Path.of("/proc/sys", name), StandardCharsets.US_ASCII)) {
            String line = r.readLine();
            return line == null ? "" : line.strip();
        }
    }

    /** The first number of the setting {@code name} (of one or more, as {@code ip_local_port_range}'s two). */
    public static int readInt(String name) throws IOException {
        String[] parts = read(name).split("\\s+");
        try {
            return Integer.parseInt(parts[0]);
        } catch (NumberFormatException e) {
            throw new IOException("/proc/sys/" + name + " is not a number: " + parts[0], e);
        }
    }
}
