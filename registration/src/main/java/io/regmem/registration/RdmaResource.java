package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;

/**
 * What every verbs object shares: its device, its type and id in the device's
 * {@link ResourceTracker}, its owner tag and where it was created, and whether it was destroyed.
 * The kernel's {@code struct rdma_restrack_entry}, in spirit.
 */
public abstract class RdmaResource {
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);
    /** Where regmem's registration classes were loaded from: their frames are not "the creator". */
    private static final java.net.URL OWN_CODE = codeOf(RdmaResource.class);

    final RdmaDevice device;
    private final String type;
    private final long id;
    private final String owner;
    private final String site;
    private volatile boolean destroyed;

    RdmaResource(RdmaDevice device, String type, String inheritedOwner) {
        this.device = device;
        this.type = type;
        this.id = device.tracker.nextId();
        StackWalker.StackFrame caller = WALKER.walk(frames -> frames
                .filter(f -> !isOwn(f.getDeclaringClass()))
                .findFirst().orElse(null));
        this.site = caller == null ? "unknown" : caller.toStackTraceElement().toString();
        this.owner = inheritedOwner != null ? inheritedOwner
                : caller == null ? "unknown" : simpleName(caller.getClassName());
    }

    private static java.net.URL codeOf(Class<?> c) {
        java.security.CodeSource cs = c.getProtectionDomain().getCodeSource();
        return cs == null ? null : cs.getLocation();
    }

    private static boolean isOwn(Class<?> c) {
        return c.getName().startsWith("io.regmem.registration.") && java.util.Objects.equals(codeOf(c), OWN_CODE);
    }

    private static String simpleName(String className) {
        return className.substring(className.lastIndexOf('.') + 1);
    }

    /** The device this object belongs to. */
    public RdmaDevice device() {
        return device;
    }

    /** The object's type, e.g. {@code ProtectionDomain}. */
    public String type() {
        return type;
    }

    /** The object's id, unique per device and type-independent, in creation order. */
    public long id() {
        return id;
    }

    /** The owner tag: the simple name of the class that created it (MRs inherit their PD's). */
    public String owner() {
        return owner;
    }

    /** Where it was created: the first stack frame outside regmem's registration classes. */
    public String creationSite() {
        return site;
    }

    /** True once destroyed. */
    public boolean isDestroyed() {
        return destroyed;
    }

    void markDestroyed() {
        destroyed = true;
        device.tracker.remove(this);
    }

    /** Throws {@link Errno#EBADF} if the object was destroyed. */
    void checkAlive(String operation) {
        if (destroyed) {
            throw new RdmaException(Errno.EBADF, this + ": " + operation + " after it was destroyed");
        }
    }

    /** One line for leak reports: type, id, owner and creation site. */
    public String describe() {
        return this + " owned by " + owner + ", created at " + site;
    }

    @Override
    public String toString() {
        return type + "#" + id;
    }
}
