package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentTerminationException;

/**
 * A device's progress as an Agrona {@link Agent}: each {@link #doWork()} runs one round of what the
 * device's own progress thread would run ({@code progressThread=true}): it executes, delivers and
 * reaps what the device's queue pairs have pending, and returns the work done, so that the caller's
 * {@code IdleStrategy} drives it, under an {@code AgentRunner}, inside the application's loop through
 * an {@code AgentInvoker}, or beside a {@link CompletionAgent} in a {@code CompositeAgent}.
 *
 * <p>Use it on a device opened without a progress thread where work must go on without anybody
 * polling a CQ (a target that only serves RDMA WRITEs and READs, a peer's requests waiting for
 * execution), on the application's thread and idle strategy instead of a thread of the device's own.
 * Polling a CQ progresses the device too: an application that polls its CQs needs no DeviceAgent.
 * A round skips a queue pair whose lock another thread holds (its poster or poller runs it). Once
 * the device is closed, {@code doWork()} ends the agent ({@link AgentTerminationException}).
 * {@code doWork()} allocates nothing.
 */
public final class DeviceAgent implements Agent {
    private final RdmaDevice device;
    private final String roleName;

    /**
     * An agent progressing {@code device}.
     *
     * @throws RdmaException {@link Errno#EINVAL} for a null device, {@link Errno#EBADF} for a closed one
     */
    public DeviceAgent(RdmaDevice device) {
        if (device == null) {
            throw new RdmaException(Errno.EINVAL, "DeviceAgent: needs a device");
        }
        if (device.isClosed()) {
            throw new RdmaException(Errno.EBADF, "DeviceAgent: " + device + " is closed");
        }
        this.device = device;
        this.roleName = "regmem-device:" + device.name();
    }

    /** One round of the device's progress; the work done. */
    @Override
    public int doWork() {
        try {
            return device.provider().progressRound();
        } catch (RdmaException e) {
            if (device.isClosed()) {
                throw new AgentTerminationException(device + " closed");
            }
            throw e;
        }
    }

    @Override
    public String roleName() {
        return roleName;
    }
}
