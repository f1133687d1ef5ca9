package io.regmem.registration.link;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;

/**
 * The shared secret that authenticates a connection's handshake between processes ({@link Link}), on
 * every provider that connects processes (ucx, shm): a listener takes a connection only from a peer
 * that proves it holds the same secret, and a requester hands the listener's transport address to
 * its transport only once the listener proved it too.
 *
 * <p>Where it comes from, first match wins: the device option {@code secret} (the text itself),
 * the device option {@code secretFile} (a file's bytes, a trailing newline dropped), the environment
 * variable {@code REGMEM_SECRET}, then {@code REGMEM_SECRET_FILE}; otherwise the user's own
 * {@code ~/.regmem/secret}, created on first use with 32 random bytes in hex and permissions
 * {@code rw-------} (as Erlang's cookie): processes of one user on one host (or on hosts that share
 * the home directory) connect without configuration, and anybody else must be given the secret. A
 * secret is at least {@link #MIN_BYTES} bytes. The default file is refused if other users may read it.
 */
public final class Secret {
    /** The shortest secret accepted. */
    public static final int MIN_BYTES = 16;
    public static final String ENV = "REGMEM_SECRET";
    public static final String ENV_FILE = "REGMEM_SECRET_FILE";

    private Secret() {
    }

    /**
     * The secret the options (or else the environment) name, or null when neither names one (the
     * default file is then read or made on first use: {@link #defaultSecret(String)}).
     *
     * @throws RdmaException {@link Errno#EINVAL} for a secret shorter than {@link #MIN_BYTES} or both
     *                       options at once; {@link Errno#ENOENT} for a secret file that cannot be read
     */
    public static byte[] configured(String provider, Map<String, String> options, Map<String, String> env) {
        String text = options.get("secret");
        String file = options.get("secretFile");
        if (text != null && file != null) {
            throw new RdmaException(Errno.EINVAL, provider + ": give the option secret or secretFile, not both");
        }
        if (text != null) {
            return checked(provider, text.getBytes(StandardCharsets.UTF_8), "the option secret");
        }
        if (file != null) {
            return read(provider, Path.of(file), "the option secretFile=" + file);
        }
        String envText = env.get(ENV);
        if (envText != null && !envText.isEmpty()) {
            return checked(provider, envText.getBytes(StandardCharsets.UTF_8), "the environment variable " + ENV);
        }
        String envFile = env.get(ENV_FILE);
        if (envFile != null && !envFile.isEmpty()) {
            return read(provider, Path.of(envFile), ENV_FILE + "=" + envFile);
        }
        return null;
    }

    /** The default secret file: {@code ~/.regmem/secret}. */
    public static Path defaultFile() {
        return Path.of(System.getProperty("user.home"), ".regmem", "secret");
    }

    /**
     * The user's default secret ({@link #defaultFile()}), made if it is missing ({@code provider} names
     * the device's provider in messages). Two processes that
     * make it at once agree: the file appears whole, by a link that fails if another got there first.
     *
     * @throws RdmaException {@link Errno#EACCES} if it cannot be made or read, or others may read it
     */
    public static byte[] defaultSecret(String provider) {
        Path file = defaultFile();
        try {
            if (!Files.exists(file)) {
                create(file);
            }
            Set<PosixFilePermission> p = Files.getPosixFilePermissions(file);
            if (p.contains(PosixFilePermission.GROUP_READ) || p.contains(PosixFilePermission.OTHERS_READ)) {
                throw new RdmaException(Errno.EACCES, provider + ": the connection secret " + file + " may be read by other "
                        + "users (" + PosixFilePermissions.toString(p) + "): chmod 600 it, or give the device the "
                        + "option secret or secretFile");
            }
        } catch (IOException | UnsupportedOperationException e) {
            throw new RdmaException(Errno.EACCES, provider + ": cannot make or read the connection secret " + file + " ("
                    + e + "): give the device the option secret or secretFile, or set " + ENV, e);
        }
        return read(provider, file, file.toString());
    }

    private static void create(Path file) throws IOException {
        Path dir = file.getParent();
        Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        byte[] random = new byte[32];
        new SecureRandom().nextBytes(random);
        Path temp = Files.createTempFile(dir, "secret", ".new",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            Files.writeString(temp, HexFormat.of().formatHex(random) + "\n");
            try {
                Files.createLink(file, temp); // atomic, and refused if another process made it meanwhile
            } catch (FileAlreadyExistsException made) {
                // theirs stands
            }
        } finally {
            Files.deleteIfExists(temp);
        }
    }

    private static byte[] read(String provider, Path file, String where) {
        byte[] b;
        try {
            b = Files.readAllBytes(file);
        } catch (IOException e) {
            throw new RdmaException(Errno.ENOENT, provider + ": cannot read the connection secret from " + where + ": " + e, e);
        }
        int n = b.length;
        while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r')) {
            n--;
        }
        return checked(provider, Arrays.copyOf(b, n), where);
    }

    private static byte[] checked(String provider, byte[] secret, String where) {
        if (secret.length < MIN_BYTES) {
            throw new RdmaException(Errno.EINVAL, provider + ": the connection secret from " + where + " has " + secret.length
                    + " bytes; it needs at least " + MIN_BYTES);
        }
        return secret;
    }
}
