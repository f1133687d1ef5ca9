package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.internal.Lifecycle;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import org.agrona.collections.ArrayUtil;

/** The open devices of this JVM, in opening order, and their names. */
final class OpenDevices {
    /** Replaced, never mutated, under {@link #LOCK}. */
    private static volatile RdmaDevice[] open = new RdmaDevice[0];
    private static final Object LOCK = new Object();

    private OpenDevices() {
    }

    /**
     * Names and adds a new device: {@code asked}, or the provider's name and the lowest number no
     * open device uses.
     *
     * @throws RdmaException {@link Errno#EEXIST} if an open device already has the asked name
     */
    static RdmaDevice add(String provider, String asked, Function<String, RdmaDevice> make) {
        RdmaDevice d;
        synchronized (LOCK) {
            Set<String> taken = new HashSet<>();
            for (RdmaDevice o : open) {
                taken.add(o.name());
            }
            String name = asked;
            if (name == null) {
                int n = 0;
                while (taken.contains(provider + n)) {
                    n++;
                }
                name = provider + n;
            } else if (taken.contains(name)) {
                throw new RdmaException(Errno.EEXIST, "RdmaDevice: a device named '" + name + "' is open already");
            }
            d = make.apply(name);
            open = ArrayUtil.add(open, d);
        }
        Lifecycle.deviceOpened(d);
        return d;
    }

    static void remove(RdmaDevice d) {
        synchronized (LOCK) {
            open = ArrayUtil.remove(open, d);
        }
        Lifecycle.deviceClosed(d);
    }

    static List<RdmaDevice> list() {
        return List.of(open);
    }
}
