package io.regmem.registration.metrics;

import io.regmem.core.BufferPool;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.internal.Lifecycle;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

/**
 * regmem's JMX beans, under the domain {@code io.regmem}: one per open {@link BufferPool}
 * ({@code type=BufferPool}, {@link BufferPoolMXBean}), {@link RdmaDevice} ({@code type=RdmaDevice},
 * {@link RdmaDeviceMXBean}) and registration cache ({@code type=RegistrationCache},
 * {@link RegistrationCacheMXBean}), each named by its object's name.
 *
 * <p>One call turns them on: {@link #register()} registers a bean for every pool, device and cache
 * open now, and from then on each one opened gets its bean at birth and loses it at close.
 * {@link #unregister()} removes them all and stops. Reading a bean reads the object's own counters
 * on the reader's thread: the allocation, post and poll paths count nothing extra for JMX, allocate
 * nothing for it and take no lock for it.
 */
public final class RegmemMBeans {
    /** The JMX domain. */
    public static final String DOMAIN = "io.regmem";

    private static MBeanServer server;
    private static Sources sources;
    private static final Map<Object, ObjectName> NAMES = new ConcurrentHashMap<>();

    private RegmemMBeans() {
    }

    /** {@link #register(MBeanServer)} with the platform MBean server. */
    public static void register() {
        register(ManagementFactory.getPlatformMBeanServer());
    }

    /**
     * Registers the beans of everything open now, and of everything opened from now on, with
     * {@code mbeanServer}. A second call (while registered) does nothing.
     */
    public static synchronized void register(MBeanServer mbeanServer) {
        if (sources != null) {
            return;
        }
        server = mbeanServer;
        sources = Sources.start(new Sources.Sink() {
            @Override
            public void add(BufferPool pool) {
                put(pool, "BufferPool", pool.name(), new Beans.Pool(pool));
            }

            @Override
            public void add(RdmaDevice device) {
                put(device, "RdmaDevice", device.name(), new Beans.Device(device));
            }

            @Override
            public void add(Lifecycle.Cache cache) {
                put(cache, "RegistrationCache", cache.name(), new Beans.Cache(cache));
            }

            @Override
            public void remove(Object source) {
                drop(source);
            }
        });
    }

    /** Removes every regmem bean and stops registering new ones. Does nothing if not registered. */
    public static synchronized void unregister() {
        if (sources == null) {
            return;
        }
        sources.stop();
        sources = null;
        for (Object o : NAMES.keySet()) {
            drop(o);
        }
        server = null;
    }

    /** True between {@link #register} and {@link #unregister}. */
    public static synchronized boolean isRegistered() {
        return sources != null;
    }

    /**
     * The name of the bean of {@code pool} while registered: {@code io.regmem:type=BufferPool,name=<pool>}
     * (a second open pool of the same name gets {@code "<pool> (2)"}, and so on); that name if it has none.
     */
    public static ObjectName nameOf(BufferPool pool) {
        ObjectName on = NAMES.get(pool);
        return on != null ? on : objectName("BufferPool", pool.name());
    }

    /** The name of the bean of {@code device}: {@code io.regmem:type=RdmaDevice,name=<device>}. */
    public static ObjectName nameOf(RdmaDevice device) {
        return objectName("RdmaDevice", device.name());
    }

    private static ObjectName objectName(String type, String name) {
        try {
            return new ObjectName(DOMAIN + ":type=" + type + ",name=" + ObjectName.quote(name));
        } catch (JMException e) {
            throw new IllegalArgumentException(e);
        }
    }

    private static synchronized void put(Object source, String type, String name, Object bean) {
        MBeanServer s = server;
        if (s == null) {
            return;
        }
        ObjectName on = objectName(type, name);
        try {
            for (int n = 2; s.isRegistered(on); n++) {
                on = objectName(type, name + " (" + n + ")"); // two open pools of one name: both get a bean
            }
            s.registerMBean(bean, on);
            NAMES.put(source, on);
        } catch (JMException | RuntimeException e) {
            System.getLogger(RegmemMBeans.class.getName()).log(System.Logger.Level.WARNING,
                    "regmem: JMX bean " + on + " not registered: " + e);
        }
    }

    private static synchronized void drop(Object source) {
        ObjectName on = NAMES.remove(source);
        MBeanServer s = server;
        if (on == null || s == null) {
            return;
        }
        try {
            if (s.isRegistered(on)) {
                s.unregisterMBean(on);
            }
        } catch (JMException e) {
            System.getLogger(RegmemMBeans.class.getName()).log(System.Logger.Level.WARNING,
                    "regmem: JMX bean " + on + " not removed: " + e);
        }
    }
}
