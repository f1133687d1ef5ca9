package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * An address handle ({@code ibv_ah}): where an unreliable-datagram send goes
 * ({@link WorkRequest#ud(AddressHandle, int, int)}), made by {@link ProtectionDomain#createAh} or
 * {@link ProtectionDomain#createAhFromWc} and counted as a child of its PD. A send copies its
 * attributes when it is posted, so destroying the handle afterwards changes nothing for it.
 */
public final class AddressHandle extends RdmaResource implements AutoCloseable {
    private final ProtectionDomain pd;
    private final AhAttributes attributes;

    AddressHandle(ProtectionDomain pd, AhAttributes attributes) {
        super(pd.device, "AddressHandle", pd.owner());
        this.pd = pd;
        this.attributes = attributes;
    }

    /** The PD the handle was created in; only QPs of that PD send with it. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** Where it points. */
    public AhAttributes attributes() {
        return attributes;
    }

    /**
     * Destroys the handle ({@code ibv_destroy_ah}).
     *
     * @throws RdmaException {@link Errno#EBADF} if already destroyed
     */
    @Override
    public void close() {
        synchronized (device.lock) {
            checkAlive("close");
            markDestroyed();
            pd.release();
        }
    }

    @Override
    public String toString() {
        return super.toString() + "(" + attributes.dgid().getHostAddress() + ")";
    }
}
