package io.regmem.registration;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.MemoryAddress;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * JDK Flight Recorder events of the verbs objects: registrations, queue pairs entering the error
 * state and their flushes, connection events. Off unless a recording enables them
 * ({@code io.regmem.*}); none is on the post or poll path of a healthy connection.
 */
final class RegistrationEvents {
    private RegistrationEvents() {
    }

    /** Commits a registration's event (begun before the provider's call), if enabled. */
    static void registered(Register event, MemoryRegion mr) {
        if (event.shouldCommit()) {
            event.region = mr.toString();
            event.address = mr.address();
            event.length = mr.length();
            event.access = Access.describe(mr.access());
            event.key = mr.lkey();
            event.commit();
        }
    }

    /** Commits a deregistration's event (begun before the provider's call), if enabled. */
    static void deregistered(Deregister event, MemoryRegion mr) {
        if (event.shouldCommit()) {
            event.region = mr.toString();
            event.address = mr.address();
            event.length = mr.length();
            event.commit();
        }
    }

    @Name("io.regmem.Registration")
    @Label("Memory Registration")
    @Category({"regmem", "Registration"})
    @Description("Memory registered with a device (ibv_reg_mr / ucp_mem_map); the duration is the provider's")
    @Enabled(false)
    static final class Register extends Event {
        @Label("Region")
        String region;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Length")
        @DataAmount
        long length;
        @Label("Access")
        String access;
        @Label("Key")
        @Description("The region's lkey (its rkey has the same value)")
        int key;
    }

    @Name("io.regmem.Deregistration")
    @Label("Memory Deregistration")
    @Category({"regmem", "Registration"})
    @Description("A registration ended; the duration includes the wait for copies in progress through it")
    @Enabled(false)
    @StackTrace(false)
    static final class Deregister extends Event {
        @Label("Region")
        String region;
        @Label("Address")
        @MemoryAddress
        long address;
        @Label("Length")
        @DataAmount
        long length;
    }

    @Name("io.regmem.QpError")
    @Label("Queue Pair Error")
    @Category({"regmem", "Queue Pair"})
    @Description("A queue pair entered the error state: a failed request, a drain, or the peer gone")
    @Enabled(false)
    @StackTrace(false)
    static final class QpError extends Event {
        @Label("Queue Pair")
        String qp;
        @Label("Previous State")
        String from;
        @Label("Cause")
        String cause;
    }

    @Name("io.regmem.QpFlush")
    @Label("Queue Pair Flush")
    @Category({"regmem", "Queue Pair"})
    @Description("Outstanding requests of a queue pair in the error state completed with WR_FLUSH_ERR")
    @Enabled(false)
    @StackTrace(false)
    static final class QpFlush extends Event {
        @Label("Queue Pair")
        String qp;
        @Label("Sends Flushed")
        int sends;
        @Label("Receives Flushed")
        int receives;
    }

    @Name("io.regmem.Connection")
    @Label("Connection Event")
    @Category({"regmem", "Connection"})
    @Description("A CM ID's connection was established, rejected or ended (soft, UCX)")
    @Enabled(false)
    @StackTrace(false)
    static final class Connection extends Event {
        @Label("CM ID")
        String id;
        @Label("Device")
        String device;
        @Label("Event")
        String type;
    }

    @Name("io.regmem.DatagramDrop")
    @Label("Datagram Dropped")
    @Category({"regmem", "Queue Pair"})
    @Description("An unreliable datagram addressed to a UD QP was dropped (no receive posted, too small a one, "
            + "another Q_Key, no such QP; from the network: no proof of the secret, not regmem's format)")
    @Enabled(false)
    @StackTrace(false)
    static final class DatagramDropped extends Event {
        @Label("Queue Pair")
        String qp;
        @Label("Reason")
        String reason;
    }
}
