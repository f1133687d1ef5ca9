package io.regmem.registration.spi;

import io.regmem.registration.DatagramDrop;

/**
 * Where a provider counts a datagram that its device dropped before it reached any QP (it was not
 * regmem's, it did not prove the secret, or it named no QP of the device): the verbs layer counts it
 * in the device's {@code DeviceCounters} as {@link QpContext#dropDatagram} does for a QP's drops.
 */
@FunctionalInterface
public interface DatagramDrops {
    /** {@code count} datagrams to this device were dropped for {@code reason} (any thread). */
    void dropped(DatagramDrop reason, long count);
}
