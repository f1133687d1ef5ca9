package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * A verbs object that its children count ({@code usecnt}): a protection domain counts its MRs,
 * windows and QPs; a completion queue the QPs that use it. It cannot be destroyed while counted.
 * The count changes only under the device lock, and only once the child exists.
 */
abstract class CountedResource extends RdmaResource {
    private int useCount;

    CountedResource(RdmaDevice device, String type, String inheritedOwner) {
        super(device, type, inheritedOwner);
    }

    /** Live children counted on this object. */
    public int useCount() {
        synchronized (device.lock) {
            return useCount;
        }
    }

    void retain() {
        useCount++;
    }

    void release() {
        useCount--;
    }

    /**
     * Destroys this object if nothing counts on it. Device lock held.
     *
     * @param verb     what destroying is called for this object ("destroy", "deallocate")
     * @param children what the counted children are, for the refusal
     * @param advice   what the caller must do first
     * @throws RdmaException {@link Errno#EBUSY} naming the count (nothing changes);
     *                       {@link Errno#EBADF} if already destroyed
     */
    void destroyUnlessCounted(String verb, String children, String advice) {
        checkAlive("close");
        if (useCount > 0) {
            throw new RdmaException(Errno.EBUSY, this + ": cannot " + verb + " with " + useCount + " " + children
                    + "; " + advice);
        }
        markDestroyed();
    }
}
