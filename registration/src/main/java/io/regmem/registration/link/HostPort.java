package io.regmem.registration.link;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A connection address {@code host:port} of a provider that connects processes: a non-empty host (a
 * name or an address; IPv6 addresses as they are, the port after the last colon) and a port in
 * [1, 65535].
 */
public record HostPort(String host, int port) {

    /**
     * Parses {@code address}.
     *
     * @param who      the ID's name, for the message
     * @param provider the provider's name, for the message
     * @throws RdmaException {@link Errno#EINVAL} if it is not host:port
     */
    public static HostPort parse(String who, String provider, String address) {
        return parse(who, provider, address, 1);
    }

    /**
     * As {@link #parse(String, String, String)}, with port 0 allowed (one the system picks), for a
     * bind.
     */
    public static HostPort parseForBind(String who, String provider, String address) {
        return parse(who, provider, address, 0);
    }

    private static HostPort parse(String who, String provider, String address, int minPort) {
        int colon = address.lastIndexOf(':');
        int port = -1;
        if (colon > 0) {
            try {
                port = Integer.parseInt(address.substring(colon + 1));
            } catch (NumberFormatException e) {
                port = -1;
            }
        }
        if (port < minPort || port > 65535) {
            throw new RdmaException(Errno.EINVAL, who + ": " + provider + " address '" + address + "' is not host:port "
                    + "(a host and a port in [" + minPort + ", 65535])");
        }
        return new HostPort(address.substring(0, colon), port);
    }

    @Override
    public String toString() {
        return host + ":" + port;
    }
}
