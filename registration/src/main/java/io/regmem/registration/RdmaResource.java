package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.net.URL;
import java.security.CodeSource;
import java.util.Objects;

/**
 * What every verbs object shares: its device, its type and id in the device's
 * {@link ResourceTracker}, its owner tag and where it was created, and whether it was destroyed.
 * The kernel's {@code struct rdma_restrack_entry}, in spirit.
 */
public abstract class RdmaResource {
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);
    /** Where regmem's registration classes were loaded from: their frames are not "the creator". */
    private static final URL OWN_CODE = codeOf(RdmaResource.class);
    /** Whether a class is one of regmem's registration classes, decided once per class. */
    private static final ClassValue<Boolean> OWN = new ClassValue<>() {
        @Override
        protected Boolean computeValue(Class<?> c) {
            return c.getName().startsWith("io.regmem.registration.") && Objects.equals(codeOf(c), OWN_CODE);
        }
    };

    final RdmaDevice device;
    private final String type;
    private final long id;
    /** The inherited owner tag, or null: then the creator's simple class name. */
    private final String inheritedOwner;
    /** The first frame outside regmem's registration classes (null if none), formatted only when asked. */
    private final StackWalker.StackFrame creator;
    private volatile boolean destroyed;

    RdmaResource(RdmaDevice device, String type, String inheritedOwner) {
        this(device, type, inheritedOwner, false);
    }

    /**
     * @param highRate made per registration or mapping rather than per connection (memory regions,
     *                 windows, DMA mappings): then the creation site is recorded as the device's
     *                 {@link RdmaDevice#TRACK_SITES} option says
     */
    RdmaResource(RdmaDevice device, String type, String inheritedOwner, boolean highRate) {
        this.device = device;
        this.type = type;
        this.id = device.tracker.nextId();
        this.inheritedOwner = inheritedOwner;
        // Walking the stack costs 1-4 us, several times a soft registration, so objects made at a
        // high rate record it only as the device's trackSites option says. Only the frame is kept:
        // turning it into text costs more again, and only leak reports and owner() need it.
        this.creator = device.tracksSite(highRate) ? WALKER.walk(frames -> frames
                .filter(f -> !OWN.get(f.getDeclaringClass()))
                .findFirst().orElse(null)) : null;
    }

    private static URL codeOf(Class<?> c) {
        CodeSource cs = c.getProtectionDomain().getCodeSource();
        return cs == null ? null : cs.getLocation();
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
        return inheritedOwner != null ? inheritedOwner : creator == null ? "unknown" : simpleName(creator.getClassName());
    }

    /** Whether {@link #creationSite()} was recorded (see {@link RdmaDevice#TRACK_SITES}). */
    public boolean hasCreationSite() {
        return creator != null;
    }

    /**
     * Where it was created: the first stack frame outside regmem's registration classes, or a note
     * saying it was not recorded (a memory region, window or DMA mapping not sampled; see
     * {@link RdmaDevice#TRACK_SITES}).
     */
    public String creationSite() {
        return creator != null ? creator.toStackTraceElement().toString()
                : "(not recorded: open the device with " + RdmaDevice.TRACK_SITES + "=all to record every site)";
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
        return this + " owned by " + owner() + ", created at " + creationSite();
    }

    /** The device's name, the type and the id: {@code soft0/ProtectionDomain#1}. */
    @Override
    public String toString() {
        return device.name() + "/" + type + "#" + id;
    }
}
