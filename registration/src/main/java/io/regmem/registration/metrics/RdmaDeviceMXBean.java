package io.regmem.registration.metrics;

import java.util.Map;

/**
 * An {@link io.regmem.registration.RdmaDevice} as JMX sees it: {@code io.regmem:type=RdmaDevice,name=<device>}
 * (see {@link io.regmem.registration.DeviceCounters}).
 */
public interface RdmaDeviceMXBean {
    /** The device's name. */
    String getName();

    /** Live objects the device tracks (PDs, MRs, CQs, QPs, CM IDs, ...). */
    int getObjects();

    /** Queue pairs ready to send now. */
    int getConnections();

    /** Completions polled from the device's CQs since it opened. */
    long getCompletions();

    /** Of those, completions with an error status. */
    long getErrors();

    /** Error completions by status name (statuses seen at least once). */
    Map<String, Long> getErrorsByStatus();

    /** Unreliable datagrams addressed to the device's QPs and dropped, by reason name (reasons seen at least once). */
    Map<String, Long> getDatagramsDropped();
}
